#pragma once
// The profile: measured service statistics of parallelism degree tuples (i, K, T).
// Plain data shared by the planner, the simulator and the profiler (format "serf-profile/1").

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "serf/core/status.h"

namespace serf {

// Exactly `service` requests running at once, each on `inter` nodes with `intra` threads per node.
struct ParallelismTuple {
  int service = 1;  // i
  int inter = 1;    // K
  int intra = 1;    // T
  bool operator==(const ParallelismTuple& o) const {
    return service == o.service && inter == o.inter && intra == o.intra;
  }
};

// At most `service` requests at once (the admission limit c), each on K nodes with T threads.
struct Configuration {
  int service = 1;  // c
  int inter = 1;    // K
  int intra = 1;    // T
  bool operator==(const Configuration& o) const {
    return service == o.service && inter == o.inter && intra == o.intra;
  }
};

std::string to_string(const ParallelismTuple& t);  // "(i=2, K=1, T=4)"
std::string to_string(const Configuration& c);     // "(c=2, K=1, T=4)"

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
  // The tuples (1..c, K, T) that configuration (c, K, T) needs, in order of i; NotFound names the
  // first missing one.
  StatusOr<std::vector<const TupleStats*>> tuples_for(const Configuration& c) const;
  // Checks ranges (nodes, cores >= 1; mean_ms finite > 0; scv finite >= 0; i,K,T >= 1; no
  // duplicates).
  Status validate() const;

 private:
  static uint64_t key(const ParallelismTuple& t);
  std::unordered_map<uint64_t, size_t> index_;
};

}  // namespace serf
