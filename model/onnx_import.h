#pragma once
// ONNX import (`serf model import`): reads an ONNX model with Debian's libonnx (C++ protobuf
// classes) and translates it into a model spec (model_spec.h) and its weights.
//
// Operators: Conv (strides, pads, auto_pad, dilations, group), BatchNormalization (folded into
// the Conv / Gemm / MatMul before it when that layer's output is read by the batchnorm alone;
// otherwise a batchnorm layer), Relu, Clip (bounded either side or both), Sigmoid,
// HardSigmoid, HardSwish, LeakyRelu, Tanh, Elu, Mul (equal shapes, a per-channel [N, C, 1, 1]
// scale, x * Sigmoid(x) fused into silu and x * HardSigmoid(x) into hardswish, a constant factor
// folded into the layer before), MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul (+ Add of
// a constant: the bias), Add, Concat, Flatten, Reshape of the flatten kind, Squeeze / Unsqueeze
// between [N, C, 1, 1] and [N, C], Softmax and LogSoftmax (last), LRN, Dropout and Identity
// (dropped). Initializers become weights; subgraphs of constants (Shape of a known shape, Gather,
// Unsqueeze, Concat, ..., which exporters emit to compute a Reshape's target) are folded. The batch
// dimension may be symbolic; every other dimension must be fixed.
//
// Anything else (control flow, If / Loop / Scan, before any other node) is an error of one line
// naming the operator, the node (by its output when unnamed) and what is unsupported,
// or what is wrong with the file (not ONNX, truncated, an opset newer than kMaxOpset, a cycle, a
// dangling input, a weight whose shape disagrees with its input, a type other than float32).

#include <string>
#include <vector>

#include "model/model_spec.h"
#include "model/weights.h"

namespace serf::model {

// The newest default-domain opset the importer knows (ONNX 1.12's).
inline constexpr int kMaxOnnxOpset = 17;

struct OnnxImport {
  ModelSpec spec;             // checked: infer_shapes(spec) succeeds
  Weights weights;            // exactly expected_tensors(plan)
  int nodes = 0;              // ONNX nodes read
  int folded_batchnorms = 0;  // BatchNormalization nodes folded into the layer before
  int folded_constants = 0;   // nodes evaluated at import (constant subgraphs)
  int dropped = 0;            // Identity, Dropout, zero Pad and view-only nodes
  int folded_pads = 0;        // Pad nodes folded into the padding of the Conv/AveragePool after
  int fused_gates = 0;        // Sigmoid (HardSigmoid) + Mul into silu (hardswish); GELU's subgraph
};

// `name`: the model's name (empty: the ONNX graph's name, else the file name without extension).
StatusOr<OnnxImport> import_onnx(const std::string& path, const std::string& name);

}  // namespace serf::model
