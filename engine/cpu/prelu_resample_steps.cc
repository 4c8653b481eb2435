// Three channel-local steps of the layers users' networks add (issue 15): prelu (one slope per
// channel, oneDNN's prelu primitive), upsample (integer scales, nearest or bilinear, oneDNN's
// resampling primitive) and pad (reflect or edge: reorders of rows and columns). They run on this
// rank's channels (engine/layer_steps.h); prelu and upsample in the layout the input is stored in
// at K = 1, and with K > 1 through plain staging, as batchnorm and pooling do.
#include "cpu_model.h"

namespace serf::engine::cpu {

namespace {

md_t plain_nchw(const dnnl::memory::dims& dims) { return {dims, dt::f32, tag::abcd}; }

}  // namespace

Status StepBuilder::prelu(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const int channels = s.channels.count;
  SERF_ASSIGN_OR_RETURN(const model::Tensor* slopes,
                        tensor(l.name + ".weight", {int64_t{in.in.channels}}));
  Operand src = read(s, 0, nchw(channels, in.in.height, in.in.width), true, out);
  if (!flow_) src = adapt(src, plain_nchw(src.md.dims()), out);
  // The slopes broadcast over the batch, height and width: weights [1, C, 1, 1].
  const dnnl::memory::dims slope_dims{1, channels, 1, 1};
  const dnnl::prelu_forward::desc d(kForward, src.md, md_t(slope_dims, dt::f32, tag::any));
  const dnnl::prelu_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  const Operand target = write(s, flow_ ? pd.dst_desc() : canon(src.md.dims()));
  const Operand dst = target.md == pd.dst_desc() ? target : staging(pd.dst_desc());
  Call& c = call(dnnl::prelu_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  c.constants = {{DNNL_ARG_WEIGHTS,
                  pack(*slopes, s.channels.offset, plain_nchw(slope_dims), pd.weights_desc(0))}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

Status StepBuilder::upsample(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const int channels = s.channels.count;
  Operand src = read(s, 0, nchw(channels, in.in.height, in.in.width), true, out);
  if (!flow_) src = adapt(src, plain_nchw(src.md.dims()), out);
  const dnnl::memory::dims dst_dims = nchw(channels, in.out.height, in.out.width);
  // The factors are the output's size over the input's: the spec's integer scales. oneDNN's
  // nearest picks input (h + 1/2) / s - 1/2 rounded, which for an integer s is floor(h / s)
  // (PyTorch's nearest); its linear uses half-pixel centres clamped at the edges (PyTorch's
  // bilinear without align_corners).
  const dnnl::algorithm alg = l.upsample_bilinear ? dnnl::algorithm::resampling_linear
                                                  : dnnl::algorithm::resampling_nearest;
  const md_t dst_request = flow_ ? md_t(dst_dims, dt::f32, tag::any) : plain_nchw(dst_dims);
  const dnnl::resampling_forward::desc d(kForward, alg, src.md, dst_request);
  const dnnl::resampling_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  src = adapt(src, pd.src_desc(), out);
  const Operand target = write(s, flow_ ? pd.dst_desc() : canon(dst_dims));
  const Operand dst = target.md == pd.dst_desc() ? target : staging(pd.dst_desc());
  Call& c = call(dnnl::resampling_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

// The input copied into the middle of the output, then each padded column (over the input's
// rows) from its mirror (reflect) or edge column of the input, then each padded row (over the
// whole width) from the output's own rows: one reorder of a sub-memory each, so the corners come
// out as PyTorch's ReflectionPad2d / ReplicationPad2d make them.
Status StepBuilder::pad(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const model::Window& p = l.window;
  const int c = s.channels.count, h = in.in.height, w = in.in.width, width = in.out.width;
  const Operand src = read(s, 0, nchw(c, h, w), false, out);  // plain, or channel-major
  const Operand dst = write(
      s, flow_ ? plain_nchw(nchw(c, in.out.height, width)) : canon(nchw(c, in.out.height, width)));
  auto part = [&](const Operand& op, int rows, int cols, int row, int col) {
    Operand r = op;
    r.md = op.md.submemory_desc(nchw(c, rows, cols), {0, 0, row, col});
    return r;
  };
  const bool mirror = l.pad_reflect;
  reorder(src, part(dst, h, w, p.pad_top, p.pad_left), out);
  for (int j = 0; j < p.pad_left; ++j) {
    reorder(part(src, h, 1, 0, mirror ? p.pad_left - j : 0), part(dst, h, 1, p.pad_top, j), out);
  }
  for (int j = 0; j < p.pad_right; ++j) {
    reorder(part(src, h, 1, 0, mirror ? w - 2 - j : w - 1),
            part(dst, h, 1, p.pad_top, p.pad_left + w + j), out);
  }
  for (int i = 0; i < p.pad_top; ++i) {
    reorder(part(dst, 1, width, p.pad_top + (mirror ? p.pad_top - i : 0), 0),
            part(dst, 1, width, i, 0), out);
  }
  for (int i = 0; i < p.pad_bottom; ++i) {
    reorder(part(dst, 1, width, p.pad_top + (mirror ? h - 2 - i : h - 1), 0),
            part(dst, 1, width, p.pad_top + h + i, 0), out);
  }
  return Status::Ok();
}

}  // namespace serf::engine::cpu
