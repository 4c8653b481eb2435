// Seeded weights (determinism, thread independence, scale) and safetensors round trip and failures.
#include "model/weights.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/safetensors.h"

using namespace serf::model;
namespace fs = std::filesystem;

namespace {

ModelPlan load(const std::string& name) {
  auto plan = load_model(std::string(SERF_SOURCE_DIR) + "/configs/models/" + name + ".json");
  REQUIRE(plan.ok());
  return std::move(plan).value();
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("serf_weights_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A hand-made safetensors file with the given header JSON and `data_bytes` zero bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + std::string(data_bytes, '\0');
  write_bytes(path, bytes);
}

bool same(const Weights& a, const Weights& b) {
  if (a.tensors().size() != b.tensors().size()) return false;
  for (const auto& [name, t] : a.tensors()) {
    const Tensor* u = b.find(name);
    if (u == nullptr || u->shape != t.shape || u->data != t.data) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("expected tensors follow PyTorch layouts", "[model]") {
  const ModelPlan tiny = load("tiny");
  const auto specs = expected_tensors(tiny);
  REQUIRE(specs.size() == 8);
  CHECK(specs[0].name == "conv1.weight");
  CHECK(specs[0].shape == std::vector<int64_t>{8, 3, 3, 3});
  CHECK(specs[0].fan_in == 27);
  CHECK(specs[1].name == "conv1.bias");
  CHECK(specs[1].shape == std::vector<int64_t>{8});
  CHECK(specs[2].shape == std::vector<int64_t>{12, 8, 3, 3});
  CHECK(specs[4].name == "fc1.weight");
  CHECK(specs[4].shape == std::vector<int64_t>{16, 48});
  CHECK(specs[6].shape == std::vector<int64_t>{10, 16});
  CHECK(specs[7].layer == 10);
  int64_t total = 0;
  for (const auto& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    total += n;
  }
  CHECK(total == tiny.parameters);
}

TEST_CASE("seeded weights are deterministic and independent of threads", "[model]") {
  const ModelPlan plan = load("cifar10");
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(1);
  const Weights one = Weights::seeded(plan, 7);
  omp_set_num_threads(3);
  const Weights three = Weights::seeded(plan, 7);
  omp_set_num_threads(threads_before);
  const Weights again = Weights::seeded(plan, 7);
  CHECK(same(one, three));
  CHECK(same(one, again));
  CHECK(one.bytes() == plan.weight_bytes);
  const Weights other = Weights::seeded(plan, 8);
  CHECK_FALSE(same(one, other));
  // Tensors of one seed are different streams, not copies.
  CHECK(one.find("conv2.bias")->data !=
        std::vector<float>(one.find("fc1.bias")->data.begin(),
                           one.find("fc1.bias")->data.begin() + 64));
}

TEST_CASE("seeded weights have He scale", "[model]") {
  const ModelPlan plan = load("cifar10");
  const Weights w = Weights::seeded(plan, 1);
  const Tensor& fc1 = *w.find("fc1.weight");  // 602,112 values, fan_in 3136
  const double a = std::sqrt(6.0 / 3136);
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (float v : fc1.data) {
    sum += v;
    sum_sq += double{v} * v;
    max_abs = std::max(max_abs, std::fabs(double{v}));
  }
  const double n = static_cast<double>(fc1.data.size());
  CHECK(std::fabs(sum / n) < 0.01 * a);
  CHECK(sum_sq / n == Approx(2.0 / 3136).epsilon(0.01));  // He: variance 2 / fan_in
  CHECK(max_abs <= a);
  CHECK(max_abs > 0.99 * a);
  for (float v : w.find("fc1.bias")->data) CHECK(std::fabs(v) <= 0.1f);
}

TEST_CASE("seeded input", "[model]") {
  const Shape shape{3, 32, 32};
  const auto x = seeded_input(shape, 5);
  REQUIRE(x.size() == 3072u);
  CHECK(x == seeded_input(shape, 5));
  CHECK(x != seeded_input(shape, 6));
  double sum_sq = 0;
  for (float v : x) {
    CHECK(v >= -1.0f);
    CHECK(v < 1.0f);
    sum_sq += double{v} * v;
  }
  CHECK(sum_sq / 3072 == Approx(1.0 / 3).epsilon(0.05));
}

TEST_CASE("safetensors round trip", "[model]") {
  TempDir dir;
  const ModelPlan plan = load("tiny");
  const Weights w = Weights::seeded(plan, 3);
  REQUIRE(w.save_safetensors(dir.file("w.safetensors")).ok());
  const std::string bytes = read_bytes(dir.file("w.safetensors"));
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<uint8_t>(bytes[i]);
  CHECK((8 + header) % 8 == 0);  // data 8-byte aligned
  CHECK(bytes.size() == 8 + header + static_cast<uint64_t>(plan.weight_bytes));
  CHECK(bytes.find("\"__metadata__\"") != std::string::npos);

  auto loaded = Weights::load_safetensors(dir.file("w.safetensors"), plan);
  REQUIRE(loaded.ok());
  CHECK(same(w, *loaded));

  const auto x = seeded_input(plan.spec.input, 3);
  REQUIRE(save_input_safetensors(dir.file("x.safetensors"), plan.spec.input, x).ok());
  auto x2 = load_input_safetensors(dir.file("x.safetensors"), plan.spec.input);
  REQUIRE(x2.ok());
  CHECK(*x2 == x);
  auto wrong = load_input_safetensors(dir.file("x.safetensors"), Shape{3, 32, 32});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message() == dir.file("x.safetensors") +
                                        ": tensor 'input' has shape [1, 3, 12, 12] but the model "
                                        "needs [1, 3, 32, 32]");
  auto no_input = load_input_safetensors(dir.file("w.safetensors"), plan.spec.input);
  REQUIRE_FALSE(no_input.ok());
  CHECK(no_input.status().message().find("missing tensor 'input'") != std::string::npos);
}

TEST_CASE("safetensors failures name the tensor", "[model]") {
  TempDir dir;
  const ModelPlan plan = load("tiny");
  Weights w = Weights::seeded(plan, 3);

  SECTION("missing tensor") {
    std::map<std::string, Tensor> t = w.tensors();
    t.erase("fc1.bias");
    REQUIRE(write_safetensors(dir.file("m.safetensors"), t).ok());
    auto r = Weights::load_safetensors(dir.file("m.safetensors"), plan);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == serf::StatusCode::kNotFound);
    CHECK(r.status().message() ==
          dir.file("m.safetensors") +
              ": missing tensor 'fc1.bias' (shape [16]) needed by model tiny");
  }
  SECTION("wrong shape") {
    std::map<std::string, Tensor> t = w.tensors();
    t["conv2.weight"] = Tensor{{12, 8, 3, 2}, std::vector<float>(size_t{12} * 8 * 6)};
    REQUIRE(write_safetensors(dir.file("s.safetensors"), t).ok());
    auto r = Weights::load_safetensors(dir.file("s.safetensors"), plan);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == dir.file("s.safetensors") +
                                      ": tensor 'conv2.weight' has shape [12, 8, 3, 2] but model "
                                      "tiny needs [12, 8, 3, 3]");
  }
  SECTION("unexpected tensor") {
    std::map<std::string, Tensor> t = w.tensors();
    t["fc3.weight"] = Tensor{{2}, {1.0f, 2.0f}};
    REQUIRE(write_safetensors(dir.file("u.safetensors"), t).ok());
    auto r = Weights::load_safetensors(dir.file("u.safetensors"), plan);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("unexpected tensor 'fc3.weight'") != std::string::npos);
  }
  SECTION("truncated file") {
    REQUIRE(w.save_safetensors(dir.file("t.safetensors")).ok());
    std::string bytes = read_bytes(dir.file("t.safetensors"));
    write_bytes(dir.file("t.safetensors"), bytes.substr(0, bytes.size() - 100));
    auto r = Weights::load_safetensors(dir.file("t.safetensors"), plan);
    REQUIRE_FALSE(r.ok());
    // Data is in name order, so the last tensor (prob has none; fc2.weight) is cut.
    CHECK(r.status().message().find(": tensor 'fc2.weight': data_offsets end") !=
          std::string::npos);
    CHECK(r.status().message().find("(truncated file?)") != std::string::npos);
    write_bytes(dir.file("t.safetensors"), bytes.substr(0, 5));
    auto r2 = Weights::load_safetensors(dir.file("t.safetensors"), plan);
    REQUIRE_FALSE(r2.ok());
    CHECK(r2.status().message().find("truncated safetensors file") != std::string::npos);
    write_bytes(dir.file("t.safetensors"), bytes.substr(0, 40));
    auto r3 = Weights::load_safetensors(dir.file("t.safetensors"), plan);
    REQUIRE_FALSE(r3.ok());
    CHECK(r3.status().message().find("exceeds the file") != std::string::npos);
  }
  SECTION("wrong dtype, bad offsets, bad header") {
    write_raw(dir.file("d.safetensors"),
              R"({"conv1.bias":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}})", 16);
    auto r = read_safetensors(dir.file("d.safetensors"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() ==
          dir.file("d.safetensors") +
              ": tensor 'conv1.bias': dtype F16 is not supported (only F32)");
    write_raw(dir.file("o.safetensors"),
              R"({"conv1.bias":{"dtype":"F32","shape":[8],"data_offsets":[0,16]}})", 32);
    r = read_safetensors(dir.file("o.safetensors"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == dir.file("o.safetensors") +
                                      ": tensor 'conv1.bias': data_offsets [0, 16] do not hold 8 "
                                      "F32 values");
    write_raw(dir.file("r.safetensors"),
              R"({"conv1.bias":{"dtype":"F32","shape":[8],"data_offsets":[64,96]}})", 32);
    r = read_safetensors(dir.file("r.safetensors"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("tensor 'conv1.bias': data_offsets end 96 beyond the 32 data "
                                    "bytes") != std::string::npos);
    write_raw(dir.file("h.safetensors"), R"({"conv1.bias":)", 0);
    r = read_safetensors(dir.file("h.safetensors"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("h.safetensors: safetensors header: malformed JSON at byte") !=
          std::string::npos);
    write_raw(dir.file("d.safetensors"),
              R"({"conv1.bias":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
              R"("conv1.bias":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})",
              32);
    r = read_safetensors(dir.file("d.safetensors"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("d.safetensors: safetensors header: key conv1.bias appears "
                                    "twice in one object") != std::string::npos);
  }
  SECTION("missing file") {
    auto r = Weights::load_safetensors(dir.file("none.safetensors"), plan);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == serf::StatusCode::kNotFound);
  }
  SECTION("a directory") {
    auto r = Weights::load_safetensors(dir.path.string(), plan);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == dir.path.string() + ": is a directory, not a safetensors file");
  }
  SECTION("overlapping tensor ranges") {
    write_raw(dir.file("v.safetensors"),
              R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
              R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
              24);
    auto r = read_safetensors(dir.file("v.safetensors"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == dir.file("v.safetensors") +
                                      ": tensors 'a' [0, 16) and 'b' [8, 24) overlap (each "
                                      "tensor needs its own data range)");
  }
  SECTION("NaN or infinite values") {
    for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      std::map<std::string, Tensor> t = w.tensors();
      t["fc1.bias"].data[7] = bad;
      REQUIRE(write_safetensors(dir.file("n.safetensors"), t).ok());
      auto r = Weights::load_safetensors(dir.file("n.safetensors"), plan);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == serf::StatusCode::kInvalidArgument);
      CHECK(r.status().message() == dir.file("n.safetensors") + ": tensor 'fc1.bias' holds " +
                                        (std::isnan(bad) ? "NaN" : "an infinity") +
                                        " at index 7 (weights and inputs must be finite numbers)");
    }
    std::vector<float> x = seeded_input(plan.spec.input, 1);
    x[100] = std::nanf("");
    REQUIRE(save_input_safetensors(dir.file("x.safetensors"), plan.spec.input, x).ok());
    auto r = load_input_safetensors(dir.file("x.safetensors"), plan.spec.input);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("tensor 'input' holds NaN at index 100") != std::string::npos);
  }
}

TEST_CASE("batchnorm and grouped conv2d tensors", "[model]") {
  auto doc = nlohmann::json::parse(R"({"name": "g", "input": {"channels": 4, "height": 5,
      "width": 5}, "layers": [{"name": "c", "type": "conv2d", "out_channels": 6, "kernel": [3, 1],
      "groups": 2}, {"name": "bn", "type": "batchnorm"}]})");
  auto spec = model_spec_from_json(doc, "g");
  REQUIRE(spec.ok());
  auto plan = infer_shapes(*spec);
  REQUIRE(plan.ok());
  const auto specs = expected_tensors(*plan);
  REQUIRE(specs.size() == 6);
  CHECK(specs[0].shape == std::vector<int64_t>{6, 2, 3, 1});
  CHECK(specs[0].fan_in == 6);
  CHECK(specs[2].name == "bn.weight");
  CHECK(specs[4].name == "bn.running_mean");
  CHECK(specs[5].shape == std::vector<int64_t>{6});
  const Weights w = Weights::seeded(*plan, 1);
  for (float v : w.find("bn.running_var")->data) {
    CHECK(v >= 0.5f);
    CHECK(v < 1.5f);
  }
  for (float v : w.find("bn.weight")->data) CHECK(std::fabs(v - 1.0f) <= 0.5f);
  CHECK(w.bytes() == plan->weight_bytes);
}

