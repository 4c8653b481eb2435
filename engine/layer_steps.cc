// The graph planner: one pass decides, per layer, which part each rank computes, where the ranks
// all-gather and which layers run fused (tensors are tracked as storage groups: views and fused
// outputs share their input's storage); a second pass gives the groups buffers by liveness.
#include "engine/layer_steps.h"

#include <algorithm>
#include <string>

namespace serf::engine {

using model::LayerKind;

namespace {

// One storage: a tensor and the tensors that share its buffer (views, fused and in-place outputs).
struct Group {
  int64_t floats = 0;  // the whole tensor
  bool sliced = false;
  int units = 0;            // sliced: rank r holds slice_of(units, K, r) ...
  int64_t unit_floats = 0;  // ... units of this many floats
  int writer = -1;          // the layer that last wrote it
  int first = -1;           // the step that first writes it (-1: the network input)
  int last = -1;            // the last step that reads it
  int buffer = -1;
};

class Planner {
 public:
  Planner(const model::ModelPlan& plan, Partition p, int batch)
      : plan_(plan), p_(p), n_(static_cast<int>(plan.layers.size())), batch_(batch) {}

  LayerSteps run() {
    groups_.push_back(Group{plan_.spec.input.elements() * batch_});  // group 0: the network input
    group_of_.assign(static_cast<size_t>(n_), -1);
    out_.steps.resize(static_cast<size_t>(n_));
    for (int i = 0; i < n_; ++i) plan_layer(i);
    assign_buffers();
    return std::move(out_);
  }

 private:
  const model::LayerSpec& spec(int i) const { return plan_.spec.layers[static_cast<size_t>(i)]; }
  const model::LayerInfo& info(int i) const { return plan_.layers[static_cast<size_t>(i)]; }
  const std::vector<int>& consumers(int i) const { return plan_.consumers[static_cast<size_t>(i)]; }
  int source_group(int i, size_t k) const {
    const int s = info(i).sources[k];
    return s < 0 ? 0 : group_of_[static_cast<size_t>(s)];
  }
  Group& group(int g) { return groups_[static_cast<size_t>(g)]; }
  Slice my_units(const Group& g) const { return slice_of(g.units, p_.ranks, p_.rank); }
  int64_t part_offset(const Group& g) const {
    return g.sliced ? my_units(g).offset * g.unit_floats : 0;
  }
  int64_t part_floats(const Group& g) const {
    return g.sliced ? my_units(g).count * g.unit_floats : g.floats;
  }
  // Floats of one channel over the batch (channel-major: the b rows of a channel are adjacent).
  int64_t area(const model::Shape& s) const { return int64_t{s.height} * s.width * batch_; }

  int new_group(int layer) {
    Group g;
    g.floats = info(layer).out.elements() * batch_;
    g.writer = layer;
    g.first = layer;
    groups_.push_back(g);
    return static_cast<int>(groups_.size()) - 1;
  }
  void slice_group(int g, int units, int64_t unit_floats, int writer) {
    Group& G = group(g);
    G.sliced = true;
    G.units = units;
    G.unit_floats = unit_floats;
    G.writer = writer;
  }

  // The input must be whole: all-gather it first if it is sliced (in place, once).
  void make_whole(LayerStep& step, int g) {
    Group& G = group(g);
    if (!G.sliced) return;
    GatherStep gather;
    gather.buffer = g;  // a group id until assign_buffers
    gather.layout = gather_layout(G.units, G.unit_floats, p_.ranks);
    gather.charged_layer = G.writer;
    out_.max_gather_floats = std::max(out_.max_gather_floats, gather.layout.total);
    step.gathers.push_back(std::move(gather));
    G.sliced = false;
  }

  // True when nothing reads group g after step i (and g is not the network input).
  bool dies_at(int g, int i) const {
    if (g == 0) return false;
    for (int t = 0; t < n_; ++t) {
      if (group_of_[static_cast<size_t>(t)] != g) continue;
      if (t == n_ - 1) return false;  // the network output
      for (int c : consumers(t)) {
        if (c > i) return false;
      }
    }
    return true;
  }

