// One translator per ONNX operator: each checks its attributes and inputs, writes the weights
// in the spec's layouts and appends a layer (or folds itself into the layer before it, or is a
// view of its input). The shape operators are in onnx_shape_ops.cc.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

std::vector<float> to_floats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// ONNX pads [top, left, bottom, right] from auto_pad / pads for a window over in_h x in_w.
StatusOr<Window> window_from(const Attributes& a, const std::string& where, int in_h, int in_w,
                             int64_t kh, int64_t kw, bool conv) {
  Window w;
  SERF_ASSIGN_OR_RETURN(auto strides, a.integers("strides", {1, 1}));
  SERF_ASSIGN_OR_RETURN(auto dilations, a.integers("dilations", {1, 1}));
  SERF_ASSIGN_OR_RETURN(auto pads, a.integers("pads", {0, 0, 0, 0}));
  SERF_ASSIGN_OR_RETURN(std::string auto_pad, a.text("auto_pad", "NOTSET"));
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    return InvalidArgument(where +
                           ": strides, dilations and pads must describe 2 spatial "
                           "dimensions (only 2-D windows are supported)");
  }
  if (!conv && (dilations[0] != 1 || dilations[1] != 1)) {
    return InvalidArgument(where + ": dilations " + dims_str(dilations) +
                           " are not supported for pooling (only 1)");
  }
  const int64_t limit = 1 << 20;
  for (int64_t v : {kh, kw, strides[0], strides[1], dilations[0], dilations[1], pads[0], pads[1],
                    pads[2], pads[3]}) {
    if (v < 0 || v > limit)
      return InvalidArgument(where + ": window value " + std::to_string(v) + " out of range");
  }
  w.kernel_h = static_cast<int>(kh);
  w.kernel_w = static_cast<int>(kw);
  w.stride_h = static_cast<int>(strides[0]);
  w.stride_w = static_cast<int>(strides[1]);
  w.dilation_h = static_cast<int>(dilations[0]);
  w.dilation_w = static_cast<int>(dilations[1]);
  if (auto_pad == "NOTSET") {
    w.pad_top = static_cast<int>(pads[0]);
    w.pad_left = static_cast<int>(pads[1]);
    w.pad_bottom = static_cast<int>(pads[2]);
    w.pad_right = static_cast<int>(pads[3]);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output = ceil(in / stride); the odd padding goes after (UPPER) or before (LOWER).
    auto same = [&](int in, int k, int s, int d, int* before, int* after) {
      const int64_t out = (int64_t{in} + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + int64_t{d} * (k - 1) + 1 - in);
      const int small = static_cast<int>(total / 2), big = static_cast<int>(total - total / 2);
      *before = auto_pad == "SAME_UPPER" ? small : big;
      *after = auto_pad == "SAME_UPPER" ? big : small;
    };
    same(in_h, w.kernel_h, w.stride_h, w.dilation_h, &w.pad_top, &w.pad_bottom);
    same(in_w, w.kernel_w, w.stride_w, w.dilation_w, &w.pad_left, &w.pad_right);
  } else if (auto_pad != "VALID") {
    return InvalidArgument(where + ": auto_pad '" + auto_pad +
                           "' is not supported (NOTSET, SAME_UPPER, SAME_LOWER, VALID)");
  }
  return w;
}

}  // namespace

