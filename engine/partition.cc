#include "engine/partition.h"

#include <limits>
#include <string>

namespace serf::engine {

Slice slice_of(int n, int ranks, int rank) {
  const int base = n / ranks;
  const int extra = n % ranks;
  Slice s;
  s.count = base + (rank < extra ? 1 : 0);
  s.offset = rank * base + (rank < extra ? rank : extra);
  return s;
}

GatherLayout gather_layout(int channels, int64_t elements_per_channel, int ranks) {
  GatherLayout layout;
  layout.counts.resize(ranks);
  layout.offsets.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    const Slice s = slice_of(channels, ranks, r);
    layout.counts[r] = static_cast<int>(s.count * elements_per_channel);
    layout.offsets[r] = static_cast<int>(s.offset * elements_per_channel);
  }
  layout.total = int64_t{channels} * elements_per_channel;
  return layout;
}

namespace {
bool partitioned(model::LayerKind kind) {
  return kind == model::LayerKind::kConv2d || kind == model::LayerKind::kFullyConnected;
}
}  // namespace

int max_ranks(const model::ModelPlan& plan) {
  int best = std::numeric_limits<int>::max();
  for (size_t i = 0; i < plan.spec.layers.size(); ++i) {
    if (partitioned(plan.spec.layers[i].kind)) best = std::min(best, plan.layers[i].out.channels);
  }
  return best == std::numeric_limits<int>::max() ? 1 : best;
}

Status validate_partition(const model::ModelPlan& plan, Partition partition) {
  if (partition.ranks < 1) {
    return InvalidArgument("inter-node parallelism K = " + std::to_string(partition.ranks) +
                           " must be at least 1");
  }
  for (size_t i = 0; i < plan.spec.layers.size(); ++i) {
    if (!partitioned(plan.spec.layers[i].kind)) continue;
    const int n = plan.layers[i].out.channels;
    if (partition.ranks > n) {
      return InvalidArgument("inter-node parallelism K = " + std::to_string(partition.ranks) +
                             " exceeds layer '" + plan.spec.layers[i].name + "' with " +
                             std::to_string(n) +
                             " outputs; use K <= " + std::to_string(max_ranks(plan)));
    }
  }
  if (partition.rank < 0 || partition.rank >= partition.ranks) {
    return InvalidArgument("rank " + std::to_string(partition.rank) + " out of range 0.." +
                           std::to_string(partition.ranks - 1));
  }
  return Status::Ok();
}

}  // namespace serf::engine
