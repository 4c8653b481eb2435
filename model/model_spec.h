#pragma once
// Model specifications (configs/models/*.json): parse -> validate -> shape inference.
// A request is one image (batch 1) in NCHW layout; activations are float32.
//
// A model is a graph of named tensors. The model's input is the tensor "input"; every layer
// produces one tensor named after the layer and lists the tensors it reads in "inputs". A layer
// without "inputs" reads the layer before it (the first layer reads "input"), so the chain specs of
// the first format load unchanged. Layers are listed in an order where every input is defined
// before it is read (no cycles); the last layer's tensor is the model's output, and every other
// layer's tensor must be read by some layer.
//
//   {"name": "res", "input": {"channels": 3, "height": 32, "width": 32},
//    "layers": [{"name": "c1", "type": "conv2d", "out_channels": 16, "kernel": 3, "pad": 1},
//               {"name": "r1", "type": "relu"},
//               {"name": "c2", "type": "conv2d", "out_channels": 16, "kernel": 3, "pad": 1},
//               {"name": "sum", "type": "add", "inputs": ["c2", "r1"]}, ...]}
//
// Optional top-level "description" (free text). Unknown fields are errors (a typo is not a silent
// default). Layer names default to "<type><index>" (index in "layers") when absent; they name the
// weight tensors "<layer>.weight", "<layer>.bias" (and for batchnorm "<layer>.running_mean",
// "<layer>.running_var"), in PyTorch layouts: conv [O, I/groups, kh, kw], fc [out, in].

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf::model {

enum class LayerKind {
  kConv2d,
  kConvTranspose2d,
  kMaxPool,
  kAvgPool,
  kGlobalAvgPool,
  kRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kSilu,
  kLeakyRelu,
  kTanh,
  kElu,
  kGelu,
  kPrelu,
  kBatchNorm,
  kLayerNorm,
  kLrn,
  kFlatten,
  kFullyConnected,
  kAdd,
  kMul,
  kConcat,
  kSlice,
  kChannelShuffle,
  kUpsample,
  kPad,
  kSoftmax
};

const char* to_string(LayerKind kind);  // the spec's "type" string
// The inverse of to_string; an unknown type lists the known ones.
StatusOr<LayerKind> layer_kind_from_string(const std::string& type);

// Kinds with weights: conv2d, conv_transpose2d, fully_connected (the layers K ranks split),
// batchnorm, layer_norm, prelu.
bool has_weights(LayerKind kind);
// Element-wise activations (relu, clip, sigmoid, hardsigmoid, hardswish, silu, leaky_relu,
// tanh, elu, gelu): a conv2d / fully_connected may run them.
bool is_activation(LayerKind kind);

// The name of the model's input tensor (no layer may take it).
inline constexpr const char* kModelInputName = "input";

struct Shape {  // one request's activation, channels x height x width (flattened: C x 1 x 1)
  int channels = 0;
  int height = 1;
  int width = 1;
  int64_t elements() const { return int64_t{channels} * height * width; }
  bool operator==(const Shape& o) const {
    return channels == o.channels && height == o.height && width == o.width;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

// A sliding window over height x width (conv2d, maxpool, avgpool). Spec fields: "kernel" k or
// [kh, kw]; "stride" s or [sh, sw]; "pad" p, [ph, pw] or [top, left, bottom, right]; "dilation"
// d or [dh, dw] (conv2d only).
struct Window {
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dilation_h = 1, dilation_w = 1;
  bool square() const { return kernel_h == kernel_w; }
};

struct LayerSpec {
  std::string name;
  LayerKind kind = LayerKind::kRelu;
  // The tensors this layer reads: "input" or earlier layers' names (filled in when absent).
  std::vector<std::string> inputs;
  // conv2d: out_channels, kernel, stride (1), pad (0), dilation (1), groups (1; groups ==
  // in channels == out_channels is depthwise). Output sizes use PyTorch's floor rule:
  // (in + pad_before + pad_after - dilation*(kernel-1) - 1) / stride + 1.
  // pooling: kernel, stride (default kernel), pad (0, at most kernel/2); "ceil_mode" (false)
  // rounds the output size up (PyTorch's rule: the last window starts inside the input or its
  // left padding; an avgpool's partial window only with count_include_pad false, divided by its
  // part inside the input). avgpool: "count_include_pad" (true: the zero padding counts in the
  // divisor, PyTorch's default and the first format's rule).
  Window window;
  int out_channels = 0;  // conv2d out_channels, fully_connected out
  int groups = 1;
  // conv_transpose2d (PyTorch's ConvTranspose2d, ONNX ConvTranspose): conv2d's fields, weights
  // [I, O/groups, kh, kw]; output (in - 1) * stride - pad_before - pad_after + dilation * (kernel
  // - 1) + 1 + output_padding ("output_padding" p or [ph, pw], at most the bottom / right pad).
  int output_padding_h = 0;
  int output_padding_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  // clip: min(max(x, clip_min), clip_max); ReLU6 is min 0, max 6 (the defaults).
  float clip_min = 0.0f;
  float clip_max = 6.0f;
  // hardsigmoid: min(max(alpha * x + beta, 0), 1); the defaults are PyTorch's Hardsigmoid (ONNX's
  // HardSigmoid defaults to alpha 0.2). hardswish: x * hardsigmoid(x) with PyTorch's 1/6 and 1/2
  // (x * relu6(x + 3) / 6). silu (swish): x * sigmoid(x).
  float hardsigmoid_alpha = 1.0f / 6.0f;
  float hardsigmoid_beta = 0.5f;
  // softmax: "log" (false) makes it log(softmax(x)) (ONNX LogSoftmax, PyTorch log_softmax).
  bool softmax_log = false;
  // leaky_relu: x for x >= 0, alpha * x below (ONNX LeakyRelu, PyTorch LeakyReLU); elu: x for
  // x > 0, alpha * (exp(x) - 1) below. tanh has no field.
  float leaky_relu_alpha = 0.01f;
  float elu_alpha = 1.0f;
  // gelu: x * (1 + erf(x / sqrt 2)) / 2 (PyTorch's GELU, approximate 'none'). prelu: x for
  // x >= 0, weight[c] * x below, one slope per channel (tensor "<layer>.weight", [C]).
  // upsample: "scale" s or [sh, sw] (integers >= 1), "mode" "nearest" (output (h, w) is input
  // (h / sh, w / sw), rounded down: PyTorch's nearest) or "bilinear" (PyTorch's align_corners
  // false: half-pixel centres, clamped at the edges).
  int upsample_h = 2;
  int upsample_w = 2;
  bool upsample_bilinear = false;
  // pad: "pad" p, [ph, pw] or [top, left, bottom, right] (window.pad_*), "mode" "reflect"
  // (default: PyTorch's ReflectionPad2d, each pad below its side's size) or "edge"
  // (ReplicationPad2d). Zero padding is the padding of the conv2d or pooling that reads it.
  bool pad_reflect = true;
  // batchnorm (inference): y = (x - running_mean) / sqrt(running_var + epsilon) * weight + bias;
  // layer_norm: y = (x - mean) / sqrt(var + epsilon) * weight + bias over each row's features.
  float epsilon = 1e-5f;
  // lrn (across channels, AlexNet's): size (odd), alpha, beta, k;
  //   b_c = a_c * (k + alpha/size * sum_{|c'-c| <= size/2} a_c'^2)^-beta (PyTorch
  //   LocalResponseNorm, ONNX LRN, oneDNN lrn_across_channels)
  int lrn_size = 5;
  float lrn_alpha = 1e-4f;
  float lrn_beta = 0.75f;
  float lrn_k = 1.0f;
  // slice: channels [slice_begin, slice_end) of its input ("begin", "end"; ShuffleNet's channel
  // split). channel_shuffle: "groups" g dividing C; output channel j * g + i is input channel
  // i * (C / g) + j (i < g, j < C / g): ShuffleNet's reshape to [g, C/g], transpose, flatten.
  int slice_begin = 0;
  int slice_end = 0;
  // add: two or more inputs of one shape, summed. concat: two or more inputs of one height and
  // width, joined along the channels in order. mul: two inputs, the second of the first's shape
  // (element-wise) or C x 1 x 1 where the first is C x H x W (a per-channel scale, as
  // squeeze-and-excitation applies it). fully_connected, softmax: flat input (C x 1 x 1,
  // e.g. after a flatten, or a vector model input of C x 1 x 1); softmax is the last layer.
};

struct ModelSpec {
  std::string name;
  std::string description;  // optional free text
  Shape input;
  std::vector<LayerSpec> layers;
};

// Shape inference results for one layer.
struct LayerInfo {
  Shape in;                  // the first input's shape
  std::vector<Shape> ins;    // every input's shape
  std::vector<int> sources;  // per input: the producing layer's index, -1 for the model input
  Shape out;
  int64_t parameters = 0;    // floats in the layer's weight tensors
  int64_t connections = 0;   // multiply-adds per request (conv2d and fully_connected; 0 for others)
  int64_t weight_bytes = 0;  // parameters * sizeof(float)
  bool has_weights() const { return parameters > 0; }
};

struct ModelPlan {
  ModelSpec spec;
  std::vector<LayerInfo> layers;            // one per spec.layers entry
  std::vector<std::vector<int>> consumers;  // per layer: the layers reading its tensor, in order
  std::vector<int> input_consumers;         // the layers reading the model input
  int64_t parameters = 0;
  int64_t connections = 0;
  int64_t weight_bytes = 0;
  // Peak bytes of activations alive at once (batch 1, float32): a tensor lives from the layer
  // that writes it to the last layer that reads it (flatten is a view), input and output included.
  int64_t activation_peak_bytes = 0;
  Shape output() const { return layers.empty() ? spec.input : layers.back().out; }
};

// Errors name the layer ("layers[3] (conv2): kernel 7 larger than input 5x5").
StatusOr<ModelSpec> model_spec_from_json(const nlohmann::json& doc, const std::string& source);
StatusOr<ModelSpec> load_model_spec(const std::string& path);
// The spec as JSON in the format model_spec_from_json reads: defaults and chain inputs omitted, so
// a chain spec is written as the first format.
nlohmann::ordered_json model_spec_to_json(const ModelSpec& spec);
StatusOr<ModelPlan> infer_shapes(const ModelSpec& spec);
// The shape and counts of one layer reading tensors of shapes `ins`: infer_shapes's per-layer
// checks without the graph's (the ONNX import builds a spec layer by layer). Errors start with
// `where`.
StatusOr<LayerInfo> infer_layer_shape(const LayerSpec& layer, const std::vector<Shape>& ins,
                                      const std::string& where);
// load_model_spec + infer_shapes.
StatusOr<ModelPlan> load_model(const std::string& path);

}  // namespace serf::model
