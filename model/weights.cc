// Seeded weights (counter-based, parallel) and the plan-checked safetensors load/save.
#include "model/weights.h"

#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "model/safetensors.h"

namespace serf::model {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t splitmix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

// out[i] = scale * u_i for i in [begin, end), u_i uniform in [-1, 1) from (key, i) alone. u_i has
// 24 random bits, so it is exact in float and `* scale` is the one rounding: every instruction set
// below gives bit-identical values (ranks on different CPUs agree on seeded weights).
inline void fill_range(uint64_t key, float scale, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t bits = splitmix64(key + static_cast<uint64_t>(i) * kGolden);
    const int32_t m = static_cast<int32_t>(bits >> 40) - (1 << 23);
    out[i] = static_cast<float>(m) * (1.0f / (1 << 23)) * scale;
  }
}

// The build targets baseline x86-64, which cannot vectorise 64-bit multiplies; AVX-512DQ can
// (vpmullq), about 5x faster here (bench_model_init). Chosen at run time.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx512f,avx512dq"))) void fill_range_avx512(uint64_t key, float scale,
                                                                   float* out, int64_t begin,
                                                                   int64_t end) {
  fill_range(key, scale, out, begin, end);
}
__attribute__((target("avx2"))) void fill_range_avx2(uint64_t key, float scale, float* out,
                                                     int64_t begin, int64_t end) {
  fill_range(key, scale, out, begin, end);
}
using FillFn = void (*)(uint64_t, float, float*, int64_t, int64_t);
FillFn best_fill_range() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
    return fill_range_avx512;
  }
  if (__builtin_cpu_supports("avx2")) return fill_range_avx2;
  return fill_range;
}
#else
void (*best_fill_range())(uint64_t, float, float*, int64_t, int64_t) { return fill_range; }
#endif

