// The translators of operators that only change a tensor's shape or view it: Flatten,
// Squeeze/Unsqueeze, Reshape, Concat over channels and Dropout at inference. Most are views of
// their input (no layer); the others are a flatten or concat layer.
#include <algorithm>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

Status Importer::flatten(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"axis"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", 1));
  if (axis < 0) axis += x->rank;
  if (axis != 1) {
    return unsupported(
        node, "axis " + std::to_string(axis) + " (only axis 1: [N, C, H, W] -> [N, C*H*W])");
  }
  return flatten_to_rows(node, x);
}

Status Importer::flatten_to_rows(const onnx::NodeProto& node, const Value* x) {
  if (x->rank == 2 || (x->shape.height == 1 && x->shape.width == 1)) {
    Value v = *x;  // already flat: a view
    v.rank = 2;
    alias(node, 0, v);
    return Status::Ok();
  }
  LayerSpec l;
  l.kind = LayerKind::kFlatten;
  return add_layer(node, l, {x}, 2);
}

// Squeeze of [N, C, 1, 1] to [N, C] and Unsqueeze back, over axes 2 and 3 at once or one at a
// time (x.squeeze(-1).squeeze(-1): the [N, C, 1] between is a view of rank 3 that only another
// Squeeze or Unsqueeze may read): views.
Status Importer::squeeze(const onnx::NodeProto& node) {
  const bool unsqueeze = node.op_type() == "Unsqueeze";
  const Attributes a(node, where(node));
  std::vector<int64_t> axes;
  if (opset() < 13) {
    SERF_RETURN_IF_ERROR(a.only({"axes"}));
    SERF_ASSIGN_OR_RETURN(axes, a.integers("axes", {}));
  } else {
    SERF_RETURN_IF_ERROR(a.only({}));
    if (has_input(node, 1)) {
      SERF_ASSIGN_OR_RETURN(const Value* c, value(node, 1));
      if (!c->constant) return unsupported(node, "axes computed at run time (only constants)");
      axes.assign(c->data.begin(), c->data.end());
    }
  }
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  const int n = static_cast<int>(axes.size());
  const int out_rank = unsqueeze ? x->rank + n : x->rank - n;
  const int wide = std::max(x->rank, out_rank);  // the rank the axes index
  for (int64_t& axis : axes) axis += axis < 0 ? wide : 0;
  std::sort(axes.begin(), axes.end());
  // Only the trailing ones of [N, C, 1, 1] come and go: axes in [2, wide), each once.
  bool trailing = n > 0 && out_rank >= 2 && wide <= 4 && x->shape.height == 1 &&
                  x->shape.width == 1 && x->rank != 5;
  for (int k = 0; k < n && trailing; ++k)
    trailing = axes[k] >= 2 && axes[k] < wide && (k == 0 || axes[k] != axes[k - 1]);
  if (!trailing) {
    return unsupported(node, std::string(unsqueeze ? "unsqueeze" : "squeeze") + " of " +
                                 dims_str(onnx_dims_of(*x)) + " over axes " + dims_str(axes) +
                                 " (only [N, C, 1, 1] to [N, C] and back, over axes [2, 3] or "
                                 "one of them at a time)");
  }
  Value v = *x;
  v.rank = out_rank;
  alias(node, 0, v);
  return Status::Ok();
}

Status Importer::reshape(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"allowzero"}));
  SERF_ASSIGN_OR_RETURN(int64_t allowzero, a.integer("allowzero", 0));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(const Value* shape, value(node, 1));
  if (!shape->constant || shape->dtype != onnx::TensorProto_DataType_INT64 ||
      shape->dims.size() != 1) {
    return unsupported(node,
                       "the target shape must be a constant 1-D INT64 tensor (or a "
                       "constant subgraph the importer folds)");
  }
  const std::vector<int64_t> in = onnx_dims_of(*x);
  std::vector<int64_t> target;
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < shape->data.size(); ++k) {
    auto d = static_cast<int64_t>(shape->data[k]);
    if (d == 0 && allowzero == 0) d = k < in.size() ? in[k] : 0;
    if (d == -1) {
      if (infer >= 0) return unsupported(node, "two -1 dims in the target shape");
      infer = static_cast<int64_t>(k);
    } else if (d <= 0) {
      return unsupported(node, "target dim " + std::to_string(d));
    } else {
      known *= d;
    }
    target.push_back(d);
  }
  const int64_t total = x->shape.elements();
  if (infer >= 0) {
    if (known <= 0 || total % known != 0)
      return unsupported(node, "target shape does not divide the input");
    target[static_cast<size_t>(infer)] = total / known;
  }
  if (x->rank == 5) return shuffle_back(node, *x, target);
  if (target == in) {
    alias(node, 0, *x);
    return Status::Ok();
  }
  if (shuffle_view(node, *x, target)) return Status::Ok();
  if (target == std::vector<int64_t>{1, total}) return flatten_to_rows(node, x);
  const bool flat = x->rank == 2 || (x->shape.height == 1 && x->shape.width == 1);
  if (flat && target == std::vector<int64_t>{1, total, 1, 1}) {  // x.view(N, C, 1, 1): a view
    Value v = *x;
    v.rank = 4;
    alias(node, 0, v);
    return Status::Ok();
  }
  return unsupported(node, "reshape of " + dims_str(in) + " to " + dims_str(target) +
                               " (only the flatten kind, to [N, C*H*W], or [N, F] to [N, F, 1, "
                               "1], is supported)");
}

Status Importer::concat(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"axis"}));
  SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", 1));
  std::vector<const Value*> xs;
  for (int k = 0; k < node.input_size(); ++k) {
    SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, k));
    xs.push_back(x);
  }
  if (xs.empty()) return unsupported(node, "no inputs");
  const int rank = xs[0]->rank;
  if (axis < 0) axis += rank;
  if (axis != 1) {
    return unsupported(node, "axis " + std::to_string(axis) + " (only the channel axis 1)");
  }
  for (const Value* x : xs) {
    if (x->rank != rank) return unsupported(node, "inputs of different ranks");
  }
  if (xs.size() == 1) {
    alias(node, 0, *xs[0]);
    return Status::Ok();
  }
  LayerSpec l;
  l.kind = LayerKind::kConcat;
  return add_layer(node, l, xs, rank);
}

Status Importer::dropout(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"ratio", "is_test", "seed"}));
  if (has_input(node, 2)) {
    SERF_ASSIGN_OR_RETURN(const Value* training, value(node, 2));
    if (!training->constant || training->data.empty() || training->data[0] != 0.0) {
      return unsupported(node, "training_mode that is not a constant false");
    }
  }
  SERF_ASSIGN_OR_RETURN(const Value* x, value(node, 0));
  alias(node, 0, *x);
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