Status Importer::translate(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  if (step_operands(node, &Value::gelu_stage).step) return gelu_step(node);
  if (step_operands(node, &Value::ln_stage).step) return ln_step(node);
  if (op == "Conv") return conv(node);
  if (op == "ConvTranspose") return conv_transpose(node);
  if (op == "BatchNormalization") return batchnorm(node);
  if (op == "LayerNormalization") return layer_normalization(node);
  if (op == "Gemm") return gemm(node);
  if (op == "MatMul") return matmul(node);
  if (op == "Add") return add(node);
  if (op == "MaxPool" || op == "AveragePool") return pool(node);
  if (op == "GlobalAveragePool" || op == "ReduceMean") return global_pool(node);
  if (op == "Relu") return activation(node, LayerKind::kRelu);
  if (op == "Sigmoid") return activation(node, LayerKind::kSigmoid);
  if (op == "HardSigmoid") return hardsigmoid(node);
  if (op == "HardSwish") return activation(node, LayerKind::kHardSwish);
  if (op == "Tanh") return activation(node, LayerKind::kTanh);
  if (op == "LeakyRelu" || op == "Elu") return sloped(node);
  if (op == "PRelu") return prelu(node);
  if (op == "Div") return div(node);
  if (op == "Sub") return sub(node);
  if (op == "Resize" || op == "Upsample") return resize(node);
  if (op == "Mul") return mul(node);
  if (op == "Clip") return clip(node);
  if (op == "LRN") return lrn(node);
  if (op == "Softmax" || op == "LogSoftmax") return softmax(node);
  if (op == "Flatten") return flatten(node);
  if (op == "Reshape") return reshape(node);
  if (op == "Squeeze" || op == "Unsqueeze") return squeeze(node);
  if (op == "Concat") return concat(node);
  if (op == "Dropout") return dropout(node);
  if (op == "Pad") return pad(node);
  if (op == "Transpose") return transpose(node);
  if (op == "Slice") return slice(node);
  if (op == "Split") return split(node);
  if (op == "Identity") {
    SERF_ASSIGN_OR_RETURN(const Value* x, value(node, 0));
    alias(node, 0, *x);
    return Status::Ok();
  }
  return unsupported(
      node, "operator " + op +
                " is not supported (supported: Conv, ConvTranspose, "
                "BatchNormalization, LayerNormalization (and its ReduceMean-Sub-Pow-ReduceMean-"
                "Add-Sqrt-Div subgraph) over [N, F], Relu, "
                "Clip, Sigmoid, HardSigmoid, HardSwish, LeakyRelu, PRelu, Tanh, Elu, "
                "GELU's Div-Erf-Add-Mul-Mul, MaxPool, AveragePool, "
                "GlobalAveragePool, ReduceMean "
                "(over height and width), Gemm, "
                "MatMul, Add, Sub, Mul, Div (of a tensor and a constant), Concat, "
                "Flatten, Reshape, Squeeze, Unsqueeze, "
                "Softmax, LogSoftmax, LRN, Dropout, "
                "Identity, Pad (zeros before a Conv or AveragePool), Resize and "
                "Upsample (integer scales), Slice and "
                "Split of channels, the channel shuffle's Reshape-Transpose-"
                "Reshape, and constant subgraphs)");
}

StatusOr<ConvInputs> Importer::conv_inputs(const onnx::NodeProto& node, const Attributes& a,
                                           bool transposed) const {
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (x->rank != 4)
    return unsupported(node, "input of rank " + std::to_string(x->rank) + " (only 2-D images)");
  SERF_ASSIGN_OR_RETURN(const Value* w, weight_input(node, 1, 4));
  SERF_ASSIGN_OR_RETURN(int64_t group, a.integer("group", 1));
  const int64_t c = x->shape.channels;
  const bool fits = group >= 1 && c % group == 0 &&
                    (transposed ? w->dims[0] == c && w->dims[1] >= 1
                                : w->dims[0] % group == 0 && w->dims[1] * group == c);
  if (!fits) {
    const std::string needs = transposed ? std::to_string(c) + ", M/group"
                                         : "O, " + std::to_string(group > 0 ? c / group : c);
    return unsupported(node, "weight '" + node.input(1) + "' has shape " + dims_str(w->dims) +
                                 " but the input has " + std::to_string(c) +
                                 " channels and group " + std::to_string(group) + " (needs [" +
                                 needs + ", kh, kw])");
  }
  return ConvInputs{x, w, group};
}

StatusOr<std::vector<double>> Importer::conv_bias(const onnx::NodeProto& node, int64_t o) const {
  if (!has_input(node, 2)) return std::vector<double>(static_cast<size_t>(o), 0.0);
  SERF_ASSIGN_OR_RETURN(const Value* b, weight_input(node, 2, 1));
  if (b->elements() != o) {
    return unsupported(node, "bias '" + node.input(2) + "' has shape " + dims_str(b->dims) +
                                 ", the weight needs [" + std::to_string(o) + "]");
  }
  return b->data;
}

