// Resize (opset 10 on) and Upsample (before): nn.Upsample and F.interpolate by integer scales of
// the height and width, as an upsample layer. Nearest is PyTorch's (input h / s rounded down:
// asymmetric coordinates with floor, and for an integer scale also half-pixel coordinates with
// either rounding); bilinear is PyTorch's align_corners=False (half_pixel or pytorch_half_pixel).
// Anything else (a fractional scale, align_corners, cubic, asymmetric linear) is refused naming
// the node and the attribute.
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

// An integer >= 1 when `s` is one up to float32 rounding, else 0.
int integer_scale(double s) {
  const double r = std::round(s);
  return r >= 1 && r <= (1 << 20) && std::fabs(s - r) <= 1e-6 * r ? static_cast<int>(r) : 0;
}

}  // namespace

// The scales [N, C, H, W] of a Resize / Upsample: from the scales attribute (Upsample before opset
// 9), the scales input, or the sizes input (Resize at opset 11 on, when scales is empty).
StatusOr<std::vector<double>> Importer::resize_scales(const onnx::NodeProto& node,
                                                      const Value& x) const {
  const bool upsample = node.op_type() == "Upsample";
  if (upsample && opset() < 9) {  // an attribute of floats
    const onnx::AttributeProto* a = Attributes(node, where(node)).find("scales");
    if (a == nullptr || a->type() != onnx::AttributeProto_AttributeType_FLOATS) {
      return unsupported(node, "no scales attribute of floats");
    }
    return std::vector<double>(a->floats().begin(), a->floats().end());
  }
  const int scales_input = upsample || opset() < 11 ? 1 : 2;
  const Value* scales = nullptr;
  if (has_input(node, scales_input)) {
    SERF_ASSIGN_OR_RETURN(scales, value(node, scales_input));
    if (!scales->constant) return unsupported(node, "scales computed at run time (only constants)");
  }
  if (scales != nullptr && scales->elements() > 0) return scales->data;
  if (upsample || opset() < 11 || !has_input(node, 3)) return unsupported(node, "no scales");
  SERF_ASSIGN_OR_RETURN(const Value* sizes, value(node, 3));
  if (!sizes->constant) return unsupported(node, "sizes computed at run time (only constants)");
  const std::vector<int64_t> in = onnx_dims_of(x);
  const std::vector<int64_t> out = ints_of(*sizes);
  if (out.size() != in.size()) {
    return unsupported(node, "sizes " + dims_str(out) + " for an input " + dims_str(in));
  }
  std::vector<double> s;
  for (size_t k = 0; k < in.size(); ++k) {
    s.push_back(static_cast<double>(out[k]) / static_cast<double>(in[k]));
  }
  return s;
}

Status Importer::resize(const onnx::NodeProto& node) {
  const bool upsample = node.op_type() == "Upsample";
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(
      upsample ? a.only({"mode", "scales"})
               : a.only({"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                         "extrapolation_value", "mode", "nearest_mode"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (x->rank != 4)
    return unsupported(node, "input of rank " + std::to_string(x->rank) + " (only 2-D images)");
  SERF_ASSIGN_OR_RETURN(std::string mode, a.text("mode", "nearest"));
  // Upsample and Resize at opset 10 map output h to input h / s (asymmetric, rounded down).
  const bool modern = !upsample && opset() >= 11;
  SERF_ASSIGN_OR_RETURN(std::string coords,
                        a.text("coordinate_transformation_mode", modern ? "half_pixel" : ""));
  SERF_ASSIGN_OR_RETURN(std::string rounding,
                        a.text("nearest_mode", modern ? "round_prefer_floor" : ""));
  if (!modern) {
    coords = "asymmetric";
    rounding = "floor";
  }
  const bool half_pixel = coords == "half_pixel" || coords == "pytorch_half_pixel";
  LayerSpec l;
  l.kind = LayerKind::kUpsample;
  if (mode == "nearest") {
    // For an integer scale s, half-pixel (h + 1/2) / s - 1/2 never rounds a tie: floor(h / s).
    const bool floor =
        (coords == "asymmetric" && rounding == "floor") ||
        (half_pixel && (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil"));
    if (!floor) {
      return unsupported(node, "nearest with coordinate_transformation_mode '" + coords +
                                   "' and nearest_mode '" + rounding +
                                   "' (supported: asymmetric with floor, PyTorch's, or "
                                   "half_pixel with round_prefer_floor / round_prefer_ceil)");
    }
  } else if (mode == "linear" || mode == "bilinear") {
    if (!half_pixel) {
      return unsupported(node, "linear with coordinate_transformation_mode '" + coords +
                                   "' (supported: half_pixel or pytorch_half_pixel, PyTorch's "
                                   "bilinear with align_corners=False; export at opset >= 11)");
    }
    l.upsample_bilinear = true;
  } else {
    return unsupported(node, "mode '" + mode + "' (supported: nearest, linear)");
  }
  SERF_ASSIGN_OR_RETURN(std::vector<double> scales, resize_scales(node, *x));
  if (scales.size() != 4 || scales[0] != 1 || scales[1] != 1 || !integer_scale(scales[2]) ||
      !integer_scale(scales[3])) {
    std::string text;
    for (double s : scales) text += (text.empty() ? "" : ", ") + std::to_string(s);
    return unsupported(
        node, "scales [" + text + "] (supported: [1, 1, sh, sw] with integers sh, sw >= 1)");
  }
  l.upsample_h = integer_scale(scales[2]);
  l.upsample_w = integer_scale(scales[3]);
  if (l.upsample_h == 1 && l.upsample_w == 1) {  // the same size: a copy
    alias(node, 0, *x);
    return Status::Ok();
  }
  return add_layer(node, l, {x}, 4);
}

}  // namespace serf::model::onnx_import
