#pragma once
// Helpers shared by the engine tests: load a shipped model, compare outputs.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/simulated_unit.h"
#include "model/model_spec.h"
#include "model/weights.h"

namespace serf::engine::testing {

inline model::ModelPlan load_shipped(const std::string& name) {
  auto plan = model::load_model(std::string(SERF_SOURCE_DIR) + "/configs/models/" + name + ".json");
  if (!plan.ok()) throw std::runtime_error(plan.status().message());
  return *plan;
}

// max_i |a_i - b_i| / max(|b_i|, floor): relative error with a floor for values near zero.
inline double max_relative_error(const std::vector<float>& a, const std::vector<float>& b,
                                 double floor = 1e-6) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double{a[i]} - double{b[i]});
    worst = std::max(worst, d / std::max(std::abs(double{b[i]}), floor));
  }
  return worst;
}

// A batch of b rows (b x input floats) through a unit of K ranks of T threads of `backend`, run
// twice (the second run reuses every buffer); its output, b x output floats.
inline std::vector<float> run_batch(Backend& backend, const model::ModelPlan& plan,
                                    const model::Weights& w, const std::vector<float>& input,
                                    int ranks, int threads, int batch) {
  auto unit = SimulatedUnit::create(backend, plan, w, ranks, threads, batch);
  INFO(unit.status().message());
  REQUIRE(unit.ok());
  std::vector<float> out(static_cast<size_t>(plan.output().elements() * batch));
  for (int round = 0; round < 2; ++round) {
    const Status s = (*unit)->run(input.data(), out.data(), nullptr);
    INFO(s.message());
    REQUIRE(s.ok());
  }
  return out;
}

// A model with every layer kind (residual add, concat, grouped / depthwise / dilated conv2d,
// batchnorm, clip, sigmoid, global pooling, ceil-mode pooling, flatten, fully_connected, softmax).
inline constexpr const char* kEveryOp =
    R"({"name": "every_op", "input": {"channels": 6, "height": 13, "width": 13},
 "layers": [
  {"name": "c1", "type": "conv2d", "out_channels": 16, "kernel": 3, "pad": 1},
  {"name": "bn1", "type": "batchnorm", "epsilon": 0.001},
  {"name": "r1", "type": "clip", "min": 0, "max": 6},
  {"name": "dw", "type": "conv2d", "out_channels": 16, "kernel": 3, "pad": 1, "groups": 16},
  {"name": "r2", "type": "relu"},
  {"name": "pw", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "sum", "type": "add", "inputs": ["pw", "r1"]},
  {"name": "r3", "type": "relu"},
  {"name": "g", "type": "conv2d", "out_channels": 12, "kernel": 3, "pad": [1, 0, 1, 2],
   "dilation": 2, "groups": 4},
  {"name": "s", "type": "sigmoid"},
  {"name": "g2", "type": "conv2d", "out_channels": 12, "kernel": 3, "inputs": ["r3"]},
  {"name": "r4", "type": "relu"},
  {"name": "mix", "type": "add", "inputs": ["s", "r4"]},
  {"name": "mp", "type": "maxpool", "kernel": 2, "stride": 2, "ceil_mode": true},
  {"name": "ap", "type": "avgpool", "kernel": 3, "stride": 1, "pad": 1, "count_include_pad": false},
  {"name": "ap2", "type": "avgpool", "kernel": 3, "stride": 1, "pad": 1, "inputs": ["mp"]},
  {"name": "cat", "type": "concat", "inputs": ["ap", "ap2"]},
  {"name": "n", "type": "lrn", "size": 3, "alpha": 0.01, "beta": 0.75, "k": 2},
  {"name": "gap", "type": "global_avgpool"},
  {"name": "b2", "type": "conv2d", "out_channels": 8, "kernel": 1, "inputs": ["n"]},
  {"name": "gap2", "type": "global_avgpool"},
  {"name": "cat2", "type": "concat", "inputs": ["gap", "gap2"]},
  {"name": "fl", "type": "flatten"},
  {"name": "bn2", "type": "batchnorm"},
  {"name": "fc", "type": "fully_connected", "out": 10},
  {"name": "fs", "type": "sigmoid"},
  {"name": "fc2", "type": "fully_connected", "out": 5},
  {"name": "prob", "type": "softmax"}]})";

