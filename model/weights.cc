// Seeded weights (counter-based, parallel) and the plan-checked safetensors load/save.
#include "model/weights.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
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

}  // namespace

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

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
    auto he = [](int64_t fan_in) { return static_cast<float>(std::sqrt(6.0 / fan_in)); };
    if (l.kind == LayerKind::kConv2d) {
      const int64_t per_group = info.in.channels / l.groups;
      const int64_t fan_in = per_group * l.window.kernel_h * l.window.kernel_w;
      out.push_back({weight_name(l),
                     {o, per_group, l.window.kernel_h, l.window.kernel_w},
                     fan_in,
                     i,
                     0.0f,
                     he(fan_in)});
      out.push_back({bias_name(l), {o}, fan_in, i, 0.0f, 0.1f});
    } else if (l.kind == LayerKind::kConvTranspose2d) {  // PyTorch's [I, O/groups, kh, kw]
      const int64_t per_group = o / l.groups;
      const int64_t fan_in = per_group * l.window.kernel_h * l.window.kernel_w;
      out.push_back({weight_name(l),
                     {int64_t{info.in.channels}, per_group, l.window.kernel_h, l.window.kernel_w},
                     fan_in,
                     i,
                     0.0f,
                     he(fan_in)});
      out.push_back({bias_name(l), {o}, fan_in, i, 0.0f, 0.1f});
    } else if (l.kind == LayerKind::kFullyConnected) {
      const int64_t in = info.in.elements();
      out.push_back({weight_name(l), {o, in}, in, i, 0.0f, he(in)});
      out.push_back({bias_name(l), {o}, in, i, 0.0f, 0.1f});
    } else if (l.kind == LayerKind::kBatchNorm) {
      const int64_t c = info.in.channels;
      out.push_back({weight_name(l), {c}, 1, i, 1.0f, 0.5f});
      out.push_back({bias_name(l), {c}, 1, i, 0.0f, 0.1f});
      out.push_back({l.name + ".running_mean", {c}, 1, i, 0.0f, 0.1f});
      out.push_back({l.name + ".running_var", {c}, 1, i, 1.0f, 0.5f});
    } else if (l.kind == LayerKind::kLayerNorm) {  // around PyTorch's initial 1 and 0
      const int64_t f = info.in.channels;
      out.push_back({weight_name(l), {f}, 1, i, 1.0f, 0.5f});
      out.push_back({bias_name(l), {f}, 1, i, 0.0f, 0.1f});
    } else if (l.kind == LayerKind::kPrelu) {  // slopes around PyTorch's initial 0.25
      out.push_back({weight_name(l), {int64_t{info.in.channels}}, 1, i, 0.25f, 0.1f});
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
    fill_uniform(stream_key(seed, spec.name), spec.half_width, t.data.data(), t.elements());
    if (spec.center != 0.0f) {
      for (float& v : t.data) v += spec.center;
    }
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

std::vector<float> seeded_inputs(const Shape& shape, uint64_t seed, int rows) {
  std::vector<float> data;
  data.reserve(static_cast<size_t>(shape.elements()) * static_cast<size_t>(std::max(rows, 0)));
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> row = seeded_input(shape, seed + static_cast<uint64_t>(r));
    data.insert(data.end(), row.begin(), row.end());
  }
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
                        dims_str(spec.shape) + ") needed by model " + plan.spec.name);
      }
      if (it->second != spec.shape) {
        return InvalidArgument(path + ": tensor '" + spec.name + "' has shape " +
                               dims_str(it->second) + " but model " + plan.spec.name + " needs " +
                               dims_str(spec.shape));
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
  for (const auto& [name, t] : tensors) {
    SERF_RETURN_IF_ERROR(check_finite(t.data, path + ": tensor '" + name + "'"));
  }
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

StatusOr<std::vector<float>> load_input_safetensors(const std::string& path, const Shape& shape,
                                                    int64_t rows) {
  const std::vector<int64_t> want = {rows, shape.channels, shape.height, shape.width};
  auto check = [&](const TensorShapes& shapes) -> Status {
    auto it = shapes.find(kInputTensorName);
    if (it == shapes.end()) {
      return NotFound(path + ": missing tensor '" + std::string(kInputTensorName) + "' (shape " +
                      dims_str(want) + ")");
    }
    if (it->second != want) {
      return InvalidArgument(path + ": tensor 'input' has shape " + dims_str(it->second) +
                             " but the model needs " + dims_str(want));
    }
    return Status::Ok();
  };
  SERF_ASSIGN_OR_RETURN(auto tensors, read_safetensors(path, check));
  SERF_RETURN_IF_ERROR(check_finite(tensors.at(kInputTensorName).data,
                                    path + ": tensor '" + std::string(kInputTensorName) + "'"));
  return std::move(tensors.at(kInputTensorName).data);
}

Status check_finite(const std::vector<float>& data, const std::string& what) {
  for (size_t i = 0; i < data.size(); ++i) {
    if (!std::isfinite(data[i])) {
      return InvalidArgument(what + " holds " + (std::isnan(data[i]) ? "NaN" : "an infinity") +
                             " at index " + std::to_string(i) +
                             " (weights and inputs must be finite numbers)");
    }
  }
  return Status::Ok();
}

namespace {

// Bytes the process may still map under RLIMIT_AS (`ulimit -v`); -1 when unlimited or unknown.
double address_space_left() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1.0;
  double used = 0.0;  // the process's current virtual size (/proc/self/statm: pages)
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long pages = 0;
    if (std::fscanf(f, "%lu", &pages) == 1)
      used = static_cast<double>(pages) * sysconf(_SC_PAGE_SIZE);
    std::fclose(f);
  }
  return std::max(0.0, static_cast<double>(limit.rlim_cur) - used);
}

}  // namespace

Status check_weights_fit_memory(const ModelPlan& plan, int copies) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const double need = static_cast<double>(plan.parameters) * sizeof(float) * copies;
  char text[320];
  const double left = address_space_left();
  if (left >= 0.0 && need > left) {
    std::snprintf(text, sizeof(text),
                  "model %s: %lld parameters need %.2f GiB (%d copies of %.2f GiB of float32), "
                  "more than the %.2f GiB this process may still map under its address-space "
                  "limit (ulimit -v); raise the limit or use a smaller model",
                  plan.spec.name.c_str(), static_cast<long long>(plan.parameters), need / (1 << 30),
                  copies, plan.parameters * 4.0 / (1 << 30), left / (1 << 30));
    return InvalidArgument(text);
  }
  if (pages <= 0 || page <= 0) return Status::Ok();  // unknown: let the allocation decide
  const double memory = static_cast<double>(pages) * static_cast<double>(page);
  if (need <= memory) return Status::Ok();
  std::snprintf(text, sizeof(text),
                "model %s: %lld parameters (%.1f GiB of float32) need %.1f GiB in memory (%d "
                "copies), more than this machine's %.1f GiB",
                plan.spec.name.c_str(), static_cast<long long>(plan.parameters),
                plan.parameters * 4.0 / (1 << 30), need / (1 << 30), copies, memory / (1 << 30));
  return InvalidArgument(text);
}

}  // namespace serf::model