TEST_CASE("the memory check counts the address-space limit", "[model]") {
  const ModelPlan plan = load("imagenet22k");  // 683 MB of weights
  CHECK(check_weights_fit_memory(plan, 1).ok());
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_AS, &saved) == 0);
  struct rlimit low = saved;
  low.rlim_cur = 256ull << 20;  // below this process's need for one copy
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < low.rlim_cur)
    low.rlim_cur = saved.rlim_max;
  REQUIRE(setrlimit(RLIMIT_AS, &low) == 0);
  const serf::Status s = check_weights_fit_memory(plan, 1);
  setrlimit(RLIMIT_AS, &saved);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("under its address-space limit (ulimit -v)") != std::string::npos);
}

// Golden values from an independent Python implementation of the documented scheme
// (splitmix64 of key + i * golden, key = splitmix64(splitmix64(seed) ^ fnv1a64(name)),
// 24-bit uniform * float(sqrt(6 / fan_in))). They pin the values across instruction sets (the
// vectorised and scalar paths), compilers and releases: a change here changes every weight file.
TEST_CASE("seeded values match the documented scheme", "[model]") {
  const auto x = seeded_input(Shape{1, 2, 3}, 42);
  CHECK(x == std::vector<float>{0.6114811897277832f, -0.30987823009490967f, -0.8842905759811401f,
                                0.4544559717178345f, 0.5284603834152222f, -0.7571496963500977f});
  const Weights tiny = Weights::seeded(load("tiny"), 1);
  const auto& conv1 = tiny.find("conv1.weight")->data;
  CHECK(conv1[0] == -0.10045471042394638f);
  CHECK(conv1[1] == -0.11266178637742996f);
  CHECK(conv1[2] == -0.1053072139620781f);
  CHECK(conv1[215] == -0.07661150395870209f);
  CHECK(tiny.find("fc1.bias")->data[0] == -0.008651363663375378f);
  CHECK(tiny.find("fc1.bias")->data[15] == -0.0969928726553917f);
  // A large tensor takes the threaded path.
  const Weights cifar = Weights::seeded(load("cifar10"), 3);
  const auto& fc1 = cifar.find("fc1.weight")->data;
  CHECK(fc1[0] == 0.0003069565864279866f);
  CHECK(fc1[300001] == 0.03960074484348297f);
  CHECK(fc1[602111] == 0.028516072779893875f);
}
