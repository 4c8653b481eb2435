#pragma once
// The profile: measured service statistics of parallelism degree tuples (i, K, T, b).
// Plain data shared by the planner, the simulator and the profiler (format "serf-profile/1").
//
// Batching (the fourth knob, b): a slot serves a *batch* of requests at once. Tuple (i, K, T, b)
// is the service time of one batch of b requests while exactly i batches run, each on K nodes with
// T threads per node; with b = 1 (the default, and what a file without "batch" means) it is the
// paper's tuple (i, K, T). A configuration (c, K, T, b) runs at most c batches of at most b
// requests. How a batch of b' < b is served is service_table()'s rule (service_level.h).

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "serf/core/configuration.h"
#include "serf/core/idle_penalty.h"
#include "serf/core/status.h"

namespace serf {

struct TupleStats {
  ParallelismTuple tuple;
  double mean_ms = 0;  // mean service time of one request while exactly i run
  double scv = 0;      // squared coefficient of variation of the service time
  int samples = 0;     // requests measured
  double wall_s = 0;   // wall time the profiler spent on this tuple (0 when unknown)
  // Mean time the nodes computed (the rest of mean_ms is dispatch and result messaging, which
  // also holds the slot); 0 when unknown. Emulated nodes sleep this when it is known.
  double node_ms = 0;
  // Profiled in `passes` passes over all tuples (spread in time); the statistics pool the
  // `passes_kept` passes that were not disturbed (profiler/tuple_profiler.h). 0: one pass.
  int passes = 0;
  int passes_kept = 0;
  // serf profile --refresh: when this tuple was last re-measured (UTC, ISO 8601; empty: as first
  // profiled), and the factor its mean was scaled by since it was measured, by the drift seen on
  // its neighbours (0: not scaled).
  std::string refreshed_at = {};
  double drift_scale = 0;
  // The idle-arrival penalty measured at a few gaps, sorted by gap (serf/core/idle_penalty.h);
  // empty: not measured (the model then adds nothing).
  std::vector<IdlePoint> idle = {};
};

// The hardware a profile was measured on: N nodes of F cores.
using Hardware = ClusterShape;

// The range a tuple's statistics must lie in (Profile::validate).
inline constexpr double kMinServiceMs = 1e-6, kMaxServiceMs = 1e9, kMaxServiceScv = 1e4;

struct Profile {
  std::string model;
  Hardware hardware;
  std::vector<TupleStats> tuples;
  bool illustrative = false;  // example numbers, not a measurement
  // A run that stopped early (a node died) left only some tuples: a plan from them may differ
  // from the full profile's, so commands refuse it unless asked (--allow-incomplete).
  bool incomplete = false;
  std::string note;

  // nullptr when the profile holds no such tuple. O(1) after reindex(), a linear scan before.
  const TupleStats* find(const ParallelismTuple& t) const;
  // Builds the lookup index; call after filling or changing `tuples` (load_profile does).
  void reindex();
  // The tuples (1..c, K, T, b) of configuration (c, K, T, b) with full batches, in order of i;
  // NotFound names the first missing one. (Batches of fewer requests: service_table().)
  StatusOr<std::vector<const TupleStats*>> tuples_for(const Configuration& c) const;
  // The batch sizes b of the tuples (1, K, T, b) the profile holds, ascending; the planner
  // searches b over these.
  std::vector<int> batch_sizes(int inter, int intra) const;
  // Checks ranges (nodes, cores >= 1; mean_ms finite > 0; scv finite >= 0; i,K,T >= 1;
  // 1 <= b <= kMaxBatch; no duplicates).
  Status validate() const;

 private:
  struct TupleHash {
    size_t operator()(const ParallelismTuple& t) const;
  };
  std::unordered_map<ParallelismTuple, size_t, TupleHash> index_;
};

}  // namespace serf
