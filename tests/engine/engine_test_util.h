#pragma once
// Helpers shared by the engine tests: load a shipped model, compare outputs.

#include <algorithm>
#include <cmath>
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

}  // namespace serf::engine::testing
