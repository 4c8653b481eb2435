#include "engine/layer_steps.h"

#include <algorithm>
#include <string>

namespace serf::engine {

using model::LayerKind;

StatusOr<LayerSteps> plan_layer_steps(const model::ModelPlan& plan, Partition partition) {
  SERF_RETURN_IF_ERROR(validate_partition(plan, partition));
  const int K = partition.ranks;
  LayerSteps out;
  // The current activation: which buffer, and whether this rank holds only its channel slice.
  int cur = -1;
  bool sliced = false;
  int cur_channels = plan.spec.input.channels;  // slicing unit of the current activation
  int64_t cur_per_channel = int64_t{plan.spec.input.height} * plan.spec.input.width;
  int cur_layer = -1;

  const size_t n = plan.spec.layers.size();
  for (size_t i = 0; i < n; ++i) {
    const model::LayerSpec& spec = plan.spec.layers[i];
    const model::LayerInfo& info = plan.layers[i];
    LayerStep step;
    step.layer = static_cast<int>(i);
    step.kind = spec.kind;
    const bool pool = spec.kind == LayerKind::kMaxPool || spec.kind == LayerKind::kAvgPool;
    const bool needs_full = spec.kind == LayerKind::kConv2d || spec.kind == LayerKind::kFullyConnected ||
                            spec.kind == LayerKind::kLrn || spec.kind == LayerKind::kSoftmax ||
                            // pooling a slice needs whole channels (not after a flatten)
                            (pool && cur_per_channel != int64_t{info.in.height} * info.in.width);
    if (needs_full && sliced) {
      step.gather_before = true;
      step.gather_layer = cur_layer;
      step.gather = gather_layout(cur_channels, cur_per_channel, K);
      out.max_gather_floats = std::max(out.max_gather_floats, step.gather.total);
      sliced = false;
    }
    const Slice in_slice = sliced ? slice_of(cur_channels, K, partition.rank) : Slice{0, info.in.channels};
    step.in_buffer = cur;

    const bool prev_fused = i > 0 && out.steps.back().fused_relu && spec.kind == LayerKind::kRelu;
    if (prev_fused || spec.kind == LayerKind::kFlatten) {
      step.noop = true;
      step.out_buffer = cur;
      out.steps.push_back(step);
      // The activation, its slicing and its producer (timings are charged to it) are unchanged.
      continue;
    }
    step.out_buffer = static_cast<int>(out.buffer_sizes.size());
    out.buffer_sizes.push_back(info.out.elements());
    const bool next_relu = i + 1 < n && plan.spec.layers[i + 1].kind == LayerKind::kRelu;

    switch (spec.kind) {
      case LayerKind::kConv2d:
      case LayerKind::kFullyConnected: {
        step.out_slice = slice_of(info.out.channels, K, partition.rank);
        const int64_t per_channel = int64_t{info.out.height} * info.out.width;  // 1 for fc
        step.out_offset = step.out_slice.offset * per_channel;
        step.fused_relu = next_relu;
        sliced = K > 1;
        cur_channels = info.out.channels;
        cur_per_channel = per_channel;
        break;
      }
      case LayerKind::kRelu:
        step.elements = sliced ? in_slice.count * cur_per_channel : info.in.elements();
        step.in_offset = sliced ? in_slice.offset * cur_per_channel : 0;
        step.out_offset = step.in_offset;
        break;
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
        step.channels = in_slice.count;
        step.in_offset = int64_t{in_slice.offset} * info.in.height * info.in.width;
        step.out_offset = int64_t{in_slice.offset} * info.out.height * info.out.width;
        cur_per_channel = int64_t{info.out.height} * info.out.width;
        break;
      case LayerKind::kLrn:
      case LayerKind::kSoftmax:
      case LayerKind::kFlatten:
        break;  // whole activation, offsets 0
    }
    cur = step.out_buffer;
    cur_layer = static_cast<int>(i);
    out.steps.push_back(step);
  }
  out.output_buffer = cur;
  if (sliced) {
    out.gather_output = true;
    out.gather_output_layer = cur_layer;
    out.output_gather = gather_layout(cur_channels, cur_per_channel, K);
    out.max_gather_floats = std::max(out.max_gather_floats, out.output_gather.total);
  }
  return out;
}

Status check_exchange(const ActivationExchange& exchange, Partition partition) {
  if (exchange.ranks() == partition.ranks && exchange.rank() == partition.rank) return Status::Ok();
  return InvalidArgument("exchange is rank " + std::to_string(exchange.rank()) + " of " +
                         std::to_string(exchange.ranks()) + ", the model was prepared for rank " +
                         std::to_string(partition.rank) + " of " + std::to_string(partition.ranks));
}

}  // namespace serf::engine
