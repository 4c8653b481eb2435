// layer_norm (issue 15): an MLP's LayerNorm over the F features of each row of a flat [N, F]
// tensor, oneDNN's layer normalization primitive (the mean and variance of each row computed at
// run time, then weight and bias per feature). It needs the whole row: with K > 1 the partition
// gathers the tensor and every rank normalises all of it (engine/layer_steps.cc, plan_whole), and
// it reads and writes plain rows through staging like softmax.
#include "cpu_model.h"

namespace serf::engine::cpu {

Status StepBuilder::layer_norm(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const int64_t n = info(s).in.elements();
  SERF_ASSIGN_OR_RETURN(const model::Tensor* weight, tensor(l.name + ".weight", {n}));
  SERF_ASSIGN_OR_RETURN(const model::Tensor* bias, tensor(l.name + ".bias", {n}));
  const md_t rows({batch_, n}, dt::f32, tag::ab);
  const Operand src = adapt(read(s, 0, {batch_, n}, false, out), rows, out);
  const Operand target = write(s, canon({batch_, n}));
  const Operand dst = target.md == rows ? target : staging(rows);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, rows,
                                                  l.epsilon, flags);
  const dnnl::layer_normalization_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  Call& c = call(dnnl::layer_normalization_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  // Inference computes each row's statistics into these when the primitive asks for them.
  if (pd.mean_desc().get_size() > 0) {
    c.operands.emplace_back(DNNL_ARG_MEAN, staging(pd.mean_desc()));
    c.operands.emplace_back(DNNL_ARG_VARIANCE, staging(pd.variance_desc()));
  }
  c.constants = {{DNNL_ARG_SCALE, pack_values(weight->data)},
                 {DNNL_ARG_SHIFT, pack_values(bias->data)}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

}  // namespace serf::engine::cpu
