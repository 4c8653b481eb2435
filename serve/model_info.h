#pragma once
// What the front ends say about the served model (KServe v2 model metadata) and check requests
// against: one FP32 input and one output, each of a fixed shape with the batch dimension first.

#include <cstdint>
#include <string>
#include <vector>

namespace serf::serve {

struct TensorInfo {
  std::string name;
  std::string datatype = "FP32";
  std::vector<int64_t> shape;  // -1: any size (an emulated model without a spec)
  // Values the tensor holds; -1 when a dimension is variable.
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0) return -1;
      n *= d;
    }
    return n;
  }
};

struct ModelInfo {
  std::string name;
  std::string version = "1";
  std::string platform = "serf";  // "serf_emulated" for emulated nodes
  TensorInfo input;
  TensorInfo output;
  // Emulated nodes compute nothing: the answer's output tensor is empty (shape [1, 0]).
  bool emulated = false;
};

}  // namespace serf::serve
