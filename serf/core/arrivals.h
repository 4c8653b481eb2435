#pragma once
// Arrival processes shared by the simulator and the profiler's load generator (pure: no I/O, no
// clock). A process yields absolute arrival times in seconds from time 0; the caller owns the RNG,
// so a seed fixes the whole stream.
//
// Every process is a renewal process in "operational time": unit-mean gaps g (exponential for
// Poisson, Gamma with the given SCV for bursty traffic, 1 for deterministic) mapped to real time
// through the inverse of the cumulative rate Lambda(t). With one constant rate this is t += g /
// rate; with a rate schedule (piecewise-constant rates) it is the standard time change, exact for a
// non-homogeneous Poisson process.

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "serf/core/statistics.h"
#include "serf/core/status.h"

namespace serf {

enum class ArrivalKind { kPoisson, kGamma, kDeterministic };

// "poisson", "gamma", "deterministic" (the CLI's spelling).
StatusOr<ArrivalKind> parse_arrival_kind(const std::string& name);
const char* arrival_kind_name(ArrivalKind kind);

// One piece of a rate schedule: `rate_per_s` for `duration_s` seconds (rate 0 is a pause).
struct RateSegment {
  double duration_s = 0;
  double rate_per_s = 0;
};

class ArrivalProcess {
 public:
  // A constant rate. `scv` is the squared coefficient of variation of the gaps; it must be 1 for
  // Poisson and is ignored (0) for deterministic; Gamma accepts any scv > 0.
  static StatusOr<ArrivalProcess> Create(ArrivalKind kind, double rate_per_s, double scv = 1.0);
  // Piecewise-constant rates, one segment after another; after the last segment the stream ends
  // (next_s returns +infinity).
  static StatusOr<ArrivalProcess> CreateSchedule(ArrivalKind kind,
                                                 std::vector<RateSegment> schedule,
                                                 double scv = 1.0);

  // The absolute time (s) of the next arrival; +infinity once a schedule has ended.
  template <typename Rng>
  double next_s(Rng& rng) {
    const double g = unit_gap(rng);
    if (schedule_.empty()) {
      now_s_ += g * inv_rate_s_;
      return now_s_;
    }
    return next_scheduled_s(g);
  }

  ArrivalKind kind() const { return kind_; }
  double scv() const { return scv_; }
  // The long-run rate for a constant process; for a schedule, arrivals / total duration.
  double mean_rate_per_s() const { return mean_rate_per_s_; }
  // Back to time 0 (the RNG is the caller's to reseed).
  void reset();

 private:
  ArrivalProcess() = default;

  // Unit-mean gaps: exponential (Poisson), Gamma with the SCV, or exactly 1 (deterministic).
  template <typename Rng>
  double unit_gap(Rng& rng) {
    return gap_(rng);
  }
  double next_scheduled_s(double gap);

  ArrivalKind kind_ = ArrivalKind::kPoisson;
  double scv_ = 1.0;
  double mean_rate_per_s_ = 0;
  double inv_rate_s_ = 0;  // 1 / rate for a constant process
  double now_s_ = 0;
  GammaDraw gap_{1.0, 1.0};  // mean 1 and the process's SCV (0 for deterministic)

  // Schedule state: segment k covers [start_s_[k], start_s_[k] + duration) and operational time
  // [op_start_[k], op_start_[k] + rate * duration).
  std::vector<RateSegment> schedule_;
  std::vector<double> start_s_, op_start_;
  double op_now_ = 0;
  size_t segment_ = 0;
};

}  // namespace serf
