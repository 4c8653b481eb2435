#pragma once
// The served model of the front-end unit tests (http_test, tensor_json_test): input "input" of
// shape [1, 2, 2], output "output" of shape [1, 4], both FP32.
#include "serve/model_info.h"

namespace serf::serve::testing {

inline ModelInfo model_2x2() {
  ModelInfo m;
  m.name = "m";
  m.input = {"input", "FP32", {1, 2, 2}};
  m.output = {"output", "FP32", {1, 4}};
  return m;
}

}  // namespace serf::serve::testing
