// Channel moves: ShuffleNet's channel shuffle and channel split.
//
// torchvision writes the shuffle as x.view(N, g, C/g, H, W).transpose(1, 2).view(N, C, H, W):
// Reshape to 5-D, Transpose with perm (0, 2, 1, 3, 4), Reshape back. The first two are views
// (a 5-D Value remembering g and whether it is transposed); the last becomes one channel_shuffle
// layer. Any other reader of the 5-D view (onnx_import.cc: value()) or any other perm is refused,
// naming the node. x.chunk(2, dim=1) is exported as Slice pairs (opset >= 13 here) or a Split:
// each part becomes a slice layer of channels [begin, end).
#include <algorithm>
#include <set>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

constexpr const char* kShuffleForm =
    "only a channel shuffle is supported: Reshape [N, C, H, W] to [N, g, C/g, H, W], Transpose "
    "perm (0, 2, 1, 3, 4), Reshape back to [N, C, H, W]";

}  // namespace

std::vector<int64_t> onnx_dims_of(const Value& v) {
  const Shape& s = v.shape;
  if (v.rank == 5) {
    const int64_t g = v.shuffle_groups, per = s.channels / v.shuffle_groups;
    return {1, v.shuffle_transposed ? per : g, v.shuffle_transposed ? g : per, s.height, s.width};
  }
  if (v.rank == 4) return {1, s.channels, s.height, s.width};
  if (v.rank == 3) return {1, s.channels, 1};  // a Squeeze's step (onnx_ops.cc)
  return {1, s.channels};
}

// Reshape of a 4-D tensor to [N, g, C/g, H, W] (the shuffle's first step): a view.
bool Importer::shuffle_view(const onnx::NodeProto& node, const Value& x,
                            const std::vector<int64_t>& target) {
  if (x.rank != 4 || target.size() != 5 || target[0] != 1 || target[3] != x.shape.height ||
      target[4] != x.shape.width || target[1] * target[2] != x.shape.channels) {
    return false;
  }
  Value v = x;
  v.rank = 5;
  v.shuffle_groups = static_cast<int>(target[1]);
  v.shuffle_transposed = false;
  v.view_node = label(node);
  alias(node, 0, v);
  return true;
}

// Reshape of the transposed 5-D view back to [N, C, H, W]: the channel_shuffle layer.
Status Importer::shuffle_back(const onnx::NodeProto& node, const Value& x,
                              const std::vector<int64_t>& target) {
  const std::vector<int64_t> whole = {1, x.shape.channels, x.shape.height, x.shape.width};
  if (!x.shuffle_transposed || target != whole) {
    return unsupported(node, "reshape of the 5-D view " + dims_str(onnx_dims_of(x)) + " of '" +
                                 x.view_node + "' to " + dims_str(target) + " (" + kShuffleForm +
                                 ")");
  }
  LayerSpec l;
  l.kind = LayerKind::kChannelShuffle;
  l.groups = x.shuffle_groups;
  Value in = x;
  in.rank = 4;
  return add_layer(node, l, {&in}, 4);
}

Status Importer::transpose(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"perm"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(std::vector<int64_t> perm, a.integers("perm", {}));
  if (x->rank != 5 || x->shuffle_transposed || perm != std::vector<int64_t>{0, 2, 1, 3, 4}) {
    return unsupported(node, "transpose of " + dims_str(onnx_dims_of(*x)) + " with perm " +
                                 dims_str(perm) + " (" + kShuffleForm + ")");
  }
  Value v = *x;
  v.shuffle_transposed = true;
  alias(node, 0, v);
  return Status::Ok();
}

