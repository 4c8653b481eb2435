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

#include "serf/core/status.h"

namespace serf {

// Exactly `service` batches running at once, each of `batch` requests on `inter` nodes with
// `intra` threads per node (batch 1: `service` requests).
struct ParallelismTuple {
  int service = 1;  // i
  int inter = 1;    // K
  int intra = 1;    // T
  int batch = 1;    // b
  bool operator==(const ParallelismTuple& o) const {
    return service == o.service && inter == o.inter && intra == o.intra && batch == o.batch;
  }
  bool operator!=(const ParallelismTuple& o) const { return !(*this == o); }
};

// At most `service` batches at once (the admission limit c), each of at most `batch` requests, on
// K nodes with T threads per node. batch = 1 is the paper's configuration (c, K, T).
struct Configuration {
  int service = 1;  // c
  int inter = 1;    // K
  int intra = 1;    // T
  int batch = 1;    // b: a free slot takes up to b waiting requests
  bool operator==(const Configuration& o) const {
    return service == o.service && inter == o.inter && intra == o.intra && batch == o.batch;
  }
  bool operator!=(const Configuration& o) const { return !(*this == o); }
};

// "(i=2, K=1, T=4)" and "(c=2, K=1, T=4)"; b is shown only when > 1: "(c=2, K=1, T=4, b=8)".
std::string to_string(const ParallelismTuple& t);
std::string to_string(const Configuration& c);

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
};

struct Hardware {
  int nodes = 1;           // N
  int cores_per_node = 1;  // F
};

// The range a tuple's statistics must lie in (Profile::validate).
inline constexpr double kMinServiceMs = 1e-6, kMaxServiceMs = 1e9, kMaxServiceScv = 1e4;
// The largest batch size a tuple or configuration may have (requests per batch).
inline constexpr int kMaxBatch = 4096;

struct Profile {
  std::string model;
  Hardware hardware;
  std::vector<TupleStats> tuples;
  bool illustrative = false;  // example numbers, not a measurement
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