// Fills a whole tensor: each thread takes one contiguous block (the values depend on i alone, so
// the thread count does not change them).
void fill_uniform(uint64_t key, float scale, float* out, int64_t n) {
  static const auto fill = best_fill_range();
  if (n <= 65536) {  // a parallel region costs more than a small tensor
    fill(key, scale, out, 0, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t id = omp_get_thread_num();
    fill(key, scale, out, n * id / threads, n * (id + 1) / threads);
  }
}

uint64_t stream_key(uint64_t seed, const std::string& stream) {
  return splitmix64(splitmix64(seed) ^ fnv1a64(stream));
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string weight_name(const LayerSpec& layer) { return layer.name + ".weight"; }
std::string bias_name(const LayerSpec& layer) { return layer.name + ".bias"; }

std::vector<TensorSpec> expected_tensors(const ModelPlan& plan) {
  std::vector<TensorSpec> out;
  for (size_t i = 0; i < plan.layers.size() && i < plan.spec.layers.size(); ++i) {
    const LayerSpec& l = plan.spec.layers[i];
    const LayerInfo& info = plan.layers[i];
    const int64_t o = info.out.channels;
    if (l.kind == LayerKind::kConv2d) {
      const int64_t in = info.in.channels;
      out.push_back({weight_name(l), {o, in, l.kernel, l.kernel}, in * l.kernel * l.kernel, i});
      out.push_back({bias_name(l), {o}, in * l.kernel * l.kernel, i});
    } else if (l.kind == LayerKind::kFullyConnected) {
      const int64_t in = info.in.elements();
      out.push_back({weight_name(l), {o, in}, in, i});
      out.push_back({bias_name(l), {o}, in, i});
    }
  }
  return out;
}

Weights Weights::seeded(const ModelPlan& plan, uint64_t seed) {
  Weights w;
  for (const TensorSpec& spec : expected_tensors(plan)) {
    Tensor t;
    t.shape = spec.shape;
    t.data.resize(static_cast<size_t>(t.elements()));
    const bool is_bias = spec.shape.size() == 1;
    const float scale =
        is_bias ? 0.1f : static_cast<float>(std::sqrt(6.0 / static_cast<double>(spec.fan_in)));
    fill_uniform(stream_key(seed, spec.name), scale, t.data.data(), t.elements());
    w.tensors_.emplace(spec.name, std::move(t));
  }
  return w;
}

std::vector<float> seeded_input(const Shape& shape, uint64_t seed) {
  std::vector<float> data(static_cast<size_t>(shape.elements()));
  // "input" is no tensor name a plan can produce (layer names may not be "input").
  fill_uniform(stream_key(seed, kInputTensorName), 1.0f, data.data(), shape.elements());
  return data;
}

const Tensor* Weights::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

int64_t Weights::bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.elements() * static_cast<int64_t>(sizeof(float));
  return n;
}

StatusOr<Weights> Weights::load_safetensors(const std::string& path, const ModelPlan& plan) {
  const std::vector<TensorSpec> expected = expected_tensors(plan);
  auto check = [&](const TensorShapes& shapes) -> Status {
    for (const TensorSpec& spec : expected) {
      auto it = shapes.find(spec.name);
      if (it == shapes.end()) {
        return NotFound(path + ": missing tensor '" + spec.name + "' (shape " +
                        shape_str(spec.shape) + ") needed by model " + plan.spec.name);
      }
      if (it->second != spec.shape) {
        return InvalidArgument(path + ": tensor '" + spec.name + "' has shape " +
                               shape_str(it->second) + " but model " + plan.spec.name + " needs " +
                               shape_str(spec.shape));
      }
    }
    for (const auto& [name, shape] : shapes) {
      bool known = false;
      for (const TensorSpec& spec : expected) known = known || spec.name == name;
      if (!known) {
        return InvalidArgument(path + ": unexpected tensor '" + name + "': model " +
                               plan.spec.name +
                               " has no such parameter (weights of another model?)");
      }
    }
    return Status::Ok();
  };
  SERF_ASSIGN_OR_RETURN(auto tensors, read_safetensors(path, check));
  Weights w;
  w.tensors_ = std::move(tensors);
  return w;
}

Status Weights::save_safetensors(const std::string& path) const {
  return write_safetensors(path, tensors_, {{"format", "pt"}, {"producer", "serf"}});
}

Status save_input_safetensors(const std::string& path, const Shape& shape,
                              const std::vector<float>& data) {
  if (static_cast<int64_t>(data.size()) != shape.elements()) {
    return Internal("input data size does not match its shape");
  }
  std::map<std::string, Tensor> tensors;
  tensors[kInputTensorName] = Tensor{{1, shape.channels, shape.height, shape.width}, data};
  return write_safetensors(path, tensors, {{"producer", "serf"}});
}

StatusOr<std::vector<float>> load_input_safetensors(const std::string& path, const Shape& shape) {
  const std::vector<int64_t> want = {1, shape.channels, shape.height, shape.width};
  auto check = [&](const TensorShapes& shapes) -> Status {
    auto it = shapes.find(kInputTensorName);
    if (it == shapes.end()) {
      return NotFound(path + ": missing tensor '" + std::string(kInputTensorName) + "' (shape " +
                      shape_str(want) + ")");
    }
    if (it->second != want) {
      return InvalidArgument(path + ": tensor 'input' has shape " + shape_str(it->second) +
                             " but the model needs " + shape_str(want));
    }
    return Status::Ok();
  };
  SERF_ASSIGN_OR_RETURN(auto tensors, read_safetensors(path, check));
  return std::move(tensors.at(kInputTensorName).data);
}

Status check_weights_fit_memory(const ModelPlan& plan, int copies) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return Status::Ok();  // unknown: let the allocation decide
  const double memory = static_cast<double>(pages) * static_cast<double>(page);
  const double need = static_cast<double>(plan.parameters) * sizeof(float) * copies;
  if (need <= memory) return Status::Ok();
  char text[256];
  std::snprintf(text, sizeof(text),
                "model %s: %lld parameters (%.1f GiB of float32) need %.1f GiB in memory (%d "
                "copies), more than this machine's %.1f GiB",
                plan.spec.name.c_str(), static_cast<long long>(plan.parameters),
                plan.parameters * 4.0 / (1 << 30), need / (1 << 30), copies, memory / (1 << 30));
  return InvalidArgument(text);
}

}  // namespace serf::model