// Slice of channels [begin, end) (axis 1, step 1; constant starts and ends).
Status Importer::slice(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset() < 10) {
    SERF_RETURN_IF_ERROR(a.only({"starts", "ends", "axes"}));
    SERF_ASSIGN_OR_RETURN(starts, a.integers("starts", {}));
    SERF_ASSIGN_OR_RETURN(ends, a.integers("ends", {}));
    SERF_ASSIGN_OR_RETURN(axes, a.integers("axes", {}));
  } else {
    SERF_RETURN_IF_ERROR(a.only({}));
    for (int k = 1; k <= 4; ++k) {
      if (!has_input(node, k)) continue;
      SERF_ASSIGN_OR_RETURN(const Value* c, value(node, k));
      if (!c->constant) return unsupported(node, "starts, ends, axes and steps must be constants");
      (k == 1 ? starts : k == 2 ? ends : k == 3 ? axes : steps) = ints_of(*c);
    }
  }
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (axes.empty()) {
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  const bool one_axis = starts.size() == 1 && ends.size() == 1 && axes.size() == 1 &&
                        (axes[0] == 1 || axes[0] == 1 - x->rank);
  if (!one_axis || (!steps.empty() && (steps.size() != 1 || steps[0] != 1))) {
    return unsupported(node, "slice of " + dims_str(onnx_dims_of(*x)) + " with starts " +
                                 dims_str(starts) + ", ends " + dims_str(ends) + ", axes " +
                                 dims_str(axes) + ", steps " + dims_str(steps) +
                                 " (only a step-1 slice of the channels, axis 1)");
  }
  const int64_t c = x->shape.channels;
  auto clamp = [c](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + c : v, 0, c); };
  const int64_t begin = clamp(starts[0]), end = clamp(ends[0]);
  return channel_range(node, 0, *x, begin, end);
}

// Split along the channels into parts of `split` (input 1 from opset 13, else the attribute;
// equal parts when absent).
Status Importer::split(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only(opset() < 13 ? std::set<std::string>{"axis", "split"}
                                           : std::set<std::string>{"axis"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", 0));
  if (axis < 0) axis += x->rank;
  if (axis != 1) return unsupported(node, "axis " + std::to_string(axis) + " (only channels, 1)");
  std::vector<int64_t> parts;
  if (opset() >= 13 && has_input(node, 1)) {
    SERF_ASSIGN_OR_RETURN(const Value* s, value(node, 1));
    if (!s->constant) return unsupported(node, "split sizes must be a constant");
    parts = ints_of(*s);
  } else if (opset() < 13) {
    SERF_ASSIGN_OR_RETURN(parts, a.integers("split", {}));
  }
  const int64_t c = x->shape.channels, n = node.output_size();
  if (parts.empty()) {
    if (c % n != 0) return unsupported(node, "equal split of " + std::to_string(c) + " channels");
    parts.assign(static_cast<size_t>(n), c / n);
  }
  int64_t total = 0;
  for (int64_t p : parts) total += p;
  if (static_cast<int64_t>(parts.size()) != n || total != c) {
    return unsupported(node, "split " + dims_str(parts) + " of " + std::to_string(c) +
                                 " channels into " + std::to_string(n) + " outputs");
  }
  int64_t begin = 0;
  for (int k = 0; k < n; ++k) {
    const int64_t end = begin + parts[static_cast<size_t>(k)];
    if (!node.output(k).empty()) {
      SERF_RETURN_IF_ERROR(channel_range(node, k, *x, begin, end));
    }
    begin = end;
  }
  return Status::Ok();
}

// Output `out` of `node` is channels [begin, end) of x: x itself when that is all of it.
Status Importer::channel_range(const onnx::NodeProto& node, int out, const Value& x, int64_t begin,
                               int64_t end) {
  if (begin >= end) return unsupported(node, "an empty slice of the channels");
  if (begin == 0 && end == x.shape.channels) {
    alias(node, out, x);
    return Status::Ok();
  }
  LayerSpec l;
  l.kind = LayerKind::kSlice;
  l.slice_begin = static_cast<int>(begin);
  l.slice_end = static_cast<int>(end);
  return add_layer(node, l, {&x}, x.rank, "", out);
}

}  // namespace serf::model::onnx_import
