// validate(): the one configuration-validity rule every command asks (serf/core/configuration.h).
#include "serf/core/configuration.h"

#include <catch2/catch.hpp>
#include <climits>
#include <string>

#include "serf/core/cluster_limits.h"

using serf::ClusterShape;
using serf::Configuration;
using serf::ParallelismTuple;
using serf::validate;

namespace {
bool says(const serf::Status& s, const std::string& text) {
  return !s.ok() && s.message().find(text) != std::string::npos;
}
}  // namespace

TEST_CASE("validate accepts a configuration that fits, up to the limits", "[core]") {
  const ClusterShape shape{4, 8};  // 4 nodes x 8 cores
  CHECK(validate(Configuration{1, 1, 1}, shape).ok());
  CHECK(validate(Configuration{2, 4, 4}, shape).ok());  // c*T = 8 = F, K = 4 = N
  CHECK(validate(Configuration{8, 1, 1}, shape).ok());
  CHECK(validate(ParallelismTuple{4, 2, 2}, shape).ok());
}

TEST_CASE("validate names the rule a configuration breaks", "[core]") {
  const ClusterShape shape{4, 8};
  const auto small = validate(Configuration{0, 1, 1}, shape);
  CHECK(small.exit_code() == 2);
  CHECK(says(small, "configuration (c=0, K=1, T=1): c, K and T must be >= 1"));
  CHECK(says(validate(Configuration{1, -1, 1}, shape), "must be >= 1"));
  CHECK(says(validate(Configuration{1, 1, 0}, shape), "must be >= 1"));
  CHECK(says(validate(Configuration{1, 5, 1}, shape),
             "configuration (c=1, K=5, T=1) needs K = 5 nodes per request but the cluster has 4"));
  CHECK(says(validate(Configuration{3, 1, 4}, shape),
             "configuration (c=3, K=1, T=4) needs c*T = 12 threads per node but a node has 8 "
             "cores"));
  CHECK(says(validate(ParallelismTuple{3, 1, 4}, shape), "tuple (i=3, K=1, T=4) needs i*T = 12"));
  CHECK(says(validate(Configuration{4097, 1, 1}, ClusterShape{1, 1 << 20}),
             "c = 4097 requests at once, more than 4096"));
  CHECK(validate(Configuration{4096, 1, 1}, ClusterShape{1, 4096}).ok());
  CHECK(validate(Configuration{2, 1, 4, 8}, shape).ok());
  CHECK(says(validate(Configuration{2, 1, 4, 0}, shape),
             "configuration (c=2, K=1, T=4, b=0): the batch size b must lie in [1, 4096] (got 0)"));
  CHECK(says(validate(ParallelismTuple{1, 1, 1, 4097}, shape), "must lie in [1, 4096] (got 4097)"));
}

TEST_CASE("validate computes c*T in 64 bits", "[core]") {
  // 65536 * 65536 wraps to 0 in 32-bit int arithmetic and would pass c*T <= F.
  const auto s = validate(Configuration{4096, 1, 1 << 20}, ClusterShape{1, INT_MAX});
  CHECK(says(s, "needs c*T = 4294967296 threads per node"));
}

TEST_CASE("validate refuses an empty cluster", "[core]") {
  CHECK(says(validate(Configuration{1, 1, 1}, ClusterShape{0, 8}),
             "nodes and cores per node must be >= 1"));
  CHECK(says(validate(Configuration{1, 1, 1}, ClusterShape{2, 0}),
             "nodes and cores per node must be >= 1"));
}

TEST_CASE("a cluster's size lies within what the flags take", "[core]") {
  // A profile of 2^31 - 1 nodes was read: simulate then made as many serving units.
  CHECK(validate(ClusterShape{1, 1}, "hardware").ok());
  CHECK(validate(ClusterShape{serf::kMaxNodes, serf::kMaxCoresPerNode}, "hardware").ok());
  CHECK(
      says(validate(ClusterShape{0, 8}, "hardware"), "hardware.nodes 0 must lie in [1, 1000000]"));
  CHECK(says(validate(ClusterShape{INT_MAX, 8}, "hardware"),
             "hardware.nodes 2147483647 must lie in [1, 1000000]"));
  CHECK(says(validate(ClusterShape{4, 1025}, "t.json"),
             "t.json.cores_per_node 1025 must lie in [1, 1024]"));
}
