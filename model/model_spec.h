#pragma once
// Model specifications (configs/models/*.json): parse -> validate -> shape inference.
// A request is one image (batch 1) in NCHW layout; activations are float32.
//
// Contract shared by model/, engine/ and the tools (fill in the .cc files; keep these names):
//   spec JSON: {"name": "cifar10", "input": {"channels":3, "height":32, "width":32},
//               "layers": [{"name":"conv1", "type":"conv2d", "out_channels":32, "kernel":5,
//                           "stride":1, "pad":2}, {"type":"relu"}, {"type":"maxpool", "kernel":3,
//                           "stride":2}, {"type":"lrn", "size":5, "alpha":1e-4, "beta":0.75,
//                           "k":1},
//                          {"type":"flatten"}, {"type":"fully_connected", "out":10},
//                          {"type":"softmax"}]}
//   Optional top-level "description" (free text). Unknown fields are errors (a typo is not a
//   silent default). Layer names default to "<type><index>" (index in "layers") when absent;
//   they name the weight tensors "<layer>.weight" and "<layer>.bias" (PyTorch layouts:
//   conv [O, I, kh, kw], fc [out, in]).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf::model {

enum class LayerKind {
  kConv2d,
  kMaxPool,
  kAvgPool,
  kRelu,
  kLrn,
  kFlatten,
  kFullyConnected,
  kSoftmax
};

const char* to_string(LayerKind kind);  // the spec's "type" string
// The inverse of to_string; an unknown type lists the known ones.
StatusOr<LayerKind> layer_kind_from_string(const std::string& type);

struct Shape {  // one request's activation, channels x height x width (flattened: C x 1 x 1)
  int channels = 0;
  int height = 1;
  int width = 1;
  int64_t elements() const { return int64_t{channels} * height * width; }
  bool operator==(const Shape& o) const {
    return channels == o.channels && height == o.height && width == o.width;
  }
};

struct LayerSpec {
  std::string name;
  LayerKind kind = LayerKind::kRelu;
  // conv2d: out_channels, kernel, stride (default 1), pad (default 0)
  // pooling: kernel, stride (default kernel), pad (default 0, at most kernel/2)
  // Output sizes use PyTorch's floor rule: (in + 2*pad - kernel) / stride + 1. avgpool counts the
  // zero padding in its divisor (kernel*kernel; PyTorch's count_include_pad=True, oneDNN's
  // pooling_avg_include_padding); maxpool ignores padding.
  // fully_connected: out; its input must be flat (an explicit flatten layer before it; no
  // implicit flatten). softmax: flat input, last layer only.
  int out_channels = 0;  // conv2d out_channels, fully_connected out
  int kernel = 0;
  int stride = 1;
  int pad = 0;
  // lrn (across channels, AlexNet's): size (odd), alpha, beta, k;
  //   b_c = a_c * (k + alpha/size * sum_{|c'-c| <= size/2} a_c'^2)^-beta (PyTorch
  //   LocalResponseNorm, oneDNN lrn_across_channels)
  int lrn_size = 5;
  float lrn_alpha = 1e-4f;
  float lrn_beta = 0.75f;
  float lrn_k = 1.0f;
};

struct ModelSpec {
  std::string name;
  std::string description;  // optional free text
  Shape input;
  std::vector<LayerSpec> layers;
};

// Shape inference results for one layer.
struct LayerInfo {
  Shape in;
  Shape out;
  int64_t parameters = 0;    // weights + biases
  int64_t connections = 0;   // multiply-adds per request (conv2d and fully_connected; 0 for others)
  int64_t weight_bytes = 0;  // parameters * sizeof(float)
  // For conv2d / fully_connected: the partitionable dimension (output channels / neurons).
  bool has_weights() const { return parameters > 0; }
};

struct ModelPlan {
  ModelSpec spec;
  std::vector<LayerInfo> layers;  // one per spec.layers entry
  int64_t parameters = 0;
  int64_t connections = 0;
  int64_t weight_bytes = 0;
  Shape output() const { return layers.empty() ? spec.input : layers.back().out; }
};

// Errors name the layer ("layers[3] (conv2): kernel 7 larger than input 5x5").
StatusOr<ModelSpec> model_spec_from_json(const nlohmann::json& doc, const std::string& source);
StatusOr<ModelSpec> load_model_spec(const std::string& path);
StatusOr<ModelPlan> infer_shapes(const ModelSpec& spec);
// load_model_spec + infer_shapes.
StatusOr<ModelPlan> load_model(const std::string& path);

}  // namespace serf::model
