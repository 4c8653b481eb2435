// The steps that move whole channels: slice (channels [begin, end) of a tensor, ShuffleNet's
// channel split) and channel_shuffle (ShuffleNet's permutation of channel groups). Both read a
// whole tensor (engine/layer_steps.h) and only copy: a reorder of a sub-memory view, and oneDNN's
// shuffle primitive on the layout the tensor is stored in (no reorder around it at K = 1).
#include "cpu_model.h"

namespace serf::engine::cpu {

Status StepBuilder::slice(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::Shape& x = info(s).in;
  const model::Shape& y = info(s).out;
  // Plain (or channel-major with a batch at K > 1): channels [begin, end) are a sub-memory.
  Operand src = read(s, 0, nchw(x.channels, x.height, x.width), false, out);
  src.md = src.md.submemory_desc(nchw(y.channels, y.height, y.width), {0, l.slice_begin, 0, 0});
  const dnnl::memory::dims dims = nchw(y.channels, y.height, y.width);
  const md_t want = flow_ ? md_t(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abcd)
                          : canon(dims);
  reorder(src, write(s, want), out);
  return Status::Ok();
}

Status StepBuilder::channel_shuffle(const LayerStep& s, CpuStep* out) {
  const model::Shape& x = info(s).in;
  const Operand src = read(s, 0, nchw(x.channels, x.height, x.width), true, out);
  // oneDNN views the axis as (C / G) x G and transposes it, G = group_size; ShuffleNet views it as
  // groups x (C / groups): G = C / groups.
  const int group_size = x.channels / spec(s).groups;
  const dnnl::shuffle_forward::desc d(dnnl::prop_kind::forward_inference, src.md, 1, group_size);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::shuffle_forward::primitive_desc pd(d, m_.engine_, attr);
  const Operand target = write(s, pd.dst_desc());
  Call& c = call(dnnl::shuffle_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, target}};
  return Status::Ok();
}

}  // namespace serf::engine::cpu
