// conv_transpose2d (PyTorch's ConvTranspose2d, ONNX ConvTranspose): oneDNN's deconvolution, split
// over K ranks by output channels (grouped: by groups) like conv2d (engine/layer_steps.h). The
// output padding is the bottom / right edge's pad made smaller by it (the spec keeps it at most
// that pad), which is how oneDNN sizes a deconvolution's output.
#include "cpu_model.h"

namespace serf::engine::cpu {

Status StepBuilder::conv_transpose(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const model::Window& w = l.window;
  const int groups = s.group_slice.count, per_group_in = in.in.channels / l.groups;
  const int per_group_out = l.out_channels / l.groups;
  const int cin = groups * per_group_in, cout = s.out_slice.count;
  SERF_ASSIGN_OR_RETURN(
      const model::Tensor* weights,
      tensor(l.name + ".weight", {in.in.channels, per_group_out, w.kernel_h, w.kernel_w}));
  SERF_ASSIGN_OR_RETURN(const model::Tensor* bias, tensor(l.name + ".bias", {l.out_channels}));
  Operand src = read(s, 0, nchw(cin, in.in.height, in.in.width), true, out);
  // PyTorch's [I, O/g, kh, kw] is oneDNN's iohw (giohw grouped): this rank's output channels
  // (groups) are a sub-memory of it, reordered into the primitive's layout once.
  const bool grouped = l.groups > 1;
  const dnnl::memory::dims all =
      grouped ? dnnl::memory::dims{l.groups, per_group_out, per_group_in, w.kernel_h, w.kernel_w}
              : dnnl::memory::dims{l.out_channels, in.in.channels, w.kernel_h, w.kernel_w};
  const dnnl::memory::dims part =
      grouped ? dnnl::memory::dims{groups, per_group_out, per_group_in, w.kernel_h, w.kernel_w}
              : dnnl::memory::dims{cout, cin, w.kernel_h, w.kernel_w};
  const dnnl::memory::dims at = grouped ? dnnl::memory::dims{s.group_slice.offset, 0, 0, 0, 0}
                                        : dnnl::memory::dims{s.out_slice.offset, 0, 0, 0};
  const md_t slice = md_t(all, dt::f32, grouped ? tag::giohw : tag::iohw).submemory_desc(part, at);
  const md_t bias_md({cout}, dt::f32, tag::a);
  const dnnl::memory::dims dst_dims = nchw(cout, in.out.height, in.out.width);
  const dnnl::deconvolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
      md_t(src.md.dims(), dt::f32, tag::any), md_t(part, dt::f32, tag::any), bias_md,
      md_t(dst_dims, dt::f32, tag::any), {w.stride_h, w.stride_w},
      {w.dilation_h - 1, w.dilation_w - 1}, {w.pad_top, w.pad_left},
      {w.pad_bottom - l.output_padding_h, w.pad_right - l.output_padding_w});
  const dnnl::deconvolution_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  src = adapt(src, pd.src_desc(), out);
  const Operand target = write(s, flow_ ? pd.dst_desc() : canon(dst_dims));
  const Operand dst = target.md == pd.dst_desc() ? target : staging(pd.dst_desc());
  Call& c = call(dnnl::deconvolution_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  c.constants = {{DNNL_ARG_WEIGHTS, pack(*weights, 0, slice, pd.weights_desc())},
                 {DNNL_ARG_BIAS, pack(*bias, s.out_slice.offset, bias_md, pd.bias_desc())}};
  if (dst.space != target.space || dst.buffer != target.buffer) reorder(dst, target, out);
  return Status::Ok();
}

}  // namespace serf::engine::cpu
