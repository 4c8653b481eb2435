#pragma once
// Validation of the queueing model against measurement: for every measured (configuration, rate)
// point of an exhaustive run, the latency a queue model predicts from the tuple profile, the
// relative error, summary statistics, and whether the planner's pick at each rate is the measured
// best. Pure computation over serf_core (no files, no MPI), so it is tested without a cluster.

#include <string>
#include <vector>

#include "serf/core/planner.h"
#include "serf/core/profile.h"
#include "serf/core/queue_model.h"
#include "serf/core/statistics.h"
#include "serf/core/status.h"

namespace serf::profiler {

// A point's requests in arrival order, warm-up included: the sample path the measurement saw.
struct RequestTrace {
  int warmup = 0;                  // the first `warmup` requests are served but not measured
  std::vector<double> arrival_ms;  // scheduled arrival, from the first request's
  std::vector<int> unit;           // the serving unit the request was routed to
  std::vector<double> latency_ms;  // measured, from the scheduled arrival
  bool empty() const { return arrival_ms.empty(); }
};

// One point of an exhaustive run (serf-exhaustive/1 "points").
struct MeasuredPoint {
  Configuration config;
  double rate_per_s = 0;  // cluster-wide arrival rate
  int requests = 0;
  double mean_latency_ms = 0;
  double p99_latency_ms = 0;
  double mean_service_ms = 0;
  double ci95_ms = -1;     // half-width of the 95% CI of the mean latency; < 0 when unknown
  double arrival_scv = 1;  // SCV of the gaps of the cluster-wide arrivals (1: Poisson)
  // Precision-driven points (serf profile --exhaustive --precision): 1 VALID, 0 INVALID with the
  // reasons in `verdict`; -1 not judged (a fixed request count).
  int valid = -1;
  std::string verdict;
  double wall_s = 0;   // what measuring the point cost (0: unknown)
  RequestTrace trace;  // empty in files written before traces existed
  // The configuration's tuples (1..c, K, T, b) measured closed-loop just before the point (serf
  // profile --exhaustive --fresh-tuples): the service times a self-calibrating controller would
  // hold then. Empty: not measured.
  std::vector<TupleStats> fresh;
};

// The fewest measured requests whose p99 is compared with the tail approximation: below it the
// measured p99 rests on too few samples above it to mean anything.
inline constexpr int kMinRequestsForP99 = 200;
// A point whose measured mean service time is off the profile's by more than this fraction ran on
// a machine that changed since it was profiled (other load, clock, thermal): its error is the
// input's, not the queue model's. Reported apart, never dropped.
inline constexpr double kMaxServiceDrift = 0.10;

struct PointResult {
  MeasuredPoint measured;  // its trace left out (the report keeps the numbers)
  int units = 0;
  double unit_rate_per_s = 0;
  double utilization = 0;  // unit rate / the model's capacity c mu_c (also when >= 1)
  // prediction.stable false: rho >= 1, no numbers. With bursty arrivals (arrival_scv != 1) the
  // wait carries the Allen-Cunneen factor of the unit's split stream, as the planner applies it.
  Prediction prediction;
  double rel_error = 0;  // |predicted - measured| / measured, only when stable
  // measured mean service / the predicted mean service - 1 (0 when the measurement has none).
  double service_drift = 0;
  // The queue model alone: the prediction re-made with the configuration's service times scaled
  // by s so that the predicted mean service equals the measured one (by scaling, latency(s x
  // profile, lambda) = s x latency(profile, s lambda)). Its error is the queue approximation's,
  // free of the profile's: has_rescaled false when the point has no measured service time or the
  // rescaled model is saturated.
  bool has_rescaled = false;
  double rescale = 1;  // s
  double rescaled_latency_ms = 0;
  double rescaled_rel_error = 0;
  // The sample-path (control-variate) estimate of the point's long-run mean latency, from its
  // trace: the replay queue (serf/sim, shared interference, deterministic work, the profile's
  // service times) is fed the very arrivals and routing the measurement saw; adjusted = measured -
  // (replay mean - the replay queue's long-run mean). Arrival luck and the empty start move the
  // measurement and the replay alike and cancel; what the real system does differently stays.
  // has_adjusted false without a trace, or when the replay queue is saturated at this rate.
  bool has_adjusted = false;
  double replay_ms = 0;           // the replay queue's mean over the measured requests
  double replay_expected_ms = 0;  // its long-run mean (simulated, Poisson/Gamma arrivals)
  double adjusted_ms = 0;
  // The CI half-width: batch means of measured - replay per request, and the simulation's.
  double adjusted_ci95_ms = 0;
  double adjusted_rel_error = 0;  // |predicted - adjusted| / adjusted
  bool has_p99 = false;           // stable, a measured p99 and at least kMinRequestsForP99 requests
  double predicted_p99_ms = 0;    // the tail approximation (tail_latency.h)
  double p99_rel_error = 0;
  // The prediction from the point's fresh tuples (MeasuredPoint::fresh) in place of the
  // profile's: a prediction made before the point ran, from a profile seconds old. has_fresh
  // false without fresh tuples or when that model is saturated at the point's rate.
  bool has_fresh = false;
  double fresh_latency_ms = 0;
  double fresh_rel_error = 0;
};

// Relative errors of the stable points. Percentiles interpolate linearly between order statistics
// at position q (n - 1) (numpy's default), so they can be checked by hand.
struct ErrorSummary {
  int count = 0;     // points with a prediction
  int unstable = 0;  // points skipped: predicted rho >= 1
  // Points of batched configurations (b > 1) this queue model cannot predict (it does not batch:
  // mdc, mmc, allen-cunneen, mdc-exact); they are not in ModelValidation::points.
  int not_modelled = 0;
  double mean = 0, median = 0, p95 = 0, max = 0;
  int within_ci95 = 0;       // points whose prediction lies inside the measured 95% CI
  int with_ci95 = 0;         // points that carry a CI
  double mean_ci95_rel = 0;  // mean of ci95 / measured over those points
};

// At one rate measured on two or more configurations: the measured best and the planner's pick.
struct RateComparison {
  double rate_per_s = 0;
  int configurations = 0;  // measured at this rate
  Configuration measured_best;
  double measured_best_ms = 0;
  bool planner_stable = false;  // false: no measured configuration is predicted stable
  Configuration planner_pick;
  double planner_predicted_ms = 0;
  double planner_measured_ms = 0;
  bool match = false;
  double penalty = 0;  // planner_measured_ms / measured_best_ms - 1
  // The pick is the best within the measurement's precision: its measured mean exceeds the best's
  // by at most the two 95 % CI half-widths combined (sqrt(h_pick^2 + h_best^2)). True on a match.
  bool within_ci = false;
  // The same against the sample-path estimates, when every configuration at this rate has one
  // (the raw measured best is itself subject to arrival luck).
  bool has_adjusted = false;
  Configuration adjusted_best;
  bool adjusted_match = false;
  double adjusted_penalty = 0;  // the pick's estimate / the best estimate - 1
  // The pick by the fresh predictions, when every configuration at this rate has one.
  bool has_fresh = false;
  Configuration fresh_pick;
  bool fresh_match = false;
  bool fresh_within_ci = false;  // the fresh pick is the best, or within the CIs (as within_ci)
};

struct ModelValidation {
  QueueKind queue = kDefaultQueue;
  // In the order of the measured points, without those the model cannot predict (not_modelled).
  std::vector<PointResult> points;
  ErrorSummary summary;
  ErrorSummary p99_summary;  // of the p99 (points with has_p99; no CI counts)
  // The mean-latency errors of the points whose |service_drift| <= kMaxServiceDrift.
  ErrorSummary steady_summary;
  // The mean-latency errors of the rescaled predictions (PointResult::has_rescaled).
  ErrorSummary rescaled_summary;
  // The errors against the sample-path estimates (PointResult::has_adjusted); within_ci95 counts
  // the adjusted CI.
  ErrorSummary adjusted_summary;
  // The errors of the fresh predictions against the raw measured means (PointResult::has_fresh);
  // within_ci95 counts the measured CI.
  ErrorSummary fresh_summary;
  std::vector<RateComparison> rates;         // ascending rate
  int matches = 0;                           // rates where the pick is the measured best
  int matches_within_ci = 0;                 // rates where it is, or within the CIs
  double mean_penalty = 0, max_penalty = 0;  // over rates with a stable pick
  int adjusted_rates = 0;           // rates with a stable pick and estimates for all configurations
  int adjusted_matches = 0;         // of those, where the pick is the best by the estimates
  int fresh_rates = 0;              // rates where every configuration has a fresh prediction
  int fresh_matches = 0;            // of those, where the fresh pick is the measured best
  int fresh_matches_within_ci = 0;  // ... or within the CIs
};

struct ValidationReport {
  int nodes = 0;
  int cores_per_node = 0;
  std::vector<ModelValidation> models;
};

// Predicts every point under each queue model. Every measured configuration must fit the cluster
// (K <= nodes, c*T <= cores) and have its tuples (1..c, K, T) in the profile: otherwise NotFound
// or InvalidArgument naming the point. `points` must not be empty. A batched configuration
// (c, K, T, b > 1) is predicted by the bulk-service model (serf/core/batch_queue.h) from the
// tuples (1..c, K, T, 1..b) (service_table's rule for batch sizes the profile lacks), under
// Poisson arrivals; it has no sample-path estimate, p99 or rescaled prediction.
StatusOr<ValidationReport> validate_predictions(const Profile& profile,
                                                const std::vector<MeasuredPoint>& points, int nodes,
                                                const std::vector<QueueKind>& queues);

// Relative-error statistics of `errors` (any order); zeros when empty.
void summarize_errors(std::vector<double> errors, ErrorSummary* summary);
// Arrival rates putting configuration `config` at each utilization u of its capacity as the
// profile predicts it (u x floor(N/K) x c mu_c, md-interf; batched: c b / the time of c full
// batches), ascending. For exhaustive runs that
// load every configuration alike.
StatusOr<std::vector<double>> rates_at_utilizations(const Profile& profile,
                                                    const Configuration& config, int nodes,
                                                    const std::vector<double>& utilizations);

}  // namespace serf::profiler