// The blocks of EfficientNet and MobileNetV3: silu and hardswish (fused into conv2d and
// fully_connected), squeeze-and-excitation (mul by a per-channel scale) whose scale is sliced like
// the tensor it scales (se, se2: from a conv2d and from a fully_connected) or not (se3: lrn leaves
// n whole), a standalone hardsigmoid with ONNX's alpha and beta, a mul of equal shapes.
inline constexpr const char* kGates =
    R"({"name": "gates", "input": {"channels": 5, "height": 9, "width": 9},
 "layers": [
  {"name": "c1", "type": "conv2d", "out_channels": 12, "kernel": 3, "pad": 1},
  {"name": "a1", "type": "silu"},
  {"name": "dw", "type": "conv2d", "out_channels": 12, "kernel": 3, "pad": 1, "groups": 12},
  {"name": "a2", "type": "hardswish"},
  {"name": "sq", "type": "global_avgpool"},
  {"name": "e1", "type": "conv2d", "out_channels": 4, "kernel": 1},
  {"name": "e1a", "type": "silu"},
  {"name": "e2", "type": "conv2d", "out_channels": 12, "kernel": 1},
  {"name": "e2a", "type": "sigmoid"},
  {"name": "se", "type": "mul", "inputs": ["a2", "e2a"]},
  {"name": "pw", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "mp", "type": "maxpool", "kernel": 2, "stride": 2, "ceil_mode": true},
  {"name": "hs", "type": "hardsigmoid", "alpha": 0.2, "beta": 0.4},
  {"name": "m2", "type": "mul", "inputs": ["mp", "hs"]},
  {"name": "sq2", "type": "global_avgpool"},
  {"name": "f2", "type": "fully_connected", "out": 16},
  {"name": "f2a", "type": "hardsigmoid"},
  {"name": "se2", "type": "mul", "inputs": ["m2", "f2a"]},
  {"name": "n", "type": "lrn", "size": 3, "alpha": 0.01, "beta": 0.75, "k": 2},
  {"name": "g3", "type": "global_avgpool"},
  {"name": "e3", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "e3a", "type": "silu"},
  {"name": "se3", "type": "mul", "inputs": ["n", "e3a"]},
  {"name": "gap", "type": "global_avgpool"},
  {"name": "fl", "type": "flatten"},
  {"name": "fc", "type": "fully_connected", "out": 10},
  {"name": "hsw", "type": "hardswish"},
  {"name": "fc2", "type": "fully_connected", "out": 6},
  {"name": "prob", "type": "softmax"}]})";

// The layers users' networks add (issue 15): gelu fused into a conv2d and standalone, prelu on
// a conv2d's sliced output, after an upsample and on a fully_connected's (flat), nearest and
// bilinear upsampling by integer scales (2 and 2 x 3), reflect and edge pads, conv_transpose2d
// with output padding and a fused relu, and grouped with a dilation and uneven strides and pads
// (4 groups: replicated for K > 4).
inline constexpr const char* kUserOps =
    R"({"name": "user_ops", "input": {"channels": 6, "height": 5, "width": 5},
 "layers": [
  {"name": "c1", "type": "conv2d", "out_channels": 16, "kernel": 3, "pad": 1},
  {"name": "g1", "type": "gelu"},
  {"name": "p1", "type": "prelu"},
  {"name": "up", "type": "upsample", "scale": 2},
  {"name": "c2", "type": "conv2d", "out_channels": 12, "kernel": 3, "stride": 2, "pad": 1},
  {"name": "ub", "type": "upsample", "scale": [2, 3], "mode": "bilinear"},
  {"name": "p2", "type": "prelu"},
  {"name": "g2", "type": "gelu"},
  {"name": "rp", "type": "pad", "pad": [1, 2, 2, 1]},
  {"name": "ep", "type": "pad", "pad": [0, 1], "mode": "edge"},
  {"name": "t1", "type": "conv_transpose2d", "out_channels": 8, "kernel": 3, "stride": 2,
   "pad": 1, "output_padding": 1},
  {"name": "t1r", "type": "relu"},
  {"name": "t2", "type": "conv_transpose2d", "out_channels": 8, "kernel": [2, 3],
   "stride": [2, 1], "pad": [0, 1], "dilation": [1, 2], "groups": 4},
  {"name": "gap", "type": "global_avgpool"},
  {"name": "fl", "type": "flatten"},
  {"name": "fc", "type": "fully_connected", "out": 8},
  {"name": "pf", "type": "prelu"},
  {"name": "fc2", "type": "fully_connected", "out": 4}]})";

