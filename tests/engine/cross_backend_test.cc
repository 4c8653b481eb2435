// Cross-backend test: every layer type and every shipped model on the CPU (oneDNN) and the GPU
// (cuDNN + cuBLAS) backends, compared within a stated tolerance. Without a device (or in a build
// without the CUDA backend) the [gpu] cases print "SKIPPED (no GPU): <why>" and return; CTest then
// reports test_cross_backend_gpu as skipped. The [engine] cases run everywhere:
// make_backend("cuda") must say why it is unavailable, and the layer-step planner the CUDA backend
// relies on is checked.
//
// Tolerance: |gpu_i - cpu_i| <= 1e-3 * |cpu_i| + 1e-4 * max_j |cpu_j| for every output element.
// Both backends compute in FP32 (the CUDA backend disables TF32: cuDNN FMA math, cuBLAS default
// math) but sum in different orders and may use Winograd / FFT convolutions, hence not bit-equal.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <thread>

#include "engine/backend.h"
#include "engine/layer_steps.h"
#include "engine/simulated_unit.h"
#include "engine_test_util.h"
#include "model/weights.h"
#ifdef SERF_TEST_CUDA_BUILT
#include "engine/cuda/cuda_backend.h"  // names no CUDA type
#endif

using namespace serf;
using namespace serf::engine;
using serf::engine::testing::kShuffle;
using serf::engine::testing::kUserOps;
using serf::engine::testing::load_shipped;
using serf::engine::testing::run_batch;

namespace {

constexpr double kRelTol = 1e-3;
constexpr double kScaleTol = 1e-4;

// The worst |a_i - b_i| / (kRelTol * |b_i| + kScaleTol * max|b|): <= 1 passes.
double tolerance_ratio(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double scale = 0.0;
  for (float v : b) scale = std::max(scale, std::abs(double{v}));
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double allowed = kRelTol * std::abs(double{b[i]}) + kScaleTol * scale + 1e-30;
    worst = std::max(worst, std::abs(double{a[i]} - double{b[i]}) / allowed);
  }
  return worst;
}

// The CUDA backend, or null after a visible skip line naming the reason.
Backend* cuda_or_skip() {
  static StatusOr<std::unique_ptr<Backend>> backend = make_backend("cuda");
  if (!backend.ok()) {
    WARN("SKIPPED (no GPU): " << backend.status().message());
    return nullptr;
  }
  return backend->get();
}

Backend& cpu() {
  static StatusOr<std::unique_ptr<Backend>> backend = make_backend("cpu");
  REQUIRE(backend.ok());
  return **backend;
}

std::vector<float> run_once(Backend& backend, const model::ModelPlan& plan, const model::Weights& w,
                            const std::vector<float>& input, int threads = 1) {
  auto prepared = backend.prepare(plan, w, Partition{0, 1}, threads);
  INFO(prepared.status().message());
  REQUIRE(prepared.ok());
  auto slot = (*prepared)->new_slot();
  INFO(slot.status().message());
  REQUIRE(slot.ok());
  std::vector<float> out(static_cast<size_t>(plan.output().elements()));
  LocalExchange local;
  LayerTimings timings;
  const Status s = (*slot)->run(input.data(), out.data(), local, &timings);
  INFO(s.message());
  REQUIRE(s.ok());
  return out;
}

model::ModelPlan plan_from(const std::string& json) {
  auto spec = model::model_spec_from_json(nlohmann::json::parse(json), "test spec");
  INFO(spec.status().message());
  REQUIRE(spec.ok());
  auto plan = model::infer_shapes(*spec);
  INFO(plan.status().message());
  REQUIRE(plan.ok());
  return *plan;
}