Status Importer::conv(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(
      a.only({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  SERF_ASSIGN_OR_RETURN(ConvInputs in, conv_inputs(node, a, false));
  const Value* x = in.x;
  const Value* w = in.w;
  const int64_t group = in.group;
  const int64_t o = w->dims[0];
  SERF_ASSIGN_OR_RETURN(auto kernel, a.integers("kernel_shape", {w->dims[2], w->dims[3]}));
  if (kernel != std::vector<int64_t>{w->dims[2], w->dims[3]}) {
    return unsupported(node, "kernel_shape " + dims_str(kernel) + " disagrees with weight '" +
                                 node.input(1) + "' of shape " + dims_str(w->dims));
  }
  LayerSpec l;
  l.kind = LayerKind::kConv2d;
  l.out_channels = static_cast<int>(o);
  l.groups = static_cast<int>(group);
  SERF_ASSIGN_OR_RETURN(l.window, window_from(a, where(node), x->shape.height, x->shape.width,
                                              w->dims[2], w->dims[3], true));
  SERF_RETURN_IF_ERROR(fold_pad(node, *x, a, &l.window));
  SERF_ASSIGN_OR_RETURN(std::vector<double> bias, conv_bias(node, o));
  const std::vector<float> wdata = to_floats(w->data);
  const std::vector<int64_t> wdims = w->dims;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {x}, 4, w->origin));
  const std::string& name = layers_.back().name;
  weights_.set(name + ".weight", Tensor{wdims, wdata});
  weights_.set(name + ".bias", Tensor{{o}, to_floats(bias)});
  return Status::Ok();
}

Status Importer::batchnorm(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"epsilon", "momentum", "training_mode", "spatial"}));
  SERF_ASSIGN_OR_RETURN(int64_t training, a.integer("training_mode", 0));
  SERF_ASSIGN_OR_RETURN(int64_t spatial, a.integer("spatial", 1));
  if (training != 0) return unsupported(node, "training_mode 1 (export the model in eval mode)");
  if (spatial != 1) return unsupported(node, "spatial 0 (per-element statistics)");
  SERF_ASSIGN_OR_RETURN(float epsilon, a.real("epsilon", 1e-5f));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  const int c = x->shape.channels;
  std::vector<std::vector<double>> p;  // scale, bias, mean, var
  for (int k = 1; k <= 4; ++k) {
    SERF_ASSIGN_OR_RETURN(const Value* v, weight_input(node, k, 1));
    if (v->elements() != c) {
      return unsupported(node, "'" + node.input(k) + "' has shape " + dims_str(v->dims) +
                                   " but the input has " + std::to_string(c) + " channels");
    }
    p.push_back(v->data);
  }
  // Folded into the conv2d / fully_connected that wrote the input when nothing else reads it:
  // w' = w * s, b' = (b - mean) * s + bias, s = scale / sqrt(var + epsilon).
  if (LayerSpec* writer = sole_writer(*x, LayerKind::kConv2d, LayerKind::kFullyConnected)) {
    Tensor& w = weights_.at(writer->name + ".weight");
    Tensor& b = weights_.at(writer->name + ".bias");
    const int64_t per = w.elements() / c;
    for (int o = 0; o < c; ++o) {
      const double s = p[0][o] / std::sqrt(p[3][o] + double{epsilon});
      for (int64_t i = 0; i < per; ++i) {
        float& v = w.data[static_cast<size_t>(o * per + i)];
        v = static_cast<float>(v * s);
      }
      b.data[static_cast<size_t>(o)] = static_cast<float>((b.data[o] - p[2][o]) * s + p[1][o]);
    }
    ++folded_batchnorms;
    alias(node, 0, *x);
    --dropped;  // counted as folded, not dropped
    return Status::Ok();
  }
  LayerSpec l;
  l.kind = LayerKind::kBatchNorm;
  l.epsilon = epsilon;
  const int rank = x->rank;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {x}, rank));
  const std::string& name = layers_.back().name;
  const char* fields[] = {".weight", ".bias", ".running_mean", ".running_var"};
  for (int k = 0; k < 4; ++k)
    weights_.set(name + fields[k], Tensor{{c}, to_floats(p[static_cast<size_t>(k)])});
  return Status::Ok();
}