  void plan_layer(int i) {
    LayerStep& step = out_.steps[static_cast<size_t>(i)];
    step.layer = i;
    step.kind = spec(i).kind;
    if (step.fused_into >= 0) return;  // run by an earlier step; group_of_ set there
    switch (step.kind) {
      case LayerKind::kFlatten:
        step.noop = true;
        group_of_[static_cast<size_t>(i)] = source_group(i, 0);
        step.inputs = {TensorRef{source_group(i, 0), 0}};
        step.output = step.inputs[0];
        return;
      case LayerKind::kConv2d:
      case LayerKind::kConvTranspose2d:
      case LayerKind::kFullyConnected:
        return plan_weighted(i, step);
      case LayerKind::kRelu:
      case LayerKind::kClip:
      case LayerKind::kSigmoid:
      case LayerKind::kHardSigmoid:
      case LayerKind::kHardSwish:
      case LayerKind::kSilu:
      case LayerKind::kLeakyRelu:
      case LayerKind::kTanh:
      case LayerKind::kElu:
      case LayerKind::kGelu:
      case LayerKind::kAdd:
        return plan_elementwise(i, step);
      case LayerKind::kMul:  // of equal shapes element-wise; by a per-channel scale by channels
        if (info(i).ins[1] == info(i).ins[0]) return plan_elementwise(i, step);
        return plan_channel_local(i, step);
      case LayerKind::kBatchNorm:
      case LayerKind::kPrelu:
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
      case LayerKind::kGlobalAvgPool:
      case LayerKind::kUpsample:
      case LayerKind::kPad:
        return plan_channel_local(i, step);
      case LayerKind::kLrn:
      case LayerKind::kConcat:
      case LayerKind::kSlice:
      case LayerKind::kChannelShuffle:
      case LayerKind::kSoftmax:
      case LayerKind::kLayerNorm:  // each row's mean and variance need all its features
        return plan_whole(i, step);
    }
  }

  void plan_weighted(int i, LayerStep& step) {
    const model::LayerSpec& l = spec(i);
    const model::LayerInfo& in = info(i);
    const int K = p_.ranks;
    const int groups = l.kind == LayerKind::kFullyConnected ? 1 : l.groups;
    const int split = split_dimension(plan_, static_cast<size_t>(i));
    step.replicated = K > 1 && split < K;
    const bool sliced_out = K > 1 && !step.replicated;
    const int g = source_group(i, 0);
    const int64_t in_group_floats = int64_t{in.in.channels / groups} * area(in.in);
    const int out_per_group = l.out_channels / groups;
    step.group_slice = {0, groups};
    step.out_slice = {0, l.out_channels};
    int64_t in_offset = 0;
    if (sliced_out && groups > 1) {
      step.group_slice = slice_of(groups, K, p_.rank);
      step.out_slice = {step.group_slice.offset * out_per_group,
                        step.group_slice.count * out_per_group};
      const Group& G = group(g);
      // A sliced input whose parts are this rank's groups (a depthwise conv2d after a conv2d).
      if (G.sliced && G.units == groups && G.unit_floats == in_group_floats) {
        in_offset = part_offset(G);
      } else {
        make_whole(step, g);
        in_offset = step.group_slice.offset * in_group_floats;
      }
    } else {
      make_whole(step, g);
      if (sliced_out) step.out_slice = slice_of(l.out_channels, K, p_.rank);
    }
    step.inputs = {TensorRef{g, in_offset}};
    const int units = groups > 1 ? groups : l.out_channels;
    const int64_t unit_floats = int64_t{l.out_channels / units} * area(in.out);
    step.sliced_output = sliced_out;
    int out_group = fuse_residual(i, step, sliced_out, units, unit_floats);
    if (out_group < 0) {
      out_group = new_group(i);
      fuse_activation(i, step, out_group);
    }
    group_of_[static_cast<size_t>(i)] = out_group;
    group(out_group).sliced = false;
    group(out_group).writer = i;
    if (sliced_out) slice_group(out_group, units, unit_floats, i);
    step.output = {out_group, step.out_slice.offset * area(in.out)};
  }

