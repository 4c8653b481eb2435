#pragma once
// Tuple profiling (the paper's input to the queueing model) and the exhaustive-profiling baseline
// (every configuration at every load, the cost SERF avoids: the paper's Table II). Both drive a
// Controller, so they run the same on real and on emulated nodes.

#include <functional>
#include <string>
#include <vector>

#include "profiler/idle_probe.h"
#include "profiler/precision.h"
#include "profiler/validation.h"
#include "serf/core/arrivals.h"
#include "serf/core/profile.h"
#include "serve/controller.h"

namespace serf::profiler {

// Tuples (i, K, T, b) with K in `inter` (K <= nodes), T in 1..F, i*T <= F and b in `batches`,
// ordered by K, T, b, i.
std::vector<ParallelismTuple> profile_tuples(int nodes, int cores_per_node,
                                             const std::vector<int>& inter,
                                             const std::vector<int>& batches = {1});
// Every configuration (c, K, T, b) with c*T <= F, K in `inter` (K <= nodes), b in `batches`.
std::vector<Configuration> all_configurations(int nodes, int cores_per_node,
                                              const std::vector<int>& inter,
                                              const std::vector<int>& batches = {1});

// Mean and squared coefficient of variation (population variance / mean^2) of `samples_ms`.
TupleStats tuple_stats(const ParallelismTuple& tuple, const std::vector<double>& samples_ms);

StatusOr<std::vector<int>> parse_int_list(const std::string& spec, const std::string& flag);

using ProgressFn = std::function<void(size_t done, size_t total, const std::string& what)>;

// One tuple's measurements in several passes, and what the profile keeps of them. A pass whose
// mean occupancy lies further than max(5 %, 3 scaled MADs) from the median pass mean was disturbed
// (another job on the node, a descheduled rank) and is left out; mean, SCV and node_ms pool the
// samples of the passes kept. With one pass this is tuple_stats over its samples.
struct PassSamples {
  std::vector<double> occupancy_ms;  // dispatch to answer: the service time
  std::vector<double> node_ms;       // the nodes' share
};
TupleStats pool_passes(const ParallelismTuple& tuple, const std::vector<PassSamples>& passes);

// One pass of one tuple: the engine configured to it, `warmup` requests, then `samples` measured
// closed-loop, on one unit or (`side_by_side`) on every unit the tuple's K leaves room for at
// once. The tuple profile and the exhaustive run's fresh tuples both measure this way.
StatusOr<PassSamples> measure_tuple(serve::Controller& controller, const ParallelismTuple& tuple,
                                    int warmup, int samples, bool side_by_side);

struct TupleProfileOptions {
  std::string model;
  Hardware hardware;
  std::vector<int> inter;
  int samples = 10;  // per tuple, split over the passes
  int warmup = 2;    // per tuple and pass
  // Passes over all tuples: a disturbance of a few seconds then spoils one pass of a tuple, not
  // the tuple's whole profile. 1: each tuple once (the paper's procedure).
  int passes = 1;
  // Batch sizes b of the tuples (i, K, T, b): each measured with i full batches of b running.
  std::vector<int> batches = {1};
  // Non-empty: measure exactly these tuples, in this order, instead of the grid of inter and
  // batches (serf profile --refresh re-measures the tuples whose drift was seen).
  std::vector<ParallelismTuple> tuples = {};
  // Each tuple of K nodes measured on all floor(N/K) units at once, its samples pooled (and each
  // unit's own warm-up left out): about N/K times fewer seconds per tuple. Right only when the
  // units do not share a machine (on one host they share its cores and memory bandwidth).
  bool side_by_side = false;
  // After the closed-loop passes, each tuple of batch 1 is probed for its idle-arrival penalty
  // (idle_probe.h), which the queue model adds for arrivals that find a free slot.
  bool idle_probe = true;
};

// Closed loop per tuple: exactly i batches of b requests running on one unit; records each service
// time. With passes > 1 the tuples are measured round robin, `passes` times each, and pooled
// (pool_passes). `partial` always holds every tuple measured so far, pooled over its passes so far.
StatusOr<Profile> run_tuple_profile(serve::Controller& controller,
                                    const TupleProfileOptions& options, const ProgressFn& progress,
                                    Profile* partial);

struct ExhaustiveOptions {
  Hardware hardware;
  std::vector<int> inter;
  std::vector<int> batches = {1};   // b of the configurations (c, K, T, b)
  std::vector<double> rates_per_s;  // total arrival rate over the cluster
  // Instead of rates_per_s: each configuration at these fractions of its capacity as
  // `capacity_profile` predicts it (rates_at_utilizations), so every configuration is loaded alike.
  std::vector<double> utilizations;
  const Profile* capacity_profile = nullptr;
  int requests = 100;
  uint64_t seed = 1;
  // The first `warmup` arrivals of each point are served but left out of its statistics: the
  // point starts from an empty queue, which biases a short run's mean low near saturation.
  int warmup = 0;
  // The arrival process of every point (Poisson by default; gamma with arrival_scv for bursty).
  ArrivalKind arrivals = ArrivalKind::kPoisson;
  double arrival_scv = 1;
  // Precision-driven points (--precision): each runs until judge_point calls it VALID (checked
  // every tick) or a cap is hit, and the warm-up is cut by MSER-5 instead of `warmup`; `requests`
  // is then unused. Off: `requests` after `warmup`, as before, and no verdict.
  bool precision_driven = false;
  PrecisionTarget target;
  int max_requests = 20000;     // cap: arrivals generated per point
  double max_duration_s = 300;  // cap: arrivals stop after this long
  // --fresh-tuples: before each point of batch 1, its configuration's tuples (1..c, K, T) are
  // measured closed-loop, `fresh_samples` each after `fresh_warmup` (0: not measured).
  int fresh_samples = 0;
  int fresh_warmup = 2;
};

struct ExhaustiveRow {
  Configuration config;
  double rate_per_s = 0;
  int requests = 0;            // measured (after the warm-up)
  double mean_latency_ms = 0;  // from scheduled arrival (no coordinated omission)
  double p99_latency_ms = 0;
  double mean_latency_ci95_ms = -1;  // batch means (10 batches in arrival order); < 0: too few
  double mean_service_ms = 0;        // slots' occupancy, dispatch to answer (the profile's mean_ms)
  double arrival_scv = 1;  // SCV of the gaps of the arrival stream (1: Poisson, 0: deterministic)
  double wall_s = 0;       // what measuring this point cost
  bool judged = false;     // precision-driven: the verdict below was made
  PointVerdict verdict;    // VALID or INVALID with reasons
  RequestTrace trace;      // every request of the point, for serf validate's sample-path replay
  std::vector<TupleStats> fresh;  // ExhaustiveOptions::fresh_samples: (1..c, K, T) just before
  double fresh_wall_s = 0;        // what measuring them cost (not in wall_s)
};

struct ExhaustiveReport {
  std::vector<ExhaustiveRow> rows;
  double total_wall_s = 0;
  // The configuration with the lowest measured mean latency at each rate.
  std::vector<ExhaustiveRow> best_per_rate() const;
};

StatusOr<ExhaustiveReport> run_exhaustive(serve::Controller& controller,
                                          const ExhaustiveOptions& options,
                                          const ProgressFn& progress, ExhaustiveReport* partial);

std::string exhaustive_csv(const ExhaustiveReport& report);
std::string exhaustive_json(const ExhaustiveReport& report, const std::string& model,
                            const Hardware& hardware);

}  // namespace serf::profiler
