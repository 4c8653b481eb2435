// LayerNorm over the features of an [N, F] tensor (an MLP's nn.LayerNorm(F)): one layer_norm.
// ONNX's LayerNormalization (opset 17) is one node; below opset 17 torch.onnx writes
//   m = ReduceMean(x, [-1]); d = Sub(x, m); p = Pow(d, 2); v = ReduceMean(p, [-1]);
//   e = Add(v, eps); s = Sqrt(e); q = Div(d, s)
// (then Mul by the weight and Add of the bias, which fold into the layer: onnx_affine.cc). The
// nodes are read one by one like GELU's (Value::ln_stage); the Div makes the layer (weight 1, bias
// 0), and a node that departs from the pattern is refused naming it. Over any other axis, or of
// an image [N, C, H, W] (ConvNeXt's LayerNorm over the channels after a Transpose), it is refused.
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

constexpr const char* kLnPattern =
    "LayerNorm's (x - mean(x)) / sqrt(mean((x - mean(x))^2) + epsilon) over the features";

// The value of a constant scalar (any shape of one element), NaN for anything else.
double scalar_value(const Value* v) {
  if (v == nullptr || !v->constant || v->elements() != 1 || v->data.size() != 1) {
    return std::nan("");
  }
  return v->data[0];
}

const char* ln_stage_name(int stage) {
  switch (stage) {
    case 1:
      return "mean(x)";
    case 2:
      return "x - mean(x)";
    case 3:
      return "(x - mean(x))^2";
    case 4:
      return "the variance mean((x - mean(x))^2)";
    case 5:
      return "the variance + epsilon";
    default:
      return "sqrt(variance + epsilon)";
  }
}

}  // namespace

// ReduceMean over the features of x ([N, F], keepdims 1): the mean that starts the pattern, or
// (stage 3) the variance.
Status Importer::feature_mean(const onnx::NodeProto& node, const Value& x) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"axes", "keepdims"}));
  if (has_input(node, 1)) return unsupported(node, "axes as an input (opset 18)");
  SERF_ASSIGN_OR_RETURN(auto axes, a.integers("axes", {}));
  SERF_ASSIGN_OR_RETURN(int64_t keepdims, a.integer("keepdims", 1));
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != 1) || keepdims == 0) {
    return unsupported(node, "mean of " + dims_str(onnx_dims_of(x)) + " over axes " +
                                 dims_str(axes) + " with keepdims " + std::to_string(keepdims) +
                                 " (supported on [N, F] only as " + kLnPattern +
                                 ": axes [-1], keepdims 1)");
  }
  Value v = x;
  v.ln_stage = x.ln_stage == 3 ? 4 : 1;
  if (v.ln_stage == 1) v.ln_node = label(node);
  alias(node, 0, v);
  --dropped;  // a step of a layer, not dropped
  return Status::Ok();
}

Status Importer::ln_step(const onnx::NodeProto& node) {
  const StepOperands ops = step_operands(node, &Value::ln_stage);
  const int k = ops.k;
  const Value p = *ops.step;
  const Value* other = ops.other;  // a binary node's other operand
  const std::string& op = node.op_type();
  const bool x_other =
      other != nullptr && !other->constant && other->ln_stage == 0 && other->tensor == p.tensor;
  const bool sqrt_other = other != nullptr && other->ln_stage == 6 && other->tensor == p.tensor;
  bool fits = false;
  switch (p.ln_stage) {
    case 1:
      fits = op == "Sub" && k == 1 && x_other;
      break;
    case 2:
      fits = k == 0 && ((op == "Pow" && scalar_value(other) == 2.0) || (op == "Div" && sqrt_other));
      break;
    case 3:
      fits = op == "ReduceMean";
      break;
    case 4:
      fits = op == "Add" && scalar_value(other) > 0;
      break;
    case 5:
      fits = op == "Sqrt" && node.input_size() == 1;
      break;
    default:
      break;
  }
  if (!fits) {
    return unsupported(node, "reads " + std::string(ln_stage_name(p.ln_stage)) + " (ReduceMean '" +
                                 p.ln_node + "'), which departs from " + kLnPattern);
  }
  if (op == "ReduceMean") return feature_mean(node, p);
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  if (op == "Div") {
    Value in = p;  // x - mean(x) is x's tensor at stage 2: the layer reads x
    in.ln_stage = 0;
    const std::vector<double> ones(static_cast<size_t>(in.shape.channels), 1.0);
    return add_layer_norm(node, in, static_cast<float>(other->ln_epsilon), ones,
                          std::vector<double>(ones.size(), 0.0));
  }
  Value next = p;
  next.ln_stage = p.ln_stage + 1;
  if (op == "Add") next.ln_epsilon = scalar_value(other);
  alias(node, 0, next);
  --dropped;
  return Status::Ok();
}

Status Importer::layer_normalization(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"axis", "epsilon", "stash_type"}));
  SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", -1));
  SERF_ASSIGN_OR_RETURN(float epsilon, a.real("epsilon", 1e-5f));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (x->rank != 2 || (axis != -1 && axis != 1)) {
    return unsupported(node, "over axis " + std::to_string(axis) + " of " +
                                 dims_str(onnx_dims_of(*x)) +
                                 " (only over the features of an [N, F] tensor, axis -1)");
  }
  const auto f = static_cast<int64_t>(x->shape.channels);
  std::vector<std::vector<double>> p;  // scale, bias
  for (int k = 1; k <= 2; ++k) {
    if (k == 2 && !has_input(node, 2)) {
      p.emplace_back(static_cast<size_t>(f), 0.0);
      continue;
    }
    SERF_ASSIGN_OR_RETURN(const Value* v, weight_input(node, k, 1));
    if (v->elements() != f) {
      return unsupported(node, "'" + node.input(k) + "' has shape " + dims_str(v->dims) +
                                   " but the input has " + std::to_string(f) + " features");
    }
    p.push_back(v->data);
  }
  return add_layer_norm(node, *x, epsilon, p[0], p[1]);
}

Status Importer::add_layer_norm(const onnx::NodeProto& node, const Value& x, float epsilon,
                                const std::vector<double>& weight,
                                const std::vector<double>& bias) {
  if (!(epsilon > 0)) return unsupported(node, "epsilon " + std::to_string(epsilon) + " (> 0)");
  LayerSpec l;
  l.kind = LayerKind::kLayerNorm;
  l.epsilon = epsilon;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {&x}, 2));
  const std::string& name = layers_.back().name;
  const auto f = static_cast<int64_t>(weight.size());
  std::vector<float> w(weight.begin(), weight.end()), b(bias.begin(), bias.end());
  weights_.set(name + ".weight", Tensor{{f}, std::move(w)});
  weights_.set(name + ".bias", Tensor{{f}, std::move(b)});
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
