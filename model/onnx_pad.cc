// Pad: exporters write zero padding as its own node, e.g. before DenseNet's average pools
// (pads all zero: a no-op) or before a convolution (TensorFlow's SAME padding). Zeros the next
// Conv or AveragePool reads are their own padding, so the Pad is folded into it instead of
// becoming a layer. Reflect and edge padding of the height and width (ReflectionPad2d,
// ReplicationPad2d: style transfer, super-resolution) are a pad layer; any other Pad is refused
// with what it would need.
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

// The pads and the constant of a Pad: inputs 1 and 2 from opset 11 (axes, opset 18, input 3),
// attributes before.
Status Importer::pad_amounts(const onnx::NodeProto& node, const Attributes& a,
                             std::vector<int64_t>* pads, double* fill) const {
  if (opset() < 11) {
    SERF_ASSIGN_OR_RETURN(*pads, a.integers("pads", {}));
    SERF_ASSIGN_OR_RETURN(float value, a.real("value", 0.0f));
    *fill = value;
    return Status::Ok();
  }
  for (const char* moved : {"pads", "value"}) {  // ignored by a runtime at this opset
    if (a.has(moved)) {
      return unsupported(node, std::string("attribute '") + moved + "' at opset " +
                                   std::to_string(opset()) +
                                   " (from opset 11 pads and the constant value are inputs 1 "
                                   "and 2; the attribute would be ignored)");
    }
  }
  if (has_input(node, 3)) return unsupported(node, "axes (pad every axis instead)");
  SERF_ASSIGN_OR_RETURN(const Value* p, value(node, 1));
  if (!p->constant) return unsupported(node, "pads computed at run time (only constants)");
  for (double v : p->data) pads->push_back(static_cast<int64_t>(v));
  if (has_input(node, 2)) {
    SERF_ASSIGN_OR_RETURN(const Value* c, value(node, 2));
    if (!c->constant || c->data.size() != 1)
      return unsupported(node, "constant_value that is not a constant scalar");
    *fill = c->data[0];
  }
  return Status::Ok();
}

// Non-zero pads of an input of `rank`: only of the height and width of an image ([N, C, H, W]
// begins, then ends), never negative (a crop), at most 65536.
Status Importer::check_image_pads(const onnx::NodeProto& node, const std::vector<int64_t>& pads,
                                  size_t rank) const {
  const bool spatial_only =
      rank == 4 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0;
  bool negative = false;
  for (int64_t p : pads) negative = negative || p < 0;
  if (!spatial_only || negative) {
    return unsupported(node, "pads " + dims_str(pads) +
                                 " (only padding of the height and width of an image, not "
                                 "negative)");
  }
  for (int64_t p : pads) {
    if (p > 65536) return unsupported(node, "pads " + dims_str(pads) + " (at most 65536 each)");
  }
  return Status::Ok();
}

Status Importer::pad(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"mode", "pads", "value"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(std::string mode, a.text("mode", "constant"));
  std::vector<int64_t> pads;
  double fill = 0;
  SERF_RETURN_IF_ERROR(pad_amounts(node, a, &pads, &fill));
  const auto rank = static_cast<size_t>(x->rank);
  if (pads.size() != 2 * rank) {
    return unsupported(node, "pads " + dims_str(pads) + " for an input of rank " +
                                 std::to_string(rank) + " (needs " + std::to_string(2 * rank) +
                                 " values)");
  }
  bool zero = true;
  for (int64_t p : pads) zero = zero && p == 0;
  if (zero) {  // no padding at all, whatever the mode: a no-op
    alias(node, 0, *x);
    return Status::Ok();
  }
  SERF_RETURN_IF_ERROR(check_image_pads(node, pads, rank));
  if (mode == "reflect" || mode == "edge") {  // a pad layer (ReflectionPad2d, ReplicationPad2d)
    if (x->padded()) {
      return unsupported(node, "mode '" + mode + "' on an input zero-padded by Pad '" +
                                   x->pad_node + "' (merge the two pads)");
    }
    LayerSpec l;
    l.kind = LayerKind::kPad;
    l.pad_reflect = mode == "reflect";
    l.window.pad_top = static_cast<int>(pads[2]);
    l.window.pad_left = static_cast<int>(pads[3]);
    l.window.pad_bottom = static_cast<int>(pads[6]);
    l.window.pad_right = static_cast<int>(pads[7]);
    return add_layer(node, l, {x}, 4);
  }
  if (mode != "constant") {
    return unsupported(node, "mode '" + mode + "' (supported: constant zeros, reflect, edge)");
  }
  if (fill != 0 || !std::isfinite(fill)) {
    return unsupported(
        node, "constant_value " + std::to_string(fill) + " (only zero padding is supported)");
  }
  Value v = *x;  // zeros for the Conv or AveragePool that reads it (fold_pad)
  v.pad[0] += static_cast<int>(pads[2]);  // top
  v.pad[1] += static_cast<int>(pads[3]);  // left
  v.pad[2] += static_cast<int>(pads[6]);  // bottom
  v.pad[3] += static_cast<int>(pads[7]);  // right
  v.pad_node = label(node);
  alias(node, 0, v);
  --dropped;  // folded into its readers, not dropped
  ++folded_pads;
  return Status::Ok();
}

Status Importer::fold_pad(const onnx::NodeProto& node, const Value& x, const Attributes& a,
                          Window* window) {
  if (!x.padded()) return Status::Ok();
  SERF_ASSIGN_OR_RETURN(std::string auto_pad, a.text("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET") {
    return unsupported(node, "auto_pad " + auto_pad + " on an input padded by Pad '" + x.pad_node +
                                 "' (give explicit pads)");
  }
  window->pad_top += x.pad[0];
  window->pad_left += x.pad[1];
  window->pad_bottom += x.pad[2];
  window->pad_right += x.pad[3];
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
