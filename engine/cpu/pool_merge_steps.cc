// The steps of the layers that pool (max, average, global average), normalise across channels
// (lrn) or a row (softmax), or merge several inputs (add, mul, the other element-wise merges,
// concat): each one oneDNN primitive between the reorders StepBuilder's read() and write() need.
#include <algorithm>

#include "cpu_model.h"

namespace serf::engine::cpu {

using model::LayerKind;

Status StepBuilder::pool(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const int channels = s.channels.count;
  const dnnl::memory::dims dst_dims = nchw(channels, in.out.height, in.out.width);
  // Channel-major parts (K > 1, b > 1) go through plain staging: oneDNN pools them only with its
  // reference kernel (measured 9.8 ms against 0.1 ms on cifar10's pool1 at b = 4).
  Operand src = read(s, 0, nchw(channels, in.in.height, in.in.width), true, out);
  if (!flow_) src = adapt(src, plain(src.md.dims()), out);
  dnnl::memory::dims kernel{in.in.height, in.in.width}, strides{1, 1}, pad_l{0, 0}, pad_r{0, 0};
  dnnl::algorithm alg = dnnl::algorithm::pooling_avg_include_padding;
  if (l.kind != LayerKind::kGlobalAvgPool) {
    const model::Window& w = l.window;
    kernel = {w.kernel_h, w.kernel_w};
    strides = {w.stride_h, w.stride_w};
    pad_l = {w.pad_top, w.pad_left};
    // ceil_mode: the last window may run past the bottom/right padding (maxpool ignores it).
    pad_r = {std::max<int64_t>(w.pad_bottom, (in.out.height - 1) * int64_t{w.stride_h} +
                                                 w.kernel_h - in.in.height - w.pad_top),
             std::max<int64_t>(w.pad_right, (in.out.width - 1) * int64_t{w.stride_w} + w.kernel_w -
                                                in.in.width - w.pad_left)};
    if (l.kind == LayerKind::kMaxPool) {
      alg = dnnl::algorithm::pooling_max;
    } else if (!l.count_include_pad) {
      alg = dnnl::algorithm::pooling_avg_exclude_padding;
    }
  }
  const md_t dst_request = flow_ ? md_t(dst_dims, dt::f32, tag::any) : plain(dst_dims);
  const dnnl::pooling_forward::desc d(kForward, alg, src.md, dst_request, strides, kernel, pad_l,
                                      pad_r);
  const dnnl::pooling_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  src = adapt(src, pd.src_desc(), out);
  const md_t blocked(dst_dims, dt::f32, tag::nChw16c);
  const md_t stored_md = !flow_                               ? canon(dst_dims)
                         : readers_blocked(s.layer, channels) ? blocked
                                                              : pd.dst_desc();
  const Operand target = write(s, stored_md);
  const Operand dst = target.md == pd.dst_desc() ? target : staging(pd.dst_desc());
  Call& c = call(dnnl::pooling_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

Status StepBuilder::lrn(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const dnnl::memory::dims dims = nchw(in.in.channels, in.in.height, in.in.width);
  // LRN is fast only in the blocked layouts: reorder around it when the data is plain.
  const md_t want = in.in.channels % 16 == 0 ? md_t(dims, dt::f32, tag::nChw16c) : plain(dims);
  const Operand src = adapt(read(s, 0, dims, true, out), want, out);
  const dnnl::lrn_forward::desc d(kForward, dnnl::algorithm::lrn_across_channels, want, l.lrn_size,
                                  l.lrn_alpha, l.lrn_beta, l.lrn_k);
  const dnnl::lrn_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  const Operand target = write(s, flow_ ? want : canon(dims));
  const Operand dst = target.md == want ? target : staging(want);
  Call& c = call(dnnl::lrn_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

Status StepBuilder::add(const LayerStep& s, CpuStep* out) {
  return elementwise(s, dnnl::algorithm::binary_add, out);
}

Status StepBuilder::mul(const LayerStep& s, CpuStep* out) {
  const model::LayerInfo& in = info(s);
  if (in.ins[1] == in.ins[0]) return elementwise(s, dnnl::algorithm::binary_mul, out);
  // By a per-channel scale: dnnl::binary broadcasts src1 [N, C, 1, 1] over the height and width.
  const int channels = s.channels.count;
  const dnnl::memory::dims dims = nchw(channels, in.in.height, in.in.width);
  const dnnl::memory::dims scale_dims = nchw(channels, 1, 1);
  const Operand x = read(s, 0, dims, true, out);
  Operand scale{s.inputs[1].buffer < 0 ? Space::kInput : Space::kActivation,
                std::max(s.inputs[1].buffer, 0), s.inputs[1].offset, canon(scale_dims)};
  // K = 1: as its producer stored it (made plain); K > 1: this rank's channels of it, canonical
  // (a scale written by fully_connected is [F, N], the same floats as C x 1 x 1 channel-major).
  if (flow_) scale = read(s, 1, scale_dims, false, out);
  const Operand target = write(s, flow_ ? x.md : canon(dims));
  const dnnl::binary::desc d(dnnl::algorithm::binary_mul, x.md, scale.md, target.md);
  const dnnl::binary::primitive_desc pd(d, attributes(s), m_.engine_);
  Call& c = call(dnnl::binary(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC_0, x}, {DNNL_ARG_SRC_1, scale}, {DNNL_ARG_DST, target}};
  return Status::Ok();
}

Status StepBuilder::elementwise(const LayerStep& s, dnnl::algorithm alg, CpuStep* out) {
  const model::LayerInfo& in = info(s);
  const dnnl::memory::dims dims =
      flow_ ? nchw(in.in.channels, in.in.height, in.in.width) : dnnl::memory::dims{1, s.elements};
  const Operand first = read(s, 0, dims, true, out);
  const Operand target = write(s, first.md);
  Operand acc = first;  // inputs 2.. are added (multiplied) into the output in turn
  for (size_t k = 1; k < s.inputs.size(); ++k) {
    const Operand other = adapt(read(s, k, dims, true, out), acc.md, out);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (k + 1 == s.inputs.size()) attr = attributes(s);
    const dnnl::binary::desc d(alg, acc.md, other.md, target.md);
    const dnnl::binary::primitive_desc pd(d, attr, m_.engine_);
    Call& c = call(dnnl::binary(pd), pd, out);
    c.operands = {{DNNL_ARG_SRC_0, acc}, {DNNL_ARG_SRC_1, other}, {DNNL_ARG_DST, target}};
    acc = target;
  }
  return Status::Ok();
}

Status StepBuilder::concat(const LayerStep& s, CpuStep* out) {
  const model::LayerInfo& in = info(s);
  std::vector<Operand> srcs;
  std::vector<md_t> mds;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    const model::Shape& x = in.ins[k];
    srcs.push_back(read(s, k, nchw(x.channels, x.height, x.width), true, out));
    mds.push_back(srcs.back().md);
  }
  const dnnl::memory::dims dims = nchw(in.out.channels, in.out.height, in.out.width);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::concat::primitive_desc pd(flow_ ? md_t(dims, dt::f32, tag::any) : canon(dims), 1, mds,
                                        m_.engine_, attr);
  const Operand target = write(s, pd.dst_desc());
  Call& c = call(dnnl::concat(pd), pd, out);
  for (size_t k = 0; k < srcs.size(); ++k) {
    c.operands.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), srcs[k]});
  }
  c.operands.push_back({DNNL_ARG_DST, target});
  return Status::Ok();
}

Status StepBuilder::softmax(const LayerStep& s, CpuStep* out) {
  const int64_t n = info(s).in.elements();
  const md_t rows = plain({batch_, n});
  const Operand src = adapt(read(s, 0, {batch_, n}, false, out), rows, out);
  const Operand target = write(s, canon({batch_, n}));
  const Operand dst = target.md == rows ? target : staging(rows);
  Call* c = nullptr;
  if (spec(s).softmax_log) {  // log(softmax(x)) in one primitive, exact for very negative x
    const dnnl::logsoftmax_forward::desc d(kForward, src.md, 1);
    const dnnl::logsoftmax_forward::primitive_desc pd(d, attributes(s), m_.engine_);
    c = &call(dnnl::logsoftmax_forward(pd), pd, out);
  } else {
    const dnnl::softmax_forward::desc d(kForward, src.md, 1);
    const dnnl::softmax_forward::primitive_desc pd(d, attributes(s), m_.engine_);
    c = &call(dnnl::softmax_forward(pd), pd, out);
  }
  c->operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

}  // namespace serf::engine::cpu
