#pragma once
// Model weights: one float32 tensor per weighted layer parameter, named "<layer>.weight" and
// "<layer>.bias" (PyTorch layouts: conv weight [O, I, kh, kw], fc weight [out, in], bias [O]).
// Deterministic seeded initialisation and safetensors (F32) load/save with names and shapes checked.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model_spec.h"

namespace serf::model {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
  int64_t elements() const;
};

class Weights {
 public:
  // Deterministic in (plan, seed), independent of the thread count; He-style scaling so that
  // activations neither vanish nor explode through deep stacks.
  static Weights seeded(const ModelPlan& plan, uint64_t seed);
  // Checks that every tensor the plan needs is present with the right shape (names the tensor).
  static StatusOr<Weights> load_safetensors(const std::string& path, const ModelPlan& plan);
  Status save_safetensors(const std::string& path) const;

  // nullptr when absent.
  const Tensor* find(const std::string& name) const;
  Tensor& at(const std::string& name) { return tensors_.at(name); }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  void set(const std::string& name, Tensor t) { tensors_[name] = std::move(t); }

 private:
  std::map<std::string, Tensor> tensors_;
};

// A seeded input image for a request (values in [-1, 1)), deterministic in (shape, seed).
std::vector<float> seeded_input(const Shape& shape, uint64_t seed);

}  // namespace serf::model