  // conv2d -> add(conv2d, R) [-> activation]: the conv2d accumulates into R's storage. Returns the
  // storage, or -1 when the pattern does not apply.
  int fuse_residual(int i, LayerStep& step, bool sliced_out, int units, int64_t unit_floats) {
    if (spec(i).kind != LayerKind::kConv2d || consumers(i).size() != 1) return -1;
    const int j = consumers(i)[0];
    const model::LayerInfo& add = info(j);
    if (spec(j).kind != LayerKind::kAdd || add.sources.size() != 2) return -1;
    const int r = add.sources[0] == i ? add.sources[1] : add.sources[0];
    if (r < 0 || r == i || r > i) return -1;  // R must be written before this conv2d
    const int g = group_of_[static_cast<size_t>(r)];
    if (g == 0) return -1;
    // Nothing but the add may read R's storage after this conv2d overwrites it.
    for (int t = 0; t < n_; ++t) {
      if (group_of_[static_cast<size_t>(t)] != g) continue;
      for (int c : consumers(t)) {
        if (c >= i && c != j) return -1;
      }
    }
    const Group& R = group(g);
    if (R.sliced && (!sliced_out || R.units != units || R.unit_floats != unit_floats)) return -1;
    step.accumulate = true;
    step.add_layer = j;
    LayerStep& add_step = out_.steps[static_cast<size_t>(j)];
    add_step.noop = true;
    add_step.fused_into = i;
    group_of_[static_cast<size_t>(j)] = g;
    group(g).writer = i;
    fuse_activation(j, step, g);
    return g;
  }

  // A single activation reading only `producer`'s tensor runs as `step`'s last operation.
  void fuse_activation(int producer, LayerStep& step, int out_group) {
    if (consumers(producer).size() != 1) return;
    const int a = consumers(producer)[0];
    if (!model::is_activation(spec(a).kind) || info(a).sources.size() != 1) return;
    step.activation_layer = a;
    LayerStep& act = out_.steps[static_cast<size_t>(a)];
    act.noop = true;
    act.fused_into = step.layer;
    group_of_[static_cast<size_t>(a)] = out_group;
  }

  // Activations, add, mul of equal shapes: on the rank's part; in place when the first input dies
  // here.
  void plan_elementwise(int i, LayerStep& step) {
    const size_t n_in = info(i).sources.size();
    int ref = -1;  // the slicing of the output: the first sliced input's
    for (size_t k = 0; k < n_in; ++k) {
      const int g = source_group(i, k);
      if (!group(g).sliced) continue;
      if (ref < 0) {
        ref = g;
      } else if (group(g).units != group(ref).units ||
                 group(g).unit_floats != group(ref).unit_floats) {
        make_whole(step, g);
      }
    }
    const Group slicing = ref >= 0 ? group(ref) : Group{};
    const int64_t offset = ref >= 0 ? part_offset(slicing) : 0;
    for (size_t k = 0; k < n_in; ++k) step.inputs.push_back({source_group(i, k), offset});
    step.elements = ref >= 0 ? part_floats(slicing) : info(i).out.elements() * batch_;
    const int g0 = source_group(i, 0);
    const int out_group = dies_at(g0, i) ? g0 : new_group(i);
    if (ref >= 0) {
      slice_group(out_group, slicing.units, slicing.unit_floats, i);
    } else {
      group(out_group).sliced = false;
    }
    group(out_group).writer = i;
    group_of_[static_cast<size_t>(i)] = out_group;
    step.output = {out_group, offset};
    step.sliced_output = ref >= 0;
  }

