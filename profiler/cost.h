#pragma once
// The calibration cost (the paper's Table II): what the tuple profile cost against what the
// exhaustive measurement cost, measured (serf validate) or projected for a cluster (serf plan
// --cost-of-exhaustive). Pure computation over serf_core and serf_sim.

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "profiler/precision.h"
#include "profiler/validation.h"
#include "serf/core/profile.h"
#include "serf/core/queue_model.h"
#include "serf/core/status.h"

namespace serf::profiler {

// Measured: the profile's tuples' wall time (TupleStats::wall_s) against the exhaustive run's.
struct CalibrationCost {
  int tuples = 0;
  double profile_wall_s = 0;  // sum of the tuples' wall_s (0: the profile does not say)
  int points = 0;             // exhaustive points measured (VALID or not: each cost its time)
  double exhaustive_wall_s = 0;
  double ratio = 0;  // exhaustive / profile; 0 when either is unknown
  // Rates measured on 2+ configurations, and where the profile's pick (the first queue model's)
  // is the measured best, exactly or within the measurement's CI.
  int rates = 0, same_best = 0, same_best_within_ci = 0;
};
CalibrationCost calibration_cost(const Profile& profile, int points, double exhaustive_wall_s,
                                 const ModelValidation& first_model);
// The cost as `serf validate` prints it (the paper's Table II) and as its report's "cost" block;
// `first_queue` is the queue model whose picks were compared.
void print_calibration_cost(std::FILE* out, const CalibrationCost& c, QueueKind first_queue);
nlohmann::json calibration_cost_json(const CalibrationCost& c, QueueKind first_queue);

// Projected: every configuration (c, K, T) of the cluster at every load level, each run as long
// as the exhaustive runner needs to call it VALID (judge_point): its mean latency's 95 % CI
// half-width within `target.precision` of the mean, at least `target.min_duration_s`, and at
// least max(target.min_requests, min_requests_for_percentile(target.percentile)) answers after
// the warm-up (368 for the p99).
struct ExhaustiveCostOptions {
  int nodes = 1;
  std::vector<int> inter;           // K values measured (the profile's, <= nodes)
  std::vector<double> rates_per_s;  // the load levels
  PrecisionTarget target;           // what makes a point VALID (the runner's defaults)
  double warmup_fraction = 0.1;     // requests run on top of the measured ones
  double switch_s = 0;              // reconfiguration per point (measured: serf serve's switch)
  int64_t probe_requests = 20000;   // simulated per point to find its variance
  int tuple_warmup = 2;             // closed-loop warm-up per tuple in the tuple profile
  // The tuple profile is held to the same precision as the exhaustive points: each tuple runs
  // until its mean service time's 95 % CI is within `target.precision`, (1.96 / precision)^2 SCV
  // samples, at least tuple_min_samples.
  int tuple_min_samples = 10;
};
struct ExhaustiveCost {
  int configurations = 0;
  int levels = 0;
  int points = 0;    // configurations x levels
  int unstable = 0;  // points the model calls unstable: counted at target.min_duration_s
  // Points whose length the request floor (min_requests, the percentile's) or the minimum
  // duration set, rather than the mean's CI.
  int floored = 0;
  double exhaustive_s = 0;
  double longest_point_s = 0;
  double median_point_s = 0;
  double longest_tenth_share = 0;  // share of exhaustive_s in the 10 % longest points
  // The tuple profile at the same precision: sum over tuples of (warm-up + samples) mean_ms / i,
  // one tuple after another (what serf profile does), ...
  int64_t tuple_samples = 0;  // samples over all tuples
  double tuple_profile_s = 0;
  // ... and side by side, as serf profile --side-by-side runs it: each tuple of K nodes on all
  // floor(N/K) units at once, its samples split between them and a warm-up on each:
  // (warm-up + ceil(samples / units)) mean_ms / i. An exhaustive point needs the whole cluster.
  double tuple_profile_side_by_side_s = 0;
  // The tuple profile as the file was measured (its own sample counts), for comparison.
  double tuple_profile_as_profiled_s = 0;
  double ratio = 0;               // exhaustive_s / tuple_profile_s
  double ratio_side_by_side = 0;  // exhaustive_s / tuple_profile_side_by_side_s
};
StatusOr<ExhaustiveCost> project_exhaustive_cost(const Profile& profile,
                                                 const ExhaustiveCostOptions& options);

}  // namespace serf::profiler
