#pragma once
// Internal to model/: the ONNX importer's state (onnx_import.cc reads and orders the graph,
// onnx_ops.cc translates each operator, onnx_fold.cc evaluates constant subgraphs).

#include <onnx/onnx_pb.h>

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/onnx_import.h"

namespace serf::model::onnx_import {

// A value of the ONNX graph: an activation (a tensor of the spec being built) or a constant.
struct Value {
  bool constant = false;
  // Activation: the spec tensor ("input" or a layer's name), its shape and ONNX rank (4: N, C,
  // H, W; 2: N, F, held as F x 1 x 1; 3: N, C, 1, a view between two Squeezes or Unsqueezes).
  std::string tensor;
  Shape shape;
  int rank = 4;
  // Constant: dims and every element (integers are exact below 2^53).
  std::vector<int64_t> dims;
  std::vector<double> data;
  int dtype = onnx::TensorProto_DataType_FLOAT;
  std::string origin;  // the initializer it came from, "" when computed
  // Activation: zero padding (top, left, bottom, right) a Pad node left to the Conv or
  // AveragePool that reads it (onnx_pad.cc); `pad_node` names that Pad.
  std::array<int, 4> pad{};
  std::string pad_node;
  bool padded() const { return pad != std::array<int, 4>{}; }
  // Rank 5: the view [N, g, C/g, H, W] of a channel shuffle (onnx_channels.cc), transposed to
  // [N, C/g, g, H, W] after its Transpose; `shape` stays the 4-D tensor's, `view_node` names
  // the Reshape.
  int shuffle_groups = 0;
  bool shuffle_transposed = false;
  std::string view_node;
  // A step of GELU's subgraph as torch.onnx writes it, x * (1 + Erf(x / sqrt 2)) * 0.5, read node
  // by node (onnx_gelu.cc): 1 = x / gelu_divisor (a Div), 2 = Erf of that, 3 = 1 + that, 4 = x
  // times that; the final Mul by 0.5 makes the gelu layer. `tensor` and `shape` are x's;
  // `gelu_node` names the Div. Nothing else may read such a value.
  int gelu_stage = 0;
  double gelu_divisor = 0;
  std::string gelu_node;
  // A step of LayerNorm's subgraph below opset 17 (onnx_layer_norm.cc): 1 = mean(x), 2 = x - that,
  // 3 = its square, 4 = the mean of that, 5 = + epsilon (`ln_epsilon`), 6 = sqrt of that; Div(2,
  // 6) makes the layer_norm. `tensor` and `shape` are x's; `ln_node` names the first ReduceMean.
  int ln_stage = 0;
  double ln_epsilon = 0;
  std::string ln_node;
  int64_t elements() const;
};

// A node's attributes, checked against the names its operator knows.
class Attributes {
 public:
  Attributes(const onnx::NodeProto& node, std::string where);
  // InvalidArgument naming the first attribute not in `known`.
  Status only(const std::set<std::string>& known) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  StatusOr<int64_t> integer(const std::string& name, int64_t fallback) const;
  StatusOr<float> real(const std::string& name, float fallback) const;
  StatusOr<std::string> text(const std::string& name, const std::string& fallback) const;
  StatusOr<std::vector<int64_t>> integers(const std::string& name,
                                          const std::vector<int64_t>& fallback) const;
  const onnx::AttributeProto* find(const std::string& name) const;