Status Importer::gemm(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"alpha", "beta", "transA", "transB", "broadcast"}));
  SERF_ASSIGN_OR_RETURN(int64_t trans_a, a.integer("transA", 0));
  SERF_ASSIGN_OR_RETURN(int64_t trans_b, a.integer("transB", 0));
  SERF_ASSIGN_OR_RETURN(float alpha, a.real("alpha", 1.0f));
  SERF_ASSIGN_OR_RETURN(float beta, a.real("beta", 1.0f));
  if (trans_a != 0) return unsupported(node, "transA 1 (the input must be [N, F])");
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (x->shape.height != 1 || x->shape.width != 1) {
    return unsupported(node, "input is not flat (Flatten it first)");
  }
  SERF_ASSIGN_OR_RETURN(const Value* b, weight_input(node, 1, 2));
  const int64_t f = x->shape.channels;
  const int64_t o = trans_b ? b->dims[0] : b->dims[1];
  if ((trans_b ? b->dims[1] : b->dims[0]) != f) {
    return unsupported(node, "weight '" + node.input(1) + "' has shape " + dims_str(b->dims) +
                                 " (transB " + std::to_string(trans_b) + ") but the input has " +
                                 std::to_string(f) + " features");
  }
  std::vector<float> w(static_cast<size_t>(o * f));
  for (int64_t r = 0; r < o; ++r) {
    for (int64_t k = 0; k < f; ++k) {
      const double v = trans_b ? b->data[static_cast<size_t>(r * f + k)]
                               : b->data[static_cast<size_t>(k * o + r)];
      w[static_cast<size_t>(r * f + k)] = static_cast<float>(alpha * v);
    }
  }
  std::vector<double> bias(static_cast<size_t>(o), 0.0);
  if (has_input(node, 2)) {
    SERF_ASSIGN_OR_RETURN(const Value* c, weight_input(node, 2, -1));
    bias = channel_factors(*c, static_cast<int>(o), 2);
    if (bias.empty()) {
      return unsupported(node, "bias '" + node.input(2) + "' of shape " + dims_str(c->dims) +
                                   " does not broadcast per output (" + std::to_string(o) + ")");
    }
    for (double& v : bias) v *= beta;
  }
  LayerSpec l;
  l.kind = LayerKind::kFullyConnected;
  l.out_channels = static_cast<int>(o);
  const std::string origin = b->origin;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {x}, 2, origin));
  const std::string& name = layers_.back().name;
  weights_.set(name + ".weight", Tensor{{o, f}, std::move(w)});
  weights_.set(name + ".bias", Tensor{{o}, to_floats(bias)});
  return Status::Ok();
}

Status Importer::matmul(const onnx::NodeProto& node) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (x->rank != 2)
    return unsupported(node, "input of rank " + std::to_string(x->rank) + " (only [N, F])");
  SERF_ASSIGN_OR_RETURN(const Value* b, weight_input(node, 1, 2));
  const int64_t f = x->shape.channels, o = b->dims[1];
  if (b->dims[0] != f) {
    return unsupported(node, "weight '" + node.input(1) + "' has shape " + dims_str(b->dims) +
                                 " but the input has " + std::to_string(f) + " features");
  }
  std::vector<float> w(static_cast<size_t>(o * f));  // [F, O] -> [O, F]
  for (int64_t r = 0; r < o; ++r) {
    for (int64_t k = 0; k < f; ++k) {
      w[static_cast<size_t>(r * f + k)] =
          static_cast<float>(b->data[static_cast<size_t>(k * o + r)]);
    }
  }
  LayerSpec l;
  l.kind = LayerKind::kFullyConnected;
  l.out_channels = static_cast<int>(o);
  SERF_RETURN_IF_ERROR(add_layer(node, l, {x}, 2, b->origin));
  const std::string& name = layers_.back().name;
  weights_.set(name + ".weight", Tensor{{o, f}, std::move(w)});
  weights_.set(name + ".bias", Tensor{{o}, std::vector<float>(static_cast<size_t>(o), 0.0f)});
  return Status::Ok();
}

