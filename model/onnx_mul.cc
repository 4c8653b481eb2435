// Mul and the gates built from it. Exporters write SiLU as x * Sigmoid(x) and, before opset 14,
// hardswish as x * HardSigmoid(x); when the gate's output is read by the Mul alone, the gate
// layer becomes one silu (hardswish) activation. Squeeze-and-excitation multiplies a tensor by a
// per-channel [N, C, 1, 1] scale: a mul layer. A constant factor is folded into the layer that
// wrote the tensor, or becomes a batchnorm (onnx_affine.cc). Any other broadcast is refused with
// what it would need.
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

// A per-channel constant of `n` values for a tensor of ONNX rank `rank`: a scalar, or n values
// along axis 1 of [N, C, ...] (or the last axis of a shape without N, as ONNX broadcasting aligns
// shapes from the right). Empty when it is neither, or of a higher rank than the tensor (the sum
// or product would have more dims).
std::vector<double> channel_factors(const Value& c, int n, int rank) {
  if (c.dims.size() > static_cast<size_t>(rank)) return {};
  if (c.elements() == 1 && !c.data.empty())
    return std::vector<double>(static_cast<size_t>(n), c.data[0]);
  if (c.elements() != n || c.dims.empty() || c.data.size() != static_cast<size_t>(n)) return {};
  // Right-aligned against [1, C, H, W] (or [1, F]): C must land on axis 1.
  const int64_t axis = static_cast<int64_t>(rank) - static_cast<int64_t>(c.dims.size());
  for (size_t k = 0; k < c.dims.size(); ++k) {
    const bool channel_axis = axis + static_cast<int64_t>(k) == 1;
    if (c.dims[k] != (channel_axis ? n : 1)) return {};
  }
  return c.data;
}

Status Importer::mul(const onnx::NodeProto& node) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* a, value(node, 0));
  SERF_ASSIGN_OR_RETURN(const Value* b, value(node, 1));
  if (a->constant || b->constant)
    return affine_constant(node, a->constant ? *b : *a, a->constant ? *a : *b, a->constant);
  if (fuse_gate(node, *a, *b) || fuse_gate(node, *b, *a)) return Status::Ok();
  const Value* x = a;
  const Value* s = b;
  if (x->shape == Shape{s->shape.channels, 1, 1} && s->shape != x->shape) std::swap(x, s);
  const bool scale = s->shape == Shape{x->shape.channels, 1, 1};
  if (a->rank != b->rank || (x->shape != s->shape && !scale)) {
    return unsupported(node, "broadcast of " + dims_str(onnx_dims_of(*a)) + " by " +
                                 dims_str(onnx_dims_of(*b)) +
                                 " (supported: equal shapes, or an [N, C, H, W] tensor by a "
                                 "per-channel [N, C, 1, 1] scale)");
  }
  LayerSpec l;
  l.kind = LayerKind::kMul;
  return add_layer(node, l, {x, s}, x->rank);
}

// x * gate(x) where gate's output is read by this Mul alone: Sigmoid becomes silu, HardSigmoid
// with PyTorch's alpha 1/6 and beta 1/2 hardswish. False when the pattern does not apply.
bool Importer::fuse_gate(const onnx::NodeProto& node, const Value& x, const Value& gate) {
  if (gate.constant || x.constant || gate.rank != x.rank || tensor_uses_[gate.tensor] != 1) {
    return false;
  }
  auto it = layer_of_.find(gate.tensor);
  if (it == layer_of_.end()) return false;
  LayerSpec& l = layers_[it->second];
  if (l.inputs.size() != 1 || l.inputs[0] != x.tensor) return false;
  if (l.kind == LayerKind::kSigmoid) {
    l.kind = LayerKind::kSilu;
  } else if (l.kind == LayerKind::kHardSigmoid &&
             std::fabs(l.hardsigmoid_alpha - 1.0f / 6.0f) < 1e-6f &&
             std::fabs(l.hardsigmoid_beta - 0.5f) < 1e-6f) {
    l.kind = LayerKind::kHardSwish;
  } else {
    return false;
  }
  // The fused layer takes the Mul's name (its output is the Mul's; "...sigmoid" would name the
  // gate alone). `gate` is the Sigmoid's value in values_: renamed with the layer.
  rename_layer(it->second, layer_name(node, ""));
  alias(node, 0, gate);
  --dropped;  // fused into the gate, not dropped
  ++fused_gates;
  return true;
}

}  // namespace serf::model::onnx_import