 private:
  Status type_error(const onnx::AttributeProto& a, const char* want) const;
  const onnx::NodeProto& node_;
  std::string where_;
};

// The ONNX shape of an activation: [1, C, H, W], [1, F], [1, C, 1], or a shuffle's 5-D view.
std::vector<int64_t> onnx_dims_of(const Value& v);
// A scalar or per-channel constant `c` against a tensor of `n` channels and ONNX rank `rank`, as
// n factors (onnx_mul.cc); empty when `c` broadcasts any other way.
std::vector<double> channel_factors(const Value& c, int n, int rank);
// A constant's elements as integers, saturated: INT64_MAX (an exporter's "to the end") is 2^63 as
// a double, which does not convert to int64_t.
std::vector<int64_t> ints_of(const Value& v);
// The name of a tensor data type ("FLOAT16").
std::string dtype_name(int dtype);

// A Conv's or ConvTranspose's image input, weight and group, checked against each other.
struct ConvInputs {
  const Value* x = nullptr;
  const Value* w = nullptr;
  int64_t group = 1;
};
// A constant from a TensorProto (initializer or Constant's value); unsupported types keep their
// dtype and no data (an error where they are used).
StatusOr<Value> constant_from(const onnx::TensorProto& t, const std::string& where);

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string path)
      : model_(model), path_(std::move(path)) {}
  StatusOr<OnnxImport> run(const std::string& name);

  // onnx_ops.cc: one translator per operator.
  Status translate(const onnx::NodeProto& node);
  // onnx_fold.cc: a node whose inputs are all constants (Shape reads only an input's shape).
  Status fold(const onnx::NodeProto& node);
  bool foldable(const onnx::NodeProto& node) const;

 private:
  // Reading the model (onnx_import.cc).
  Status check_header();
  Status read_initializers();
  Status read_input();
  StatusOr<std::vector<const onnx::NodeProto*>> order_nodes();
  Status check_control_flow(const std::vector<const onnx::NodeProto*>& order) const;
  Status finish(const std::string& name, OnnxImport* out);

  // Operators (onnx_ops.cc).
  Status conv(const onnx::NodeProto& node);
  Status conv_transpose(const onnx::NodeProto& node);  // onnx_conv_transpose.cc
  // Input 0 (rank 4), weight 1 and `group` of a Conv ([O, C/group, kh, kw]) or, `transposed`, a
  // ConvTranspose ([C, M/group, kh, kw]); bias 2 of `o` elements (zeros when absent).
  StatusOr<ConvInputs> conv_inputs(const onnx::NodeProto& node, const Attributes& a,
                                   bool transposed) const;
  StatusOr<std::vector<double>> conv_bias(const onnx::NodeProto& node, int64_t o) const;
  Status batchnorm(const onnx::NodeProto& node);
  Status gemm(const onnx::NodeProto& node);
  Status matmul(const onnx::NodeProto& node);
  Status add(const onnx::NodeProto& node);
  Status mul(const onnx::NodeProto& node);  // onnx_mul.cc
  bool fuse_gate(const onnx::NodeProto& node, const Value& x, const Value& gate);
  // onnx_affine.cc: Add, Sub, Mul, Div of a tensor `x` and a scalar or per-channel constant `c`
  // (`constant_first`: c - x, c / x) as y = a x + b per channel, folded into the layer that wrote
  // x, or a batchnorm layer of its own.
  Status sub(const onnx::NodeProto& node);
  Status affine_constant(const onnx::NodeProto& node, const Value& x, const Value& c,
                         bool constant_first);
  Status fold_affine(const onnx::NodeProto& node, const Value& x, const std::vector<double>& a,
                     const std::vector<double>& b);
  Status hardsigmoid(const onnx::NodeProto& node);
  Status sloped(const onnx::NodeProto& node);  // LeakyRelu, Elu
  Status pool(const onnx::NodeProto& node);
  bool ceil_adds_window(const onnx::NodeProto& node, const LayerSpec& l, const Shape& in) const;
  Status global_pool(const onnx::NodeProto& node);
  Status activation(const onnx::NodeProto& node, LayerKind kind);
  Status clip(const onnx::NodeProto& node);
  Status lrn(const onnx::NodeProto& node);
  Status softmax(const onnx::NodeProto& node);
  Status flatten(const onnx::NodeProto& node);
  // x as [N, C*H*W], node's output: a view when it is flat already, else a flatten layer.
  Status flatten_to_rows(const onnx::NodeProto& node, const Value* x);
  Status reshape(const onnx::NodeProto& node);
  Status squeeze(const onnx::NodeProto& node);  // and Unsqueeze
  Status concat(const onnx::NodeProto& node);
  Status dropout(const onnx::NodeProto& node);
  Status pad(const onnx::NodeProto& node);  // onnx_pad.cc
  Status pad_amounts(const onnx::NodeProto& node, const Attributes& a, std::vector<int64_t>* pads,
                     double* fill) const;
  Status check_image_pads(const onnx::NodeProto& node, const std::vector<int64_t>& pads,
                          size_t rank) const;
  Status prelu(const onnx::NodeProto& node);
  // onnx_gelu.cc: Div(x, c) starts GELU's pattern; gelu_step runs each node that reads a step of
  // it (and refuses the node when it departs from the pattern).
  Status div(const onnx::NodeProto& node);
  bool read_by_erf(const std::string& value) const;  // some Erf node reads `value`
  Status gelu_step(const onnx::NodeProto& node);
  // onnx_layer_norm.cc: LayerNormalization, and the ReduceMean that starts torch.onnx's LayerNorm
  // subgraph below opset 17 (then ln_step reads each node of it).
  Status layer_normalization(const onnx::NodeProto& node);
  Status feature_mean(const onnx::NodeProto& node, const Value& x);
  Status ln_step(const onnx::NodeProto& node);
  Status add_layer_norm(const onnx::NodeProto& node, const Value& x, float epsilon,
                        const std::vector<double>& weight, const std::vector<double>& bias);
  // onnx_resize.cc: Resize and Upsample by integer scales, nearest or bilinear.
  Status resize(const onnx::NodeProto& node);
  StatusOr<std::vector<double>> resize_scales(const onnx::NodeProto& node, const Value& x) const;
  // onnx_channels.cc: the channel shuffle's views and layer, Slice and Split of channels.
  bool shuffle_view(const onnx::NodeProto& node, const Value& x,
                    const std::vector<int64_t>& target);
  Status shuffle_back(const onnx::NodeProto& node, const Value& x,
                      const std::vector<int64_t>& target);
  Status transpose(const onnx::NodeProto& node);
  Status slice(const onnx::NodeProto& node);
  Status split(const onnx::NodeProto& node);
  Status channel_range(const onnx::NodeProto& node, int out, const Value& x, int64_t begin,
                       int64_t end);
  // Adds the zero padding a Pad left on `x` to `window` (Conv, AveragePool; onnx_pad.cc).
  Status fold_pad(const onnx::NodeProto& node, const Value& x, const Attributes& a, Window* window);

 public:
  // Helpers shared by the translators.
  // "node 'NAME' (OP)", or "unnamed node writing 'OUT' (OP)" when the node has no name.
  static std::string where(const onnx::NodeProto& node);
  // The node's name, or its first output's when it has none (for messages about its output).
  static std::string label(const onnx::NodeProto& node);
  // Input k. An activation with a Pad's zero padding still to fold (Value::pad) is refused
  // unless a Conv, AveragePool or a no-op (Identity, Dropout, Pad) reads it.
  StatusOr<const Value*> value(const onnx::NodeProto& node, int k) const;
  StatusOr<const Value*> activation_input(const onnx::NodeProto& node, int k) const;
  // A float32 constant input k with `rank` dims (-1: any).
  StatusOr<const Value*> weight_input(const onnx::NodeProto& node, int k, int rank) const;
  bool has_input(const onnx::NodeProto& node, int k) const;
  // The operands of a node that reads a step of a subgraph read node by node (GELU's and
  // LayerNorm's: `stage` is &Value::gelu_stage or &Value::ln_stage; onnx_gelu.cc): `k` is the
  // first input holding a step (-1: none, and `step` is null), `other` a binary node's other
  // operand when it is a known value.
  struct StepOperands {
    int k = -1;
    const Value* step = nullptr;
    const Value* other = nullptr;
  };
  StepOperands step_operands(const onnx::NodeProto& node, int Value::*stage) const;
  // Appends a layer reading `inputs` (spec tensors), names it, checks its shape; output 0 of
  // `node` becomes its tensor. `weights_from` names it after a weight initializer when given.
  Status add_layer(const onnx::NodeProto& node, LayerSpec layer,
                   const std::vector<const Value*>& inputs, int rank,
                   const std::string& weights_from = "", int output = 0);
  // Output `out` of `node` is the activation `v` under another name (Identity, Dropout, views).
  void alias(const onnx::NodeProto& node, int out, const Value& v);
  void set_constant(const std::string& name, Value v);
  // The layer that wrote activation `v`, when only one reader remains (the node reading it now):
  // its weights may be changed in place (batchnorm and bias folding). nullptr otherwise.
  LayerSpec* sole_writer(const Value& v, LayerKind kind_a, LayerKind kind_b);
  Status unsupported(const onnx::NodeProto& node, const std::string& what) const;
  int opset() const { return opset_; }
  Weights& weights() { return weights_; }
  int folded_batchnorms = 0, folded_constants = 0, dropped = 0, folded_pads = 0;
  int fused_gates = 0;  // Sigmoid / HardSigmoid + Mul into silu / hardswish, GELU's 5 nodes

 private:
  std::string layer_name(const onnx::NodeProto& node, const std::string& weights_from);
  // Layer `index` and its tensor take `name` (from layer_name) in every value that refers to it.
  void rename_layer(size_t index, const std::string& name);

  const onnx::ModelProto& model_;
  std::string path_;
  int opset_ = 0;
  std::map<std::string, Value> values_;
  std::map<std::string, int> uses_;         // ONNX value -> readers (nodes, graph output)
  std::map<std::string, int> tensor_uses_;  // spec tensor -> ONNX readers left of its aliases
  std::vector<LayerSpec> layers_;
  std::map<std::string, size_t> layer_of_;      // spec tensor -> index in layers_
  std::map<std::string, std::string> node_of_;  // spec layer -> where() of its ONNX node
  std::set<std::string> names_;
  Weights weights_;
  Shape input_shape_;
};

}  // namespace serf::model::onnx_import