Status Importer::add(const onnx::NodeProto& node) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* a, value(node, 0));
  SERF_ASSIGN_OR_RETURN(const Value* b, value(node, 1));
  if (!a->constant && !b->constant) {
    if (a->shape != b->shape || a->rank != b->rank) {
      return unsupported(node, "inputs " + dims_str(onnx_dims_of(*a)) + " and " +
                                   dims_str(onnx_dims_of(*b)) +
                                   " of different shapes (broadcasting is not supported)");
    }
    LayerSpec l;
    l.kind = LayerKind::kAdd;
    return add_layer(node, l, {a, b}, a->rank);
  }
  // A tensor plus a constant: folded into the layer before, or a batchnorm (onnx_affine.cc).
  return affine_constant(node, a->constant ? *b : *a, a->constant ? *a : *b, a->constant);
}

Status Importer::pool(const onnx::NodeProto& node) {
  const bool max = node.op_type() == "MaxPool";
  const Attributes a(node, where(node));
  if (max) {
    SERF_RETURN_IF_ERROR(a.only({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                                 "storage_order", "strides"}));
  } else {
    SERF_RETURN_IF_ERROR(
        a.only({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}));
  }
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (x->rank != 4)
    return unsupported(node, "input of rank " + std::to_string(x->rank) + " (only 2-D images)");
  SERF_ASSIGN_OR_RETURN(auto kernel, a.integers("kernel_shape", {}));
  if (kernel.size() != 2) return unsupported(node, "kernel_shape must give 2 spatial dimensions");
  LayerSpec l;
  l.kind = max ? LayerKind::kMaxPool : LayerKind::kAvgPool;
  SERF_ASSIGN_OR_RETURN(l.window, window_from(a, where(node), x->shape.height, x->shape.width,
                                              kernel[0], kernel[1], false));
  SERF_ASSIGN_OR_RETURN(int64_t ceil_mode, a.integer("ceil_mode", 0));
  SERF_ASSIGN_OR_RETURN(int64_t include, a.integer("count_include_pad", 0));
  SERF_ASSIGN_OR_RETURN(int64_t storage, a.integer("storage_order", 0));
  if (storage != 0) return unsupported(node, "storage_order 1 (column-major indices)");
  l.count_include_pad = include != 0;
  if (x->padded()) {
    // The Pad's zeros are data: averaged over, as count_include_pad 1 averages padding.
    const Window& w = l.window;
    const bool own_pads = w.pad_top || w.pad_left || w.pad_bottom || w.pad_right;
    if (own_pads && include == 0) {
      return unsupported(node, "input padded by Pad '" + x->pad_node +
                                   "' and padding of its own not counted (count_include_pad 0)");
    }
    SERF_RETURN_IF_ERROR(fold_pad(node, *x, a, &l.window));
    l.count_include_pad = true;
  }
  l.ceil_mode = ceil_mode != 0 && ceil_adds_window(node, l, x->shape);
  if (x->padded() && l.ceil_mode) {
    // torch.onnx writes AvgPool2d(padding=p, ceil_mode=True) so: PyTorch divides the last
    // window by its part inside the padded input, oneDNN by the whole kernel.
    return unsupported(node, "input padded by Pad '" + x->pad_node +
                                 "' with ceil_mode 1 adding a partial window (its divisor would "
                                 "count the padding but not the part past it)");
  }
  return add_layer(node, l, {x}, 4);
}

// ceil_mode changes a pooling only when it adds a window at the bottom or right; when it does not,
// the layer is the same without it (and an average needs no partial-window divisor).
bool Importer::ceil_adds_window(const onnx::NodeProto& node, const LayerSpec& l,
                                const Shape& in) const {
  LayerSpec with = l, without = l;
  with.ceil_mode = true;
  without.ceil_mode = false;
  with.count_include_pad = false;  // only the shape is asked: no divisor rule in the way
  const StatusOr<LayerInfo> a = infer_layer_shape(with, {in}, where(node));
  const StatusOr<LayerInfo> b = infer_layer_shape(without, {in}, where(node));
  return !a.ok() || !b.ok() || a->out != b->out;
}

