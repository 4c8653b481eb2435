#pragma once
// Model weights: one float32 tensor per weighted layer parameter, named "<layer>.weight" and
// "<layer>.bias" (PyTorch layouts: conv weight [O, I/groups, kh, kw], fc weight [out, in], bias
// [O]; batchnorm also "<layer>.running_mean" and "<layer>.running_var", each [C]).
// Deterministic seeded initialisation and safetensors (F32) load/save with names and shapes
// checked.
//
// Seeded values: element i of tensor "name" is a function of (seed, name, i) only (splitmix64 of a
// counter), so the result is the same for any thread count and a layer's weights do not depend
// on the other layers. Weights are uniform in [-a, a) with a = sqrt(6 / fan_in) (He: variance
// 2 / fan_in), biases uniform in [-0.1, 0.1); batchnorm weight and running_var uniform in
// [0.5, 1.5), running_mean in [-0.1, 0.1).

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

// InvalidArgument unless `copies` copies of the plan's weights fit in this machine's physical
// memory and in what the process's address-space limit (RLIMIT_AS, `ulimit -v`) leaves (the
// engine holds two: the weights and its own copy in the kernels' layout). Without it a typo in a
// layer size makes the process swap, hang allocating or die of std::bad_alloc.
Status check_weights_fit_memory(const ModelPlan& plan, int copies);

class Weights {
 public:
  // Deterministic in (plan, seed), independent of the thread count; He-style scaling so that
  // activations neither vanish nor explode through deep stacks.
  static Weights seeded(const ModelPlan& plan, uint64_t seed);
  // Checks that every tensor the plan needs is present with the right shape, and that every
  // value is finite (names the tensor and the index).
  static StatusOr<Weights> load_safetensors(const std::string& path, const ModelPlan& plan);
  Status save_safetensors(const std::string& path) const;

  // Total bytes of tensor data (sum of elements * 4).
  int64_t bytes() const;

  // nullptr when absent.
  const Tensor* find(const std::string& name) const;
  Tensor& at(const std::string& name) { return tensors_.at(name); }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  void set(const std::string& name, Tensor t) { tensors_[name] = std::move(t); }

 private:
  std::map<std::string, Tensor> tensors_;
};

// A seeded input image for a request (values in [-1, 1)), deterministic in (shape, seed).
// Its stream differs from every weight tensor's, so one --seed seeds both: `serf model init --seed
// S` writes Weights::seeded(plan, S) and seeded_input(plan.spec.input, S), and `serf infer --seed
// S` must use the same two calls so that its output matches scripts/torch_reference.py on those
// files.
std::vector<float> seeded_input(const Shape& shape, uint64_t seed);
// `rows` of them one after another, row r seeded_input(shape, seed + r): a batch's input
// (`serf infer --batch b`, alone or over MPI nodes).
std::vector<float> seeded_inputs(const Shape& shape, uint64_t seed, int rows);

// The tensors a plan needs, in layer order (conv2d and fully_connected layers: weight then bias;
// batchnorm: weight, bias, running_mean, running_var; prelu: weight, the slopes [C]).
struct TensorSpec {
  std::string name;            // "<layer>.weight", "<layer>.bias", ...
  std::vector<int64_t> shape;  // conv [O, I/groups, kh, kw], conv_transpose2d [I, O/groups, kh,
                               // kw], fc [out, in], bias [O]
  int64_t fan_in = 0;  // inputs per output (I/groups*kh*kw or in): the He scale's denominator
  size_t layer = 0;    // index into plan.layers
  // Seeded values are uniform in [center - half_width, center + half_width).
  float center = 0.0f;
  float half_width = 0.0f;
};
std::vector<TensorSpec> expected_tensors(const ModelPlan& plan);
// A tensor's dims as errors show them: "[1, 3, 224, 224]".
std::string dims_str(const std::vector<int64_t>& dims);
std::string weight_name(const LayerSpec& layer);  // "<layer>.weight"
std::string bias_name(const LayerSpec& layer);    // "<layer>.bias"

// A request's input in a safetensors file: one F32 tensor "input" of shape [1, C, H, W], the
// contract between `serf model init --input-out`, `serf infer` and scripts/torch_reference.py.
inline constexpr const char* kInputTensorName = "input";
Status save_input_safetensors(const std::string& path, const Shape& shape,
                              const std::vector<float>& data);
// Checks the name, dtype and shape [1, C, H, W] against `shape`, and that every value is finite.
// `rows` > 1: a batch, tensor 'input' [rows, C, H, W] (row r is request r).
StatusOr<std::vector<float>> load_input_safetensors(const std::string& path, const Shape& shape,
                                                    int64_t rows = 1);

// InvalidArgument naming `what` (e.g. "PATH: tensor 'conv1.weight'") and the first index holding
// NaN or an infinity.
Status check_finite(const std::vector<float>& data, const std::string& what);

}  // namespace serf::model
