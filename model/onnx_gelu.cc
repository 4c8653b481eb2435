// GELU as torch.onnx writes it (torch 1.13's nn.GELU() and F.gelu, approximate 'none'):
//   d = Div(x, sqrt 2); e = Erf(d); a = Add(e, 1); m = Mul(x, a); y = Mul(m, 0.5)
// (either operand order in the Add and the Muls). The Div starts the pattern and each later node
// reads the step before it (Value::gelu_stage); the last Mul becomes one gelu layer (oneDNN's
// gelu_erf, run inside the convolution before it); a Div that no Erf reads is a scale
// (onnx_affine.cc). A node that departs from the pattern (another
// constant, another operator, another tensor than x) is refused naming it, so a near miss never
// imports as GELU.
#include <cmath>
#include <cstdio>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr const char* kPattern = "GELU's x * (1 + Erf(x / sqrt(2))) * 0.5";

// The value of a constant scalar (any shape of one element), NaN for anything else.
double scalar_of(const Value& v) {
  if (!v.constant || v.elements() != 1 || v.data.size() != 1) return std::nan("");
  return v.data[0];
}

// Equal up to float32 rounding (the exporter writes sqrt(2) as a float).
bool near(double v, double want) { return std::fabs(v - want) <= 1e-6 * std::fabs(want); }

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// A constant or tensor for a message: "0.6", "a constant of shape [4]", "tensor 'r'".
std::string describe(const Value& v, const std::string& name) {
  if (!std::isnan(scalar_of(v))) return number(scalar_of(v));
  if (v.constant) return "a constant of shape " + dims_str(v.dims);
  return "tensor '" + name + "'";
}

const char* stage_name(int stage) {
  switch (stage) {
    case 1:
      return "x / c";
    case 2:
      return "Erf(x / sqrt(2))";
    case 3:
      return "1 + Erf(x / sqrt(2))";
    default:
      return "x * (1 + Erf(x / sqrt(2)))";
  }
}

}  // namespace

Status Importer::div(const onnx::NodeProto& node) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* x, value(node, 0));
  SERF_ASSIGN_OR_RETURN(const Value* c, value(node, 1));
  // A Div no Erf reads is x / c of a scale: folded or a batchnorm (onnx_affine.cc).
  if (x->constant != c->constant && !read_by_erf(node.output(0)))
    return affine_constant(node, x->constant ? *c : *x, x->constant ? *x : *c, x->constant);
  if (x->constant || std::isnan(scalar_of(*c))) {
    return unsupported(node,
                       "operator Div is supported only as a tensor by a constant, or as x / "
                       "sqrt(2) in " +
                           std::string(kPattern) + " (a tensor by a constant scalar; got " +
                           describe(*x, node.input(0)) + " / " + describe(*c, node.input(1)) + ")");
  }
  Value v = *x;
  v.gelu_stage = 1;
  v.gelu_divisor = scalar_of(*c);
  v.gelu_node = label(node);
  alias(node, 0, v);
  --dropped;  // a step of a fused layer, not dropped
  return Status::Ok();
}

bool Importer::read_by_erf(const std::string& value) const {
  for (const onnx::NodeProto& n : model_.graph().node()) {
    if (n.op_type() != "Erf") continue;
    for (const std::string& in : n.input())
      if (in == value) return true;
  }
  return false;
}

Importer::StepOperands Importer::step_operands(const onnx::NodeProto& node,
                                               int Value::*stage) const {
  StepOperands ops;
  for (int k = 0; k < node.input_size() && ops.k < 0; ++k) {
    auto it = values_.find(node.input(k));
    if (!node.input(k).empty() && it != values_.end() && it->second.*stage > 0) {
      ops.k = k;
      ops.step = &it->second;
    }
  }
  if (ops.k >= 0 && node.input_size() == 2 && has_input(node, 1 - ops.k)) {
    auto it = values_.find(node.input(1 - ops.k));
    if (it != values_.end()) ops.other = &it->second;
  }
  return ops;
}

Status Importer::gelu_step(const onnx::NodeProto& node) {
  const StepOperands ops = step_operands(node, &Value::gelu_stage);
  const int k = ops.k;
  const Value& p = *ops.step;
  const Value* other = ops.other;  // a binary node's other operand
  const std::string step = std::string(stage_name(p.gelu_stage)) + " (Div '" + p.gelu_node + "')";
  const std::string& op = node.op_type();
  const char* want[] = {"", "an Erf", "an Add of 1", "a Mul by x", "a Mul by 0.5"};
  const bool right_op = p.gelu_stage == 1 ? op == "Erf" && node.input_size() == 1
                                          : op == (p.gelu_stage == 2 ? "Add" : "Mul") && other;
  if (!right_op) {
    return unsupported(node, "reads " + step + ", which " + kPattern + " gives only to " +
                                 want[p.gelu_stage] + " (no other node may read it)");
  }
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  const std::string departs = " departs from " + std::string(kPattern);
  switch (p.gelu_stage) {
    case 1:
      if (!near(p.gelu_divisor, kSqrt2)) {
        return unsupported(node, "Erf of x / " + number(p.gelu_divisor) + " (Div '" + p.gelu_node +
                                     "')" + departs + ", whose Div is by sqrt(2) = 1.41421356");
      }
      break;
    case 2:
      if (!near(scalar_of(*other), 1.0)) {
        return unsupported(node, "adding " + describe(*other, node.input(1 - k)) + " to " + step +
                                     departs + " (+ 1)");
      }
      break;
    case 4:
      if (!near(scalar_of(*other), 0.5)) {
        return unsupported(node, "multiplying " + step + " by " +
                                     describe(*other, node.input(1 - k)) + departs + " (* 0.5)");
      }
      break;
    default:
      if (other->constant || other->gelu_stage != 0 || other->tensor != p.tensor ||
          other->rank != p.rank) {
        return unsupported(node, "multiplying " + step + " by " +
                                     describe(*other, node.input(1 - k)) + departs +
                                     " (by x, the Div's input)");
      }
  }
  if (p.gelu_stage == 4) {
    LayerSpec l;
    l.kind = LayerKind::kGelu;
    const Value x = p;
    ++fused_gates;
    return add_layer(node, l, {&x}, x.rank);
  }
  Value next = p;
  ++next.gelu_stage;
  alias(node, 0, next);
  --dropped;
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
