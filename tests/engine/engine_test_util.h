#pragma once
// Helpers shared by the engine tests: load a shipped model, compare outputs.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_spec.h"

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
