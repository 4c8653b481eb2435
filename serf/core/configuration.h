#pragma once
// A parallelism configuration (c, K, T), the cluster it runs on, and the one rule that says
// whether it can: every command (plan, size, capacity, predict, simulate, serve, profile,
// infer --inter) asks validate() below, so no two commands answer the question differently.

#include <string>

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

// The cluster a configuration runs on: N nodes of F cores each.
struct ClusterShape {
  int nodes = 1;           // N
  int cores_per_node = 1;  // F
};

// The most requests one serving unit runs at once: each slot has its own message tags and
// communicator in the runtime (serve/messages.h), and no node has more cores than this.
inline constexpr int kMaxSlotsPerUnit = 4096;
// The largest batch size a tuple or configuration may have (requests per batch).
inline constexpr int kMaxBatch = 4096;

// The rule, in this order: c, K, T >= 1; 1 <= b <= kMaxBatch; c <= kMaxSlotsPerUnit; K <= N (a
// request's nodes exist); c*T <= F, computed in 64 bits (every running request has its T threads on
// every node of its unit). InvalidArgument naming the configuration and the rule broken; the
// cluster itself must have N, F >= 1.
Status validate(const Configuration& config, const ClusterShape& shape);
// The same rule for a tuple (i, K, T): exactly i requests running.
Status validate(const ParallelismTuple& tuple, const ClusterShape& shape);

}  // namespace serf