// GlobalAveragePool, and ReduceMean over the height and width (exporters write x.mean([2, 3])
// so): keepdims 0 leaves [N, C], i.e. the pooled C x 1 x 1 held flat.
Status Importer::global_pool(const onnx::NodeProto& node) {
  const bool reduce = node.op_type() == "ReduceMean";
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(reduce ? a.only({"axes", "keepdims"}) : a.only({}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (reduce && x->rank == 2) return feature_mean(node, *x);  // LayerNorm's (onnx_layer_norm.cc)
  if (x->rank != 4)
    return unsupported(node, "input of rank " + std::to_string(x->rank) + " (only 2-D images)");
  int rank = 4;
  if (reduce) {
    if (has_input(node, 1)) return unsupported(node, "axes as an input (opset 18)");
    SERF_ASSIGN_OR_RETURN(auto axes, a.integers("axes", {}));
    for (int64_t& axis : axes) axis += axis < 0 ? 4 : 0;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int64_t>{2, 3}) {
      return unsupported(
          node, "axes " + dims_str(axes) + " (only the mean over height and width, axes [2, 3])");
    }
    SERF_ASSIGN_OR_RETURN(int64_t keepdims, a.integer("keepdims", 1));
    rank = keepdims != 0 ? 4 : 2;
  }
  LayerSpec l;
  l.kind = LayerKind::kGlobalAvgPool;
  return add_layer(node, l, {x}, rank);
}

Status Importer::activation(const onnx::NodeProto& node, LayerKind kind) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  LayerSpec l;
  l.kind = kind;
  return add_layer(node, l, {x}, x->rank);
}

// LeakyRelu (alpha 0.01 by default) and Elu (alpha 1): the slope or scale below zero.
Status Importer::sloped(const onnx::NodeProto& node) {
  const bool leaky = node.op_type() == "LeakyRelu";
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"alpha"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(float alpha, a.real("alpha", leaky ? 0.01f : 1.0f));
  LayerSpec l;
  l.kind = leaky ? LayerKind::kLeakyRelu : LayerKind::kElu;
  (leaky ? l.leaky_relu_alpha : l.elu_alpha) = alpha;
  return add_layer(node, l, {x}, x->rank);
}