  // batchnorm, prelu, pooling, global_avgpool, upsample, pad, mul by a per-channel scale: on the
  // rank's channels when its part is whole channels of this layer's input (not, e.g., a batchnorm
  // of a flattened conv output sliced by channels).
  void plan_channel_local(int i, LayerStep& step) {
    const model::LayerInfo& in = info(i);
    const int g = source_group(i, 0);
    const int64_t per_channel = area(in.in);
    Group& G = group(g);
    if (G.sliced && G.unit_floats % per_channel != 0) make_whole(step, g);
    const bool sliced = G.sliced;
    const int units = G.units;
    const int64_t channels_per_unit = sliced ? G.unit_floats / per_channel : 0;
    step.channels = {0, in.in.channels};
    if (sliced) {
      const Slice u = my_units(G);
      step.channels = {static_cast<int>(u.offset * channels_per_unit),
                       static_cast<int>(u.count * channels_per_unit)};
    }
    step.inputs = {TensorRef{g, step.channels.offset * per_channel}};
    if (step.kind == LayerKind::kMul) step.inputs.push_back(scale_input(i, step));
    // Not prelu: oneDNN 2.6's prelu in place on C x 1 x 1 with 2 threads and C off its vector
    // width gave wrong values (a thread's tail rewrote its neighbour's channels from their
    // results: 0.62 relative error for 75 channels after a tanh).
    const bool in_place =
        (step.kind == LayerKind::kBatchNorm || step.kind == LayerKind::kMul) && dies_at(g, i);
    const int out_group = in_place ? g : new_group(i);
    group_of_[static_cast<size_t>(i)] = out_group;
    if (sliced) {
      slice_group(out_group, units, channels_per_unit * area(in.out), i);
    } else {
      group(out_group).sliced = false;
    }
    group(out_group).writer = i;
    step.output = {out_group, step.channels.offset * area(in.out)};
    step.sliced_output = sliced;
  }

  // The per-channel scale (C x 1 x 1) of a mul planned on step.channels: read where this rank
  // holds exactly those channels of it (a scale computed by a conv2d sliced like the tensor it
  // scales: no exchange), else all-gathered (C floats) and read at those channels.
  TensorRef scale_input(int i, LayerStep& step) {
    const int g = source_group(i, 1);
    const Group& S = group(g);
    if (S.sliced && S.unit_floats % batch_ == 0) {
      const Slice u = my_units(S);
      const int64_t per_unit = S.unit_floats / batch_;  // channels per unit
      if (u.offset * per_unit == step.channels.offset &&
          u.count * per_unit == step.channels.count) {
        return {g, part_offset(S)};
      }
    }
    make_whole(step, g);
    return {g, int64_t{step.channels.offset} * batch_};
  }

  // lrn, concat, slice, channel_shuffle, softmax: whole inputs, whole output.
  void plan_whole(int i, LayerStep& step) {
    for (size_t k = 0; k < info(i).sources.size(); ++k) {
      const int g = source_group(i, k);
      make_whole(step, g);
      step.inputs.push_back({g, 0});
    }
    const int out_group = new_group(i);
    group_of_[static_cast<size_t>(i)] = out_group;
    step.output = {out_group, 0};
  }

  // Liveness: a group lives from the step that first writes it to its last reader (the output
  // to the end); buffers are handed out in step order, the best-fitting free one first.
  void assign_buffers() {
    for (int t = 0; t < n_; ++t) {
      Group& G = group(group_of_[static_cast<size_t>(t)]);
      for (int c : consumers(t)) G.last = std::max(G.last, c);
    }
    group(group_of_[static_cast<size_t>(n_ - 1)]).last = n_;
    std::vector<int> free_buffers;
    for (int s = 0; s < n_; ++s) {
      for (size_t g = 1; g < groups_.size(); ++g) {
        if (groups_[g].first == s) take_buffer(groups_[g], &free_buffers);
      }
      for (size_t g = 1; g < groups_.size(); ++g) {
        if (groups_[g].last == s && groups_[g].buffer >= 0) {
          free_buffers.push_back(groups_[g].buffer);
        }
      }
    }
    // Group 0 (the network input) and -1 (a fused step, which writes no tensor of its own) have
    // no buffer: -1 read groups_[-1] (ASan, test_engine under scripts/test --sanitize).
    auto buffer = [&](int g) { return g <= 0 ? -1 : groups_[static_cast<size_t>(g)].buffer; };
    for (LayerStep& step : out_.steps) {
      for (GatherStep& gather : step.gathers) gather.buffer = buffer(gather.buffer);
      for (TensorRef& in : step.inputs) in.buffer = buffer(in.buffer);
      step.output.buffer = buffer(step.output.buffer);
    }
    for (int t = 0; t < n_; ++t) {
      out_.tensor_buffer.push_back(buffer(group_of_[static_cast<size_t>(t)]));
    }
    const int out_group = group_of_[static_cast<size_t>(n_ - 1)];
    LayerStep last;
    make_whole(last, out_group);
    for (GatherStep& gather : last.gathers) gather.buffer = buffer(gather.buffer);
    out_.output_gathers = std::move(last.gathers);
    out_.output = {buffer(out_group), 0};
  }

