#pragma once
// Objectives beyond the paper's mean latency (planner.h's Objective): a latency percentile from
// the tail approximation (tail_latency.h, with the profiled service SCV's correction of the wait),
// and bursty arrivals through the Allen-Cunneen correction of the wait. The planner, SLO sizing and
// capacity take it through their options.

#include <memory>
#include <string>

#include "serf/core/planner.h"
#include "serf/core/profile.h"
#include "serf/core/tail_latency.h"

namespace serf {

// The smallest latency percentile an objective takes (percent). No SLO is held on a lower one, and
// far below it p / 100 underflows (p = 5e-324 became q = 0 and a NaN score).
inline constexpr double kMinPercentile = 0.001;

struct LatencyObjectiveOptions {
  double percentile = 0;   // 0: the mean; otherwise in [kMinPercentile, 100), e.g. 99 for p99
  double arrival_scv = 1;  // SCV of the gaps of the cluster-wide arrival stream (1: Poisson)
  // The cluster size when it is fixed (plan, capacity): a unit sees a stream split over
  // floor(N/K) units (split_arrival_scv). 0 when it is what is being searched (size): then the
  // unit SCV is taken as max(arrival_scv, 1), the upper bound over any number of units.
  int nodes = 0;
};

// "p99", "p99.9", "p99.999999": the percentile as the CLI takes it (--objective pNN), every digit
// kept, so a label never reads as a value the CLI refuses ("p100").
std::string percentile_name(double percentile);

class LatencyObjective : public Objective {
 public:
  // `profile` must outlive the objective (it reads the tuples' SCVs).
  static StatusOr<std::unique_ptr<LatencyObjective>> Create(const Profile& profile,
                                                            const LatencyObjectiveOptions& options);

  std::string name() const override;  // "p99", "mean", with " (arrival SCV x)" when not Poisson
  double score_ms(const ConfigurationFamily& family, int c, double unit_rate_per_s,
                  const Prediction& prediction) const override;
  double lower_bound_ms(const ConfigurationFamily& family, int c) const override;

  // The unit arrival SCV and the wait factor used for a family (for reports).
  double unit_arrival_scv(const ConfigurationFamily& family) const;
  double wait_factor(const ConfigurationFamily& family, int c) const;
  // The factor the tail approximation uses: wait_factor times service_scv_wait_factor.
  double tail_wait_factor(const ConfigurationFamily& family, int c) const;
  // The mean-latency prediction with the bursty correction applied.
  Prediction corrected(const ConfigurationFamily& family, int c, const Prediction& p) const;
  // Service levels 1..c of the family as the tail approximation sees them (the oblivious models
  // use tuple 1 for every level).
  std::vector<ServiceLevel> levels(const ConfigurationFamily& family, int c) const;
  const LatencyObjectiveOptions& options() const { return options_; }

 private:
  LatencyObjective(const Profile& profile, LatencyObjectiveOptions options)
      : profile_(profile), options_(options) {}
  const Profile& profile_;
  LatencyObjectiveOptions options_;
};

// `serf predict`'s question: configuration `config` on `nodes` nodes at cluster rate `rate_per_s`.
struct ConfigurationPrediction {
  Configuration config;
  QueueKind queue = kDefaultQueue;
  int nodes = 0;
  int units = 0;                   // floor(N / K)
  double rate_per_s = 0;           // cluster-wide
  double unit_rate_per_s = 0;      // what one unit sees
  double unit_capacity_per_s = 0;  // c mu_c: the unit's largest stable rate
  Prediction prediction;  // with the bursty-arrival correction when an objective asks for it
  bool scored = false;    // an objective was given and the load is stable
  double score_ms = 0;    // then its value (a percentile, or the simulated mean)
};

// Checks the configuration against the cluster (validate()), then predicts. `analytic` (nullptr:
// the paper's mean under Poisson arrivals) corrects the prediction; `score` (the analytic objective
// or its simulation fallback) scores it. An unstable load is a result (prediction.stable false),
// not an error: the caller prints it and returns UnstableLoad.
StatusOr<ConfigurationPrediction> predict_configuration(const Profile& profile,
                                                        const Configuration& config, int nodes,
                                                        double rate_per_s, QueueKind queue,
                                                        const LatencyObjective* analytic,
                                                        const Objective* score);

}  // namespace serf
