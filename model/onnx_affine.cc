// Add, Sub, Mul and Div of a tensor and a scalar or per-channel constant: y = a * x + b per
// channel (a hand-written normalisation (x - mean) / std, a scale, a shift; `c - x` too). Folded
// into the weights and bias of the Conv, Gemm or MatMul, or of the batchnorm or layer_norm
// (LayerNorm's weight and bias after its Div: onnx_layer_norm.cc), whose output the node alone
// reads; otherwise a batchnorm layer of its own (running mean 0, running variance 1), which the
// next such node folds into in turn, so (x - mean) / std is one layer. A constant that broadcasts
// another way (along the width, say) is refused naming the node.
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

// What the node does, for messages: "adding [1, 4, 4, 4] and a constant of shape [4]".
std::string describe_affine(const std::string& op, const Value& x, const Value& c) {
  const std::string xs = dims_str(onnx_dims_of(x));
  const std::string cs = "a constant of shape " + dims_str(c.dims);
  if (op == "Add") return "adding " + xs + " and " + cs;
  if (op == "Sub") return "subtracting " + xs + " and " + cs;
  if (op == "Mul") return "multiplying " + xs + " by " + cs;
  return "dividing " + xs + " by " + cs;
}

constexpr const char* kChannelConstant =
    " (supported: a scalar or per-channel constant, [C, 1, 1] or [1, C, 1, 1] on [N, C, H, W], "
    "[C] on [N, C])";

// Scales every row `o` of `w` (rows of w.elements() / a.size() values) by a[o], and b' = b a + s.
void scale_rows(Tensor* w, Tensor* bias, const std::vector<double>& a,
                const std::vector<double>& s) {
  const size_t per = w->data.size() / a.size();
  for (size_t o = 0; o < a.size(); ++o) {
    for (size_t i = 0; i < per; ++i) {
      float& v = w->data[o * per + i];
      v = static_cast<float>(v * a[o]);
    }
    bias->data[o] = static_cast<float>(bias->data[o] * a[o] + s[o]);
  }
}

}  // namespace

Status Importer::sub(const onnx::NodeProto& node) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* a, value(node, 0));
  SERF_ASSIGN_OR_RETURN(const Value* b, value(node, 1));
  if (!a->constant && !b->constant) {
    return unsupported(node, "subtracting two tensors " + dims_str(onnx_dims_of(*a)) + " and " +
                                 dims_str(onnx_dims_of(*b)) +
                                 " (supported: a tensor minus a constant, or a constant minus a "
                                 "tensor)");
  }
  return affine_constant(node, a->constant ? *b : *a, a->constant ? *a : *b, a->constant);
}

Status Importer::affine_constant(const onnx::NodeProto& node, const Value& x, const Value& c,
                                 bool constant_first) {
  const std::string& op = node.op_type();
  if (x.constant) return unsupported(node, "both inputs constant but not folded");
  if (c.dtype != onnx::TensorProto_DataType_FLOAT) {
    return unsupported(node, "constant of type " + dtype_name(c.dtype) + " (only FLOAT)");
  }
  if (op == "Div" && constant_first) {
    return unsupported(node, "dividing a constant by a tensor (supported: a tensor by a constant)");
  }
  const int n = x.shape.channels;
  // Aligned from the right as ONNX broadcasts: a [C] constant on [N, C, H, W] runs along W.
  const std::vector<double> k = channel_factors(c, n, x.rank);
  if (k.empty()) return unsupported(node, describe_affine(op, x, c) + kChannelConstant);
  std::vector<double> a(static_cast<size_t>(n), 1.0), b(static_cast<size_t>(n), 0.0);
  for (size_t o = 0; o < k.size(); ++o) {
    if (op == "Add") b[o] = k[o];
    if (op == "Sub") {
      a[o] = constant_first ? -1.0 : 1.0;
      b[o] = constant_first ? k[o] : -k[o];
    }
    if (op == "Mul") a[o] = k[o];
    if (op == "Div") {
      if (k[o] == 0) return unsupported(node, describe_affine(op, x, c) + " holding a zero");
      a[o] = 1.0 / k[o];
    }
  }
  return fold_affine(node, x, a, b);
}

Status Importer::fold_affine(const onnx::NodeProto& node, const Value& x,
                             const std::vector<double>& a, const std::vector<double>& b) {
  LayerSpec* writer = sole_writer(x, LayerKind::kConv2d, LayerKind::kFullyConnected);
  if (writer == nullptr) writer = sole_writer(x, LayerKind::kBatchNorm, LayerKind::kLayerNorm);
  if (writer != nullptr) {
    // A conv2d's or fully_connected's weight rows are its output channels; a batchnorm's or
    // layer_norm's weight is one value per channel (feature): y = (norm(x) * w + bias) * a + b.
    scale_rows(&weights_.at(writer->name + ".weight"), &weights_.at(writer->name + ".bias"), a, b);
    alias(node, 0, x);
    --dropped;  // folded, not dropped
    ++folded_constants;
    return Status::Ok();
  }
  // A batchnorm of its own: (x - 0) / sqrt(1 + eps) * w + b with w = a * sqrt(1 + eps).
  LayerSpec l;
  l.kind = LayerKind::kBatchNorm;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {&x}, x.rank));
  const std::string& name = layers_.back().name;
  const auto n = static_cast<int64_t>(a.size());
  const double root = std::sqrt(1.0 + double{layers_.back().epsilon});
  std::vector<float> w(a.size()), bias(b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    w[o] = static_cast<float>(a[o] * root);
    bias[o] = static_cast<float>(b[o]);
  }
  weights_.set(name + ".weight", Tensor{{n}, std::move(w)});
  weights_.set(name + ".bias", Tensor{{n}, std::move(bias)});
  weights_.set(name + ".running_mean", Tensor{{n}, std::vector<float>(a.size(), 0.0f)});
  weights_.set(name + ".running_var", Tensor{{n}, std::vector<float>(a.size(), 1.0f)});
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
