#pragma once
// Discrete-event simulator of SERF's serving units (pure: no I/O).
//
// One unit has c service slots and a FIFO queue; a cluster is `units` such units with arrivals
// routed uniformly at random (ARCHITECTURE.md: a unit sees lambda_all / floor(N/K)). Service is
// state dependent, from the profile's tuples (i, K, T) for i = 1..c, under one of two semantics:
//  - kStart:  a request's service time is drawn when it starts, from the tuple for the number of
//             requests running then, itself included; it does not change afterwards.
//  - kShared: processor-sharing-like. Each request brings work W (mean 1, the tuple's SCV; Gamma,
//             or exactly 1 when scv = 0) and, while n requests run, each advances at rate
//             1/mean_ms(n). With n fixed a request takes W * mean_ms(n), as profiled. The SCV used
//             for the work is the one of the tuple with i = 1 (the work of a request does not
//             depend on later arrivals).
// Service times are Gamma distributed with the tuple's mean and SCV (exponential when scv = 1,
// deterministic when scv = 0).
//
// Batching (SimulationOptions::batching, b > 1; start semantics): a slot serves a batch. When a
// slot is free and requests wait, it takes the first min(queue length, b) of them as one batch,
// at once by default; with a max batch delay D > 0 it starts only when b wait or the oldest has
// waited D (so a lone request waits up to D for company). The batch's service time is drawn at
// its start from level (i, n): n requests, i batches running including itself; every request of
// the batch waits from its arrival to the batch's start and leaves at the batch's end.
//
// Statistics cover the requests after the warm-up (by arrival index); every request is run to
// completion. Percentiles come from a streaming log-linear histogram (relative error <= 0.05%,
// see histogram.h); the 95% confidence half-width of the mean latency uses batch means
// (consecutive completions in `batches` batches, Student t).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serf/core/arrivals.h"
#include "serf/core/service_level.h"
#include "serf/core/status.h"

namespace serf::sim {

enum class ServiceSemantics { kStart, kShared };

StatusOr<ServiceSemantics> parse_service_semantics(const std::string& name);  // "start" | "shared"
const char* service_semantics_name(ServiceSemantics s);

using serf::ServiceLevel;  // service statistics while exactly i run (index i-1)

struct SimulationOptions {
  std::vector<ServiceLevel> levels;  // size c = service slots per unit (batches of one request)
  // Batching: when set, the service of a batch of n = 1..b requests while i = 1..c run; it
  // replaces `levels` (which may be left empty). Start semantics only.
  std::optional<ServiceTable> batching;
  double max_batch_delay_ms = 0;  // with batching: wait up to this long for a batch to fill
  int units = 1;
  ServiceSemantics semantics = ServiceSemantics::kStart;
  ArrivalKind arrival_kind = ArrivalKind::kPoisson;
  double rate_per_s = 0;     // cluster-wide arrival rate
  double arrival_scv = 1.0;  // gamma arrivals only
  int64_t requests = 1000000;
  int64_t warmup = -1;  // requests discarded at the start; -1: requests / 10
  uint64_t seed = 1;
  int batches = 32;
  double percentile = 0;  // also report this latency percentile (0 < percentile < 100), if > 0
};

struct SimulationResult {
  int64_t requests = 0;                                    // measured (after warm-up)
  double latency_ms = 0, wait_ms = 0, service_ms = 0;      // means
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0;  // latency percentiles
  double wait_p99_ms = 0;
  double percentile_ms = 0;     // options.percentile's latency percentile (0 when not asked)
  double latency_ci95_ms = 0;   // half-width of the 95% confidence interval of latency_ms
  double wait_probability = 0;  // fraction of measured requests that queued
  double utilization = 0;       // offered load per unit: lambda_unit / (c mu_c)
  double simulated_s = 0;       // simulated time
};

// rho = lambda_unit / (c * mu_c): the load a unit must carry with all c slots busy; with batching
// lambda_unit * mean_ms(c, b) / (c * b), the load over the capacity with full batches.
double offered_utilization(const SimulationOptions& options);

// InvalidArgument for bad options; Infeasible when the load is unstable (rho >= 1): the queue grows
// without bound and no steady-state number exists.
StatusOr<SimulationResult> simulate(const SimulationOptions& options);

// Replays one given sample path: request k arrives at arrival_ms[k] (non-decreasing) at unit
// unit_of[k] (0 <= unit_of[k] < units), and is served as `simulate` would serve it (service times
// drawn from `levels` with `seed`; deterministic where a level's scv is 0). Returns every request's
// latency in ms, in the order given. Used as a control variate: the queue a model describes, fed
// the very arrivals a measurement saw (profiler/validation.h).
StatusOr<std::vector<double>> replay_latencies(const std::vector<ServiceLevel>& levels,
                                               ServiceSemantics semantics, int units,
                                               const std::vector<double>& arrival_ms,
                                               const std::vector<int>& unit_of, uint64_t seed = 1);

}  // namespace serf::sim
