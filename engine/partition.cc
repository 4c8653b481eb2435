#include "engine/partition.h"

#include <algorithm>
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

int split_dimension(const model::ModelPlan& plan, size_t layer) {
  const model::LayerSpec& l = plan.spec.layers[layer];
  if (l.kind == model::LayerKind::kConv2d || l.kind == model::LayerKind::kConvTranspose2d) {
    return l.groups > 1 ? l.groups : l.out_channels;
  }
  if (l.kind == model::LayerKind::kFullyConnected) return l.out_channels;
  return 0;
}

int max_ranks(const model::ModelPlan& plan) {
  int best = 1;
  for (size_t i = 0; i < plan.spec.layers.size(); ++i) {
    best = std::max(best, split_dimension(plan, i));
  }
  return best;
}

Status validate_partition(const model::ModelPlan& plan, Partition partition) {
  const std::string k = "inter-node parallelism K = " + std::to_string(partition.ranks);
  if (partition.ranks < 1) return InvalidArgument(k + " must be at least 1");
  if (partition.ranks > 1) {
    size_t widest = plan.spec.layers.size();
    for (size_t i = 0; i < plan.spec.layers.size(); ++i) {
      if (split_dimension(plan, i) > 0 &&
          (widest == plan.spec.layers.size() ||
           split_dimension(plan, i) > split_dimension(plan, widest))) {
        widest = i;
      }
    }
    if (widest == plan.spec.layers.size()) {
      return InvalidArgument(k + ": model " + plan.spec.name +
                             " has no conv2d or fully_connected layer to split over ranks "
                             "(every layer would run whole on every rank); use K = 1");
    }
    const int n = split_dimension(plan, widest);
    if (partition.ranks > n) {
      return InvalidArgument(
          k + " exceeds the widest layer '" + plan.spec.layers[widest].name + "' (" +
          std::to_string(n) +
          " outputs to split), so no layer would be split; use K <= " + std::to_string(n));
    }
  }
  if (partition.rank < 0 || partition.rank >= partition.ranks) {
    return InvalidArgument("rank " + std::to_string(partition.rank) + " out of range 0.." +
                           std::to_string(partition.ranks - 1));
  }
  return Status::Ok();
}

}  // namespace serf::engine