// ShuffleNetV2's units: a stride-2 unit (two branches, concat, channel_shuffle), a stride-1 unit
// (the shuffled tensor split by two slices, one through a branch, concat, shuffle), uneven slices
// and shuffles of 4 and 8 groups.
inline constexpr const char* kShuffle =
    R"({"name": "shuffle", "input": {"channels": 3, "height": 10, "width": 10},
 "layers": [
  {"name": "c1", "type": "conv2d", "out_channels": 32, "kernel": 3, "pad": 1},
  {"name": "r1", "type": "relu"},
  {"name": "d1", "type": "conv2d", "out_channels": 32, "kernel": 3, "stride": 2, "pad": 1,
   "groups": 32},
  {"name": "p1", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "p1r", "type": "relu"},
  {"name": "q1", "type": "conv2d", "out_channels": 16, "kernel": 1, "inputs": ["r1"]},
  {"name": "q1r", "type": "relu"},
  {"name": "q2", "type": "conv2d", "out_channels": 16, "kernel": 3, "stride": 2, "pad": 1,
   "groups": 16},
  {"name": "q3", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "q3r", "type": "relu"},
  {"name": "cat1", "type": "concat", "inputs": ["p1r", "q3r"]},
  {"name": "sh1", "type": "channel_shuffle", "groups": 2},
  {"name": "lo", "type": "slice", "begin": 0, "end": 16, "inputs": ["sh1"]},
  {"name": "hi", "type": "slice", "begin": 16, "end": 32, "inputs": ["sh1"]},
  {"name": "h1", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "h1r", "type": "relu"},
  {"name": "h2", "type": "conv2d", "out_channels": 16, "kernel": 3, "pad": 1, "groups": 16},
  {"name": "h3", "type": "conv2d", "out_channels": 16, "kernel": 1},
  {"name": "h3r", "type": "relu"},
  {"name": "cat2", "type": "concat", "inputs": ["lo", "h3r"]},
  {"name": "sh2", "type": "channel_shuffle", "groups": 4},
  {"name": "a", "type": "slice", "begin": 0, "end": 10},
  {"name": "b", "type": "slice", "begin": 10, "end": 32, "inputs": ["sh2"]},
  {"name": "e", "type": "conv2d", "out_channels": 22, "kernel": 3, "pad": 1},
  {"name": "cat3", "type": "concat", "inputs": ["e", "a"]},
  {"name": "sh3", "type": "channel_shuffle", "groups": 8},
  {"name": "gap", "type": "global_avgpool"},
  {"name": "fl", "type": "flatten"},
  {"name": "fc", "type": "fully_connected", "out": 10}]})";

inline model::ModelPlan plan_from(const std::string& text) {
  auto spec = model::model_spec_from_json(nlohmann::json::parse(text), "test");
  INFO(spec.status().message());
  REQUIRE(spec.ok());
  auto plan = model::infer_shapes(*spec);
  INFO(plan.status().message());
  REQUIRE(plan.ok());
  return *plan;
}

}  // namespace serf::engine::testing