  void take_buffer(Group& G, std::vector<int>* free_buffers) {
    auto& sizes = out_.buffer_sizes;
    int best = -1;
    for (size_t k = 0; k < free_buffers->size(); ++k) {
      const int b = (*free_buffers)[k];
      const int64_t size = sizes[static_cast<size_t>(b)];
      const int64_t best_size = best < 0 ? 0 : sizes[static_cast<size_t>((*free_buffers)[best])];
      // The smallest that fits; else the largest (it grows least).
      const bool fits = size >= G.floats, best_fits = best >= 0 && best_size >= G.floats;
      if (best < 0 || (fits && (!best_fits || size < best_size)) ||
          (!fits && !best_fits && size > best_size)) {
        best = static_cast<int>(k);
      }
    }
    if (best < 0) {
      G.buffer = static_cast<int>(sizes.size());
      sizes.push_back(G.floats);
      return;
    }
    G.buffer = (*free_buffers)[static_cast<size_t>(best)];
    free_buffers->erase(free_buffers->begin() + best);
    sizes[static_cast<size_t>(G.buffer)] = std::max(sizes[static_cast<size_t>(G.buffer)], G.floats);
  }

  const model::ModelPlan& plan_;
  Partition p_;
  int n_;
  int batch_;
  std::vector<Group> groups_;
  std::vector<int> group_of_;  // per layer: the group its tensor lives in
  LayerSteps out_;
};

}  // namespace

StatusOr<LayerSteps> plan_layer_steps(const model::ModelPlan& plan, Partition partition,
                                      int batch) {
  SERF_RETURN_IF_ERROR(validate_partition(plan, partition));
  if (batch < 1)
    return InvalidArgument("batch b = " + std::to_string(batch) + " must be at least 1");
  return Planner(plan, partition, batch).run();
}

std::vector<int64_t> channel_major_areas(const model::ModelPlan& plan) {
  const model::Shape& in = plan.spec.input;
  std::vector<int64_t> areas;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const model::LayerKind kind = plan.spec.layers[i].kind;
    const model::LayerInfo& info = plan.layers[i];
    if (kind == LayerKind::kFlatten || kind == LayerKind::kAdd || kind == LayerKind::kMul ||
        model::is_activation(kind)) {
      const int source = info.sources[0];
      areas.push_back(source < 0 ? int64_t{in.height} * in.width
                                 : areas[static_cast<size_t>(source)]);
    } else if (kind == LayerKind::kFullyConnected || kind == LayerKind::kSoftmax ||
               kind == LayerKind::kLayerNorm) {
      areas.push_back(1);
    } else {
      areas.push_back(int64_t{info.out.height} * info.out.width);
    }
  }
  return areas;
}

void rows_to_channel_major(const float* rows, float* out, int64_t batch, int64_t channels,
                           int64_t area) {
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      std::copy_n(rows + (n * channels + c) * area, area, out + (c * batch + n) * area);
    }
  }
}

void channel_major_to_rows(const float* channel_major, float* rows, int64_t batch, int64_t channels,
                           int64_t area) {
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      std::copy_n(channel_major + (c * batch + n) * area, area, rows + (n * channels + c) * area);
    }
  }
}

Status check_exchange(const ActivationExchange& exchange, Partition partition) {
  if (exchange.ranks() == partition.ranks && exchange.rank() == partition.rank) return Status::Ok();
  return InvalidArgument("exchange is rank " + std::to_string(exchange.rank()) + " of " +
                         std::to_string(exchange.ranks()) + ", the model was prepared for rank " +
                         std::to_string(partition.rank) + " of " + std::to_string(partition.ranks));
}

}  // namespace serf::engine
