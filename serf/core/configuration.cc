#include "serf/core/configuration.h"

#include <cstdint>
#include <sstream>
#include <string>

#include "serf/core/cluster_limits.h"

namespace serf {

std::string to_string(const ParallelismTuple& t) {
  std::ostringstream os;
  os << "(i=" << t.service << ", K=" << t.inter << ", T=" << t.intra;
  if (t.batch != 1) os << ", b=" << t.batch;
  os << ")";
  return os.str();
}

std::string to_string(const Configuration& c) {
  std::ostringstream os;
  os << "(c=" << c.service << ", K=" << c.inter << ", T=" << c.intra;
  if (c.batch != 1) os << ", b=" << c.batch;
  os << ")";
  return os.str();
}

Status validate(const ClusterShape& shape, const std::string& where) {
  struct Bound {
    const char* name;
    int value, most;
  };
  const Bound bounds[] = {{"nodes", shape.nodes, kMaxNodes},
                          {"cores_per_node", shape.cores_per_node, kMaxCoresPerNode}};
  for (const Bound& b : bounds) {
    if (b.value < 1 || b.value > b.most) {
      return InvalidArgument((where.empty() ? std::string() : where + ".") + b.name + " " +
                             std::to_string(b.value) + " must lie in [1, " +
                             std::to_string(b.most) + "]");
    }
  }
  return Status::Ok();
}

namespace {

// `name()` is "configuration (c=2, K=1, T=4)" or "tuple (i=2, K=1, T=4)", built only on an error
// (the planner asks about thousands of configurations); `c` is the requests at once, spelled
// `c_name` ("c" for a configuration, "i" for a tuple) in the message.
template <typename Name>
Status check(const Name& name, const char* c_name, int c, int inter, int intra, int batch,
             const ClusterShape& shape) {
  if (shape.nodes < 1 || shape.cores_per_node < 1) {
    return InvalidArgument("a cluster of " + std::to_string(shape.nodes) + " nodes x " +
                           std::to_string(shape.cores_per_node) +
                           " cores: nodes and cores per node must be >= 1");
  }
  if (c < 1 || inter < 1 || intra < 1) {
    return InvalidArgument(name() + ": " + c_name + ", K and T must be >= 1");
  }
  if (batch < 1 || batch > kMaxBatch) {
    return InvalidArgument(name() + ": the batch size b must lie in [1, " +
                           std::to_string(kMaxBatch) + "] (got " + std::to_string(batch) + ")");
  }
  if (c > kMaxSlotsPerUnit) {
    return InvalidArgument(name() + ": " + c_name + " = " + std::to_string(c) +
                           " requests at once, more than " + std::to_string(kMaxSlotsPerUnit) +
                           " (the slots a unit can hold)");
  }
  if (inter > shape.nodes) {
    return InvalidArgument(name() + " needs K = " + std::to_string(inter) +
                           " nodes per request but the cluster has " + std::to_string(shape.nodes));
  }
  const int64_t threads = static_cast<int64_t>(c) * intra;
  if (threads > shape.cores_per_node) {
    return InvalidArgument(name() + " needs " + c_name + "*T = " + std::to_string(threads) +
                           " threads per node but a node has " +
                           std::to_string(shape.cores_per_node) + " cores");
  }
  return Status::Ok();
}

}  // namespace

Status validate(const Configuration& config, const ClusterShape& shape) {
  return check([&] { return "configuration " + to_string(config); }, "c", config.service,
               config.inter, config.intra, config.batch, shape);
}

Status validate(const ParallelismTuple& tuple, const ClusterShape& shape) {
  return check([&] { return "tuple " + to_string(tuple); }, "i", tuple.service, tuple.inter,
               tuple.intra, tuple.batch, shape);
}

}  // namespace serf