// One model per layer type (and the fusions the backends make), small enough for exact review.
std::vector<std::pair<std::string, std::string>> single_layer_specs() {
  auto spec = [](const std::string& input, const std::string& layers) {
    return R"({"name": "one", "input": )" + input + R"(, "layers": [)" + layers + "]}";
  };
  const std::string img = R"({"channels": 5, "height": 9, "width": 9})";
  return {
      {"conv2d",
       spec(img, R"({"type": "conv2d", "out_channels": 7, "kernel": 3, "stride": 2, "pad": 1})")},
      {"conv2d+relu",
       spec(img,
            R"({"type": "conv2d", "out_channels": 6, "kernel": 5, "pad": 2}, {"type": "relu"})")},
      {"conv2d 1x1", spec(img, R"({"type": "conv2d", "out_channels": 4, "kernel": 1})")},
      {"maxpool", spec(img, R"({"type": "maxpool", "kernel": 3, "stride": 2, "pad": 1})")},
      {"avgpool", spec(img, R"({"type": "avgpool", "kernel": 3, "stride": 2, "pad": 1})")},
      {"relu", spec(img, R"({"type": "relu"})")},
      {"lrn", spec(img, R"({"type": "lrn", "size": 3, "alpha": 0.05, "beta": 0.75, "k": 2.0})")},
      {"flatten+fully_connected",
       spec(img, R"({"type": "flatten"}, {"type": "fully_connected", "out": 11})")},
      {"fully_connected+relu",
       spec(img,
            R"({"type": "flatten"}, {"type": "fully_connected", "out": 9}, {"type": "relu"})")},
      {"softmax", spec(img, R"({"type": "flatten"}, {"type": "softmax"})")},
      {"maxpool+relu (unfused relu)",
       spec(img, R"({"type": "maxpool", "kernel": 2, "stride": 2}, {"type": "relu"})")},
      {"grouped conv2d, dilated",
       spec(
           img,
           R"({"type": "conv2d", "out_channels": 10, "kernel": 3, "pad": 2, "dilation": 2, "groups": 5})")},
      {"depthwise conv2d + clip",
       spec(
           img,
           R"({"type": "conv2d", "out_channels": 5, "kernel": 3, "pad": 1, "groups": 5}, {"type": "clip"})")},
      {"batchnorm", spec(img, R"({"type": "batchnorm"})")},
      {"sigmoid", spec(img, R"({"type": "sigmoid"})")},
      {"global_avgpool", spec(img, R"({"type": "global_avgpool"})")},
      {"avgpool without padding in the divisor",
       spec(
           img,
           R"({"type": "avgpool", "kernel": 3, "stride": 2, "pad": 1, "count_include_pad": false})")},
      {"conv2d + residual add + relu",
       spec(img, R"({"name": "a", "type": "conv2d", "out_channels": 6, "kernel": 3, "pad": 1},
                    {"name": "b", "type": "conv2d", "out_channels": 6, "kernel": 3, "pad": 1},
                    {"name": "s", "type": "add", "inputs": ["b", "a"]}, {"type": "relu"})")},
      {"add, concat",
       spec(img,
            R"({"name": "r", "type": "relu"}, {"name": "s", "type": "sigmoid", "inputs": ["input"]},
                                  {"name": "a", "type": "add", "inputs": ["r", "s"]},
                                  {"name": "c", "type": "concat", "inputs": ["a", "s"]})")},
      // The layers users' networks add (engine/cuda/cuda_user_layers.cc); the channel-local
      // ones behind a conv2d so that K = 3 runs them on misaligned slices.
      {"conv_transpose2d", spec(img, R"({"type": "conv_transpose2d", "out_channels": 6,
                                         "kernel": 3, "stride": 2, "pad": 1, "output_padding": 1})")},
      {"conv_transpose2d grouped + relu",
       spec(img, R"({"type": "conv_transpose2d", "out_channels": 10, "kernel": 4, "stride": 2,
                     "pad": 1, "groups": 5}, {"type": "relu"})")},
      {"prelu", spec(img, R"({"type": "conv2d", "out_channels": 7, "kernel": 1},
                             {"type": "prelu"})")},
      {"pad reflect", spec(img, R"({"type": "conv2d", "out_channels": 7, "kernel": 1},
                                   {"type": "pad", "pad": [2, 1, 0, 3], "mode": "reflect"})")},
      {"pad edge", spec(img, R"({"type": "conv2d", "out_channels": 7, "kernel": 1},
                                {"type": "pad", "pad": [1, 2], "mode": "edge"})")},
      {"upsample nearest", spec(img, R"({"type": "conv2d", "out_channels": 7, "kernel": 1},
                                        {"type": "upsample", "scale": [2, 3]})")},
      {"upsample bilinear", spec(img, R"({"type": "conv2d", "out_channels": 7, "kernel": 1},
                    {"type": "upsample", "scale": 2, "mode": "bilinear"})")},
      {"layer_norm", spec(img, R"({"type": "flatten"}, {"type": "fully_connected", "out": 37},
                                  {"type": "layer_norm", "epsilon": 0.001})")},
  };
}

}  // namespace

// Runs everywhere (tag [engine], not [gpu]): it is what CI checks of the CUDA path.
TEST_CASE("make_backend(\"cuda\") gives the GPU backend or a clear reason", "[engine]") {
  auto backend = make_backend("cuda");
  const auto names = backend_names();
  const bool built = std::find(names.begin(), names.end(), "cuda") != names.end();
#ifdef SERF_TEST_CUDA_BUILT
  CHECK(built);  // CMake built serf_engine_cuda, so the factory must know it
  // cuBLAS is opened at run time (dlopen); that must work with or without a device.
  const Status libraries = cuda_libraries_available();
  INFO(libraries.message());
  CHECK(libraries.ok());
#endif
  if (backend.ok()) {
    CHECK((*backend)->name() == "cuda");
    return;
  }
  WARN("no GPU here: " << backend.status().message());
  CHECK(backend.status().message().find("cuda") != std::string::npos);
  CHECK(backend.status().message().find("--backend cpu") != std::string::npos);
  if (built) {
    // Built but no device: Unavailable, naming the CUDA runtime's reason, not the build.
    CHECK(backend.status().code() == StatusCode::kUnavailable);
    CHECK(backend.status().message().find("no usable CUDA device") != std::string::npos);
  } else {
    CHECK(backend.status().code() == StatusCode::kNotFound);
    CHECK(backend.status().message().find("not in this build") != std::string::npos);
  }
}

TEST_CASE("layer steps: gathers where a layer needs every channel", "[engine]") {
  const model::ModelPlan plan = load_shipped("tiny");
  auto whole = plan_layer_steps(plan, Partition{0, 1});
  REQUIRE(whole.ok());
  for (const LayerStep& s : whole->steps) CHECK(s.gathers.empty());
  CHECK(whole->output_gathers.empty());

  // tiny: conv1 relu1 norm1 pool1 conv2 relu2 pool2 flatten fc1 relu3 fc2 prob
  auto split = plan_layer_steps(plan, Partition{1, 2});
  REQUIRE(split.ok());
  std::vector<int> gathered;
  for (const LayerStep& s : split->steps) {
    if (!s.gathers.empty()) gathered.push_back(s.layer);
  }
  CHECK(gathered == std::vector<int>{2, 8, 10, 11});  // norm1, fc1, fc2, prob
  CHECK(split->steps[1].noop);                        // relu1 fused into conv1
  CHECK(split->steps[1].fused_into == 0);
  CHECK(split->steps[0].activation_layer == 1);
  CHECK(split->steps[2].gathers[0].charged_layer == 0);  // conv1, which ran relu1
  CHECK(split->steps[0].out_slice.offset == 4);          // rank 1 of 2: conv1 channels 4..7
  CHECK(split->steps[0].out_slice.count == 4);
  CHECK(split->steps[6].channels.count == 6);  // pool2 pools rank 1's 6 of conv2's 12
  CHECK(split->steps[8].gathers[0].layout.total == plan.layers[7].out.elements());
  CHECK(split->output_gathers.empty());  // softmax ran on the gathered vector
  CHECK(split->max_gather_floats == plan.layers[0].out.elements());
  CHECK(plan_layer_steps(plan, Partition{0, 17}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("channel-major storage: each layer's area and the row transposes", "[engine]") {
  // tiny: conv1 relu1 norm1 pool1 conv2 relu2 pool2 flatten fc1 relu3 fc2 prob
  const model::ModelPlan plan = load_shipped("tiny");
  auto hw = [&](int layer) {
    const model::Shape& s = plan.layers[static_cast<size_t>(layer)].out;
    return int64_t{s.height} * s.width;
  };
  const std::vector<int64_t> want{hw(0), hw(0), hw(2), hw(3), hw(4), hw(4),
                                  hw(6), hw(6), 1,     1,     1,     1};
  CHECK(channel_major_areas(plan) == want);
  CHECK(hw(6) > 1);  // fc1 reads a flattened map: the CUDA backend makes it rows first

  // 2 rows of 3 channels of 2 floats: row r, channel c, j is 6 r + 2 c + j.
  std::vector<float> rows(12);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  std::vector<float> major(12), back(12);
  rows_to_channel_major(rows.data(), major.data(), 2, 3, 2);
  CHECK(major == std::vector<float>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11});
  channel_major_to_rows(major.data(), back.data(), 2, 3, 2);
  CHECK(back == rows);
}

TEST_CASE("every layer type: GPU matches CPU", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  for (const auto& [name, json] : single_layer_specs()) {
    INFO(name);
    const model::ModelPlan plan = plan_from(json);
    const model::Weights w = model::Weights::seeded(plan, 5);
    const std::vector<float> input = model::seeded_input(plan.spec.input, 5);
    const std::vector<float> want = run_once(cpu(), plan, w, input);
    const std::vector<float> got = run_once(*gpu, plan, w, input);
    CHECK(tolerance_ratio(got, want) <= 1.0);
    if (max_ranks(plan) >= 3) {
      // 3 ranks: slices of 3/2/2 channels start at misaligned offsets (the staged path).
      auto unit = SimulatedUnit::create(*gpu, plan, w, 3, 1);
      INFO(unit.status().message());
      REQUIRE(unit.ok());
      std::vector<float> split(want.size());
      REQUIRE((*unit)->run(input.data(), split.data(), nullptr).ok());
      CHECK(tolerance_ratio(split, want) <= 1.0);
    }
  }
}

// A shipped model, seeded weights and input, on both backends (CPU with 2 threads).
void check_shipped(Backend& gpu, const char* name) {
  INFO(name);
  const model::ModelPlan plan = load_shipped(name);
  const model::Weights w = model::Weights::seeded(plan, 9);
  const std::vector<float> input = model::seeded_input(plan.spec.input, 9);
  const std::vector<float> want = run_once(cpu(), plan, w, input, 2);
  const std::vector<float> got = run_once(gpu, plan, w, input);
  CHECK(tolerance_ratio(got, want) <= 1.0);
}

TEST_CASE("every shipped model: GPU matches CPU", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  for (const char* name : {"tiny", "cifar10", "imagenet1k"}) check_shipped(*gpu, name);
}

TEST_CASE("imagenet22k: GPU matches CPU", "[gpu][slow]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  check_shipped(*gpu, "imagenet22k");
}

TEST_CASE("K partitions on the GPU (host-staged all-gathers) match the CPU", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  for (const char* name : {"tiny", "cifar10"}) {
    const model::ModelPlan plan = load_shipped(name);
    const model::Weights w = model::Weights::seeded(plan, 4);
    const std::vector<float> input = model::seeded_input(plan.spec.input, 4);
    const std::vector<float> want = run_once(cpu(), plan, w, input);
    for (int k = 1; k <= 3; ++k) {
      INFO(name << " K=" << k);
      auto unit = SimulatedUnit::create(*gpu, plan, w, k, 1);
      INFO(unit.status().message());
      REQUIRE(unit.ok());
      std::vector<float> out(want.size());
      for (int round = 0; round < 2; ++round) {  // the second reuses every buffer
        REQUIRE((*unit)->run(input.data(), out.data(), nullptr).ok());
        CHECK(tolerance_ratio(out, want) <= 1.0);
      }
    }
  }
}

TEST_CASE("c slots run as concurrent CUDA streams and give the serial answers", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  const model::ModelPlan plan = load_shipped("cifar10");
  const model::Weights w = model::Weights::seeded(plan, 11);
  for (int threads : {1, 4, 1000}) {  // an SM share, a bigger one, the whole GPU
    INFO("T=" << threads);
    auto prepared = gpu->prepare(plan, w, Partition{0, 1}, threads);
    REQUIRE(prepared.ok());
    auto again = gpu->prepare(plan, w, Partition{0, 1}, threads);  // held: the cached one
    REQUIRE(again.ok());
    CHECK(again->get() == prepared->get());
    // One Executable (stream) per caller thread, as a node's slot threads own theirs.
    const int callers = 4, per_caller = 5;
    std::vector<std::unique_ptr<Executable>> slots;
    std::vector<std::vector<float>> inputs, expected;
    for (int i = 0; i < callers; ++i) {
      auto slot = (*prepared)->new_slot();
      REQUIRE(slot.ok());
      slots.push_back(std::move(slot).value());
      inputs.push_back(model::seeded_input(plan.spec.input, 200 + i));
      expected.push_back(run_once(cpu(), plan, w, inputs.back()));
    }
    std::atomic<int> failed{0}, wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < callers; ++t) {
      pool.emplace_back([&, t] {
        LocalExchange local;
        std::vector<float> out(static_cast<size_t>(plan.output().elements()));
        for (int i = 0; i < per_caller; ++i) {
          if (!slots[t]->run(inputs[t].data(), out.data(), local, nullptr).ok()) ++failed;
          if (tolerance_ratio(out, expected[t]) > 1.0) ++wrong;
        }
      });
    }
    for (auto& p : pool) p.join();
    CHECK(failed == 0);
    CHECK(wrong == 0);
  }
}

TEST_CASE("bad input to the GPU backend is a clear error", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  const model::ModelPlan plan = load_shipped("tiny");
  const model::Weights w = model::Weights::seeded(plan, 1);
  CHECK(gpu->prepare(plan, w, Partition{0, 1}, 0).status().code() == StatusCode::kInvalidArgument);
  auto too_many = gpu->prepare(plan, w, Partition{0, 9}, 1);
  CHECK(too_many.status().code() == StatusCode::kInvalidArgument);
  CHECK(too_many.status().message().find("conv1") != std::string::npos);
  model::Weights missing;
  auto none = gpu->prepare(plan, missing, Partition{0, 1}, 1);
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(none.status().message().find("conv1.weight") != std::string::npos);
  model::Weights wrong_shape = w;
  wrong_shape.set("fc1.weight", model::Tensor{{16, 3}, std::vector<float>(48, 0.0f)});
  auto bad = gpu->prepare(plan, wrong_shape, Partition{0, 1}, 1);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("fc1.weight") != std::string::npos);

  auto prepared = gpu->prepare(plan, w, Partition{1, 2}, 1);
  REQUIRE(prepared.ok());
  auto slot = (*prepared)->new_slot();
  REQUIRE(slot.ok());
  std::vector<float> in(static_cast<size_t>(plan.spec.input.elements())),
      out(static_cast<size_t>(plan.output().elements()));
  LocalExchange local;  // rank 0 of 1, the slot is rank 1 of 2
  CHECK((*slot)->run(in.data(), out.data(), local, nullptr).code() == StatusCode::kInvalidArgument);
}

namespace {

std::vector<float> row_of(const std::vector<float>& rows, int64_t row_floats, int r) {
  return {rows.begin() + row_floats * r, rows.begin() + row_floats * (r + 1)};
}

// For b in {2, 3, 8} and K in {1, 2} (2 where the model splits): each GPU row within the
// tolerance of the CPU's row of the same batch and of the GPU's answer to that row alone.
void check_gpu_batches(Backend& gpu, const model::ModelPlan& plan) {
  const model::Weights w = model::Weights::seeded(plan, 6);
  const int64_t out_n = plan.output().elements();
  std::vector<float> inputs;
  std::vector<std::vector<float>> alone;
  for (int r = 0; r < 8; ++r) {
    const std::vector<float> x = model::seeded_input(plan.spec.input, 30 + r);
    inputs.insert(inputs.end(), x.begin(), x.end());
    alone.push_back(run_once(gpu, plan, w, x));
  }
  for (int ranks : {1, 2}) {
    if (ranks > max_ranks(plan)) continue;
    for (int batch : {2, 3, 8}) {
      INFO("K=" << ranks << " b=" << batch);
      const std::vector<float> x(inputs.begin(),
                                 inputs.begin() + plan.spec.input.elements() * batch);
      const std::vector<float> want = run_batch(cpu(), plan, w, x, ranks, 1, batch);
      const std::vector<float> got = run_batch(gpu, plan, w, x, ranks, 1, batch);
      for (int r = 0; r < batch; ++r) {
        INFO("row " << r);
        CHECK(tolerance_ratio(row_of(got, out_n, r), row_of(want, out_n, r)) <= 1.0);
        CHECK(tolerance_ratio(row_of(got, out_n, r), alone[static_cast<size_t>(r)]) <= 1.0);
      }
    }
  }
}

}  // namespace

TEST_CASE("a batch on the GPU: every layer type, each row as on the CPU and alone", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  for (const auto& [name, json] : single_layer_specs()) {
    INFO(name);
    check_gpu_batches(*gpu, plan_from(json));
  }
}

TEST_CASE("a batch on the GPU: slices and shuffles, user layers, tiny, cifar10", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  check_gpu_batches(*gpu, plan_from(kShuffle));
  check_gpu_batches(*gpu, plan_from(kUserOps));
  check_gpu_batches(*gpu, load_shipped("tiny"));
  check_gpu_batches(*gpu, load_shipped("cifar10"));
}

TEST_CASE("a batch over a CPU rank and a GPU rank: the exchanged parts agree", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  const int batch = 3;
  for (const char* name : {"tiny", "cifar10"}) {
    INFO(name);
    const model::ModelPlan plan = load_shipped(name);
    const model::Weights w = model::Weights::seeded(plan, 8);
    std::vector<float> x;
    for (int r = 0; r < batch; ++r) {
      const std::vector<float> row = model::seeded_input(plan.spec.input, 50 + r);
      x.insert(x.end(), row.begin(), row.end());
    }
    const std::vector<float> want = run_batch(cpu(), plan, w, x, 1, 1, batch);
    // Rank 0 on the CPU, rank 1 on the GPU, one in-process exchange between them.
    auto on_cpu = cpu().prepare(plan, w, Partition{0, 2}, 1, batch);
    auto on_gpu = gpu->prepare(plan, w, Partition{1, 2}, 1, batch);
    INFO(on_gpu.status().message());
    REQUIRE(on_cpu.ok());
    REQUIRE(on_gpu.ok());
    auto cpu_slot = (*on_cpu)->new_slot();
    auto gpu_slot = (*on_gpu)->new_slot();
    REQUIRE(cpu_slot.ok());
    REQUIRE(gpu_slot.ok());
    InProcessExchange exchange(2);
    std::vector<float> cpu_out(want.size()), gpu_out(want.size());
    Status gpu_status = Status::Ok();
    std::thread rank1([&] {
      gpu_status = (*gpu_slot)->run(x.data(), gpu_out.data(), exchange.member(1), nullptr);
    });
    const Status cpu_status =
        (*cpu_slot)->run(x.data(), cpu_out.data(), exchange.member(0), nullptr);
    rank1.join();
    INFO(cpu_status.message() << " / " << gpu_status.message());
    REQUIRE(cpu_status.ok());
    REQUIRE(gpu_status.ok());
    CHECK(tolerance_ratio(cpu_out, want) <= 1.0);
    CHECK(tolerance_ratio(gpu_out, want) <= 1.0);
  }
}

TEST_CASE("a layer the GPU cannot batch over ranks is refused by name", "[gpu]") {
  Backend* gpu = cuda_or_skip();
  if (gpu == nullptr) return;
  // A softmax over a flattened 3 x 3 map: stored [C][b][9] at K = 2, b = 2, not [F][b].
  const model::ModelPlan plan = plan_from(R"({"name": "spatial_softmax",
    "input": {"channels": 4, "height": 3, "width": 3},
    "layers": [{"name": "c", "type": "conv2d", "out_channels": 6, "kernel": 1},
               {"name": "f", "type": "flatten"}, {"name": "p", "type": "softmax"}]})");
  const model::Weights w = model::Weights::seeded(plan, 2);
  auto refused = gpu->prepare(plan, w, Partition{0, 2}, 1, 2);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("softmax") != std::string::npos);
  CHECK(refused.status().message().find("b = 2") != std::string::npos);
  CHECK(refused.status().message().find("--backend cpu") != std::string::npos);
  // The same batch on one rank, and the same ranks at b = 1, run.
  CHECK(gpu->prepare(plan, w, Partition{0, 1}, 1, 2).ok());
  CHECK(gpu->prepare(plan, w, Partition{0, 2}, 1, 1).ok());
}