// PRelu: one slope for every channel is a leaky_relu (run inside the conv2d before it); one per
// channel, [C, 1, 1] as torch.onnx writes nn.PReLU(C) (or [C] for an [N, C] input), a prelu layer.
Status Importer::prelu(const onnx::NodeProto& node) {
  SERF_RETURN_IF_ERROR(Attributes(node, where(node)).only({}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(const Value* slope, weight_input(node, 1, -1));
  const int c = x->shape.channels;
  const std::vector<double> slopes = channel_factors(*slope, c, x->rank);
  if (slopes.empty()) {
    return unsupported(node, "slope '" + node.input(1) + "' of shape " + dims_str(slope->dims) +
                                 " for an input " + dims_str(onnx_dims_of(*x)) +
                                 " (supported: one slope, or one per channel: [" +
                                 std::to_string(c) + (x->rank == 4 ? ", 1, 1]" : "]") + ")");
  }
  LayerSpec l;
  if (std::all_of(slopes.begin(), slopes.end(), [&](double a) { return a == slopes[0]; })) {
    l.kind = LayerKind::kLeakyRelu;
    l.leaky_relu_alpha = static_cast<float>(slopes[0]);
    return add_layer(node, l, {x}, x->rank);
  }
  l.kind = LayerKind::kPrelu;
  SERF_RETURN_IF_ERROR(add_layer(node, l, {x}, x->rank, slope->origin));
  weights_.set(layers_.back().name + ".weight", Tensor{{c}, to_floats(slopes)});
  return Status::Ok();
}

Status Importer::hardsigmoid(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"alpha", "beta"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  LayerSpec l;
  l.kind = LayerKind::kHardSigmoid;
  SERF_ASSIGN_OR_RETURN(l.hardsigmoid_alpha, a.real("alpha", 0.2f));  // ONNX's defaults
  SERF_ASSIGN_OR_RETURN(l.hardsigmoid_beta, a.real("beta", 0.5f));
  return add_layer(node, l, {x}, x->rank);
}

Status Importer::clip(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
  if (opset() < 11) {
    SERF_RETURN_IF_ERROR(a.only({"min", "max"}));
    if (a.has("min")) {
      SERF_ASSIGN_OR_RETURN(lo, a.real("min", 0.0f));
    }
    if (a.has("max")) {
      SERF_ASSIGN_OR_RETURN(hi, a.real("max", 0.0f));
    }
  } else {
    SERF_RETURN_IF_ERROR(a.only({}));
    for (int k : {1, 2}) {
      if (!has_input(node, k)) continue;
      SERF_ASSIGN_OR_RETURN(const Value* v, value(node, k));
      if (!v->constant || v->elements() != 1 || v->data.empty()) {
        return unsupported(node, "min and max must be constant scalars");
      }
      (k == 1 ? lo : hi) = v->data[0];
    }
  }
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  if (std::isinf(lo) && lo < 0 && std::isinf(hi) && hi > 0) {  // no bound at all: a no-op
    alias(node, 0, *x);
    return Status::Ok();
  }
  // One bound (torch.clamp(x, min=a) or max=b): the other is float's largest, which no float32
  // activation exceeds.
  const double big = std::numeric_limits<float>::max();
  const double bound_lo = std::isinf(lo) && lo < 0 ? -big : lo;
  const double bound_hi = std::isinf(hi) && hi > 0 ? big : hi;
  LayerSpec l;
  if (lo == 0.0 && std::isinf(hi) && hi > 0) {
    l.kind = LayerKind::kRelu;
  } else if (std::isfinite(bound_lo) && std::isfinite(bound_hi) && bound_lo <= bound_hi &&
             std::fabs(bound_lo) <= big && std::fabs(bound_hi) <= big) {
    l.kind = LayerKind::kClip;
    l.clip_min = static_cast<float>(bound_lo);
    l.clip_max = static_cast<float>(bound_hi);
  } else {
    return unsupported(node, "min " + std::to_string(lo) + ", max " + std::to_string(hi) +
                                 " (supported: float32 bounds with min <= max, either or both)");
  }
  return add_layer(node, l, {x}, x->rank);
}

Status Importer::lrn(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"alpha", "beta", "bias", "size"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  LayerSpec l;
  l.kind = LayerKind::kLrn;
  SERF_ASSIGN_OR_RETURN(l.lrn_alpha, a.real("alpha", 1e-4f));
  SERF_ASSIGN_OR_RETURN(l.lrn_beta, a.real("beta", 0.75f));
  SERF_ASSIGN_OR_RETURN(l.lrn_k, a.real("bias", 1.0f));
  SERF_ASSIGN_OR_RETURN(int64_t size, a.integer("size", 0));
  if (size < 1 || size > (1 << 20)) return unsupported(node, "size " + std::to_string(size));
  l.lrn_size = static_cast<int>(size);
  return add_layer(node, l, {x}, x->rank);
}

Status Importer::softmax(const onnx::NodeProto& node) {
  const Attributes a(node, where(node));
  SERF_RETURN_IF_ERROR(a.only({"axis"}));
  SERF_ASSIGN_OR_RETURN(const Value* x, activation_input(node, 0));
  SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", opset() < 13 ? 1 : -1));
  if (axis < 0) axis += x->rank;
  const bool flat = x->shape.height == 1 && x->shape.width == 1;
  if (axis != 1 || !flat) {
    return unsupported(node, "softmax over axis " + std::to_string(axis) + " of a rank-" +
                                 std::to_string(x->rank) +
                                 " tensor (only over the features of a flat [N, F] tensor)");
  }
  LayerSpec l;
  l.kind = LayerKind::kSoftmax;
  l.softmax_log = node.op_type() == "LogSoftmax";
  return add_layer(node, l, {x}, x->rank);
}

}  // namespace serf::model::onnx_import
