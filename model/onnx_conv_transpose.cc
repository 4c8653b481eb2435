// ConvTranspose (PyTorch's ConvTranspose2d: U-Net's and GANs' upsampling): a conv_transpose2d
// layer with the weights as they are ([C, M/group, kh, kw]). Explicit pads and output_padding
// only: auto_pad and output_shape are refused naming the node, as is an output padding beyond the
// bottom / right pad.
#include "onnx_importer.h"

namespace serf::model::onnx_import {

Status Importer::conv_transpose(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                               "output_shape", "pads", "strides"}));
  SERF_ASSIGN_OR_RETURN(std::string auto_pad, a.text("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET") {
    return unsupported(node, "auto_pad '" + auto_pad + "' (only explicit pads)");
  }
  if (a.has("output_shape")) {
    return unsupported(node, "output_shape (only pads and output_padding; export with them)");
  }
  SERF_ASSIGN_OR_RETURN(ConvInputs in, conv_inputs(node, a, true));
  const Value* w = in.w;
  const int64_t group = in.group;
  const int64_t o = w->dims[1] * group;
  SERF_ASSIGN_OR_RETURN(auto kernel, a.integers("kernel_shape", {w->dims[2], w->dims[3]}));
  SERF_ASSIGN_OR_RETURN(auto strides, a.integers("strides", {1, 1}));
  SERF_ASSIGN_OR_RETURN(auto dilations, a.integers("dilations", {1, 1}));
  SERF_ASSIGN_OR_RETURN(auto pads, a.integers("pads", {0, 0, 0, 0}));
  SERF_ASSIGN_OR_RETURN(auto extra, a.integers("output_padding", {0, 0}));
  if (kernel != std::vector<int64_t>{w->dims[2], w->dims[3]} || strides.size() != 2 ||
      dilations.size() != 2 || pads.size() != 4 || extra.size() != 2) {
    return unsupported(node,
                       "kernel_shape, strides, dilations, pads and output_padding must "
                       "describe the 2 spatial dimensions of weight " +
                           dims_str(w->dims));
  }
  for (int64_t v : {o, strides[0], strides[1], dilations[0], dilations[1], pads[0], pads[1],
                    pads[2], pads[3], extra[0], extra[1]}) {
    if (v < 0 || v > (1 << 20))
      return unsupported(node, "value " + std::to_string(v) + " out of range");
  }
  LayerSpec l;
  l.kind = LayerKind::kConvTranspose2d;
  l.out_channels = static_cast<int>(o);
  l.groups = static_cast<int>(group);
  l.window = {static_cast<int>(kernel[0]),    static_cast<int>(kernel[1]),
              static_cast<int>(strides[0]),   static_cast<int>(strides[1]),
              static_cast<int>(pads[0]),      static_cast<int>(pads[1]),
              static_cast<int>(pads[2]),      static_cast<int>(pads[3]),
              static_cast<int>(dilations[0]), static_cast<int>(dilations[1])};
  l.output_padding_h = static_cast<int>(extra[0]);
  l.output_padding_w = static_cast<int>(extra[1]);
  SERF_ASSIGN_OR_RETURN(std::vector<double> bias, conv_bias(node, o));
  const std::vector<float> wdata(w->data.begin(), w->data.end());
  const std::vector<int64_t> wdims = w->dims;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {in.x}, 4, w->origin));
  const std::string& name = layers_.back().name;
  weights_.set(name + ".weight", Tensor{wdims, wdata});
  weights_.set(name + ".bias", Tensor{{o}, std::vector<float>(bias.begin(), bias.end())});
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
