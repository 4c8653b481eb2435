#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "engine/backend.h"
#include "engine/simulated_unit.h"
#include "engine_test_util.h"
#include "model/weights.h"
#include "reference_forward.h"

using namespace serf;
using namespace serf::engine;
using serf::engine::testing::load_shipped;
using serf::engine::testing::max_relative_error;

namespace {

std::vector<float> run_once(Backend& backend, const model::ModelPlan& plan, const model::Weights& w,
                            const std::vector<float>& input, int threads,
                            LayerTimings* timings = nullptr) {
  auto prepared = backend.prepare(plan, w, Partition{0, 1}, threads);
  REQUIRE(prepared.ok());
  auto slot = (*prepared)->new_slot();
  REQUIRE(slot.ok());
  std::vector<float> out(plan.output().elements());
  LocalExchange local;
  REQUIRE((*slot)->run(input.data(), out.data(), local, timings).ok());
  return out;
}

}  // namespace

TEST_CASE("the CPU backend matches a plain-loop reference", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  for (const char* name : {"tiny", "cifar10"}) {
    INFO(name);
    const model::ModelPlan plan = load_shipped(name);
    const model::Weights w = model::Weights::seeded(plan, 7);
    const std::vector<float> input = model::seeded_input(plan.spec.input, 7);
    for (int threads : {1, 2}) {
      LayerTimings timings;
      const std::vector<float> out = run_once(**backend, plan, w, input, threads, &timings);
      const std::vector<float> ref = serf::engine::testing::reference_forward(plan, w, input);
      CHECK(max_relative_error(out, ref) <= 1e-4);
      REQUIRE(timings.compute_ms.size() == plan.layers.size());
      for (size_t i = 0; i < plan.layers.size(); ++i) {
        CHECK(timings.compute_ms[i] >= 0.0);
        if (plan.spec.layers[i].kind == model::LayerKind::kConv2d)
          CHECK(timings.compute_ms[i] > 0.0);
      }
    }
  }
}

TEST_CASE("K partitions assemble the unpartitioned output", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  for (const char* name : {"tiny", "cifar10"}) {
    const model::ModelPlan plan = load_shipped(name);
    const model::Weights w = model::Weights::seeded(plan, 3);
    const std::vector<float> input = model::seeded_input(plan.spec.input, 3);
    const std::vector<float> whole = run_once(**backend, plan, w, input, 1);
    for (int k = 1; k <= 4; ++k) {
      INFO(name << " K=" << k);
      auto unit = SimulatedUnit::create(**backend, plan, w, k, 1);
      REQUIRE(unit.ok());
      std::vector<float> out(whole.size());
      LayerTimings timings;
      for (int round = 0; round < 3; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        REQUIRE((*unit)->run(input.data(), out.data(), &timings).ok());
        const double wall_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        CHECK(max_relative_error(out, whole) <= 1e-5);
        // Timings are this request's: they never add up to more than its wall-clock time.
        double layers_ms = 0.0;
        for (size_t i = 0; i < timings.compute_ms.size(); ++i) {
          layers_ms += timings.compute_ms[i] + timings.exchange_ms[i];
        }
        CHECK(layers_ms <= wall_ms);
        if (k == 1) {
          for (double ms : timings.exchange_ms) CHECK(ms == 0.0);
        }
      }
    }
  }
}

// c slots of one PreparedModel (the weights shared), each an Executable owned by its own thread,
// as a node's slot threads own theirs (mpi/node.cc).
TEST_CASE("c slots serve c requests at once and give the serial answers", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::ModelPlan plan = load_shipped("cifar10");
  const model::Weights w = model::Weights::seeded(plan, 11);
  const int slots = 3, per_thread = 8;
  auto prepared = (*backend)->prepare(plan, w, Partition{0, 1}, 1);
  REQUIRE(prepared.ok());
  std::vector<std::unique_ptr<Executable>> executables;
  std::vector<std::vector<float>> inputs, expected;
  for (int i = 0; i < slots; ++i) {
    auto slot = (*prepared)->new_slot();
    REQUIRE(slot.ok());
    executables.push_back(std::move(slot).value());
    inputs.push_back(model::seeded_input(plan.spec.input, 100 + i));
    expected.push_back(run_once(**backend, plan, w, inputs.back(), 1));
  }
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < slots; ++t) {
    callers.emplace_back([&, t] {
      LocalExchange local;
      std::vector<float> out(plan.output().elements());
      for (int i = 0; i < per_thread; ++i) {
        if (!executables[t]->run(inputs[t].data(), out.data(), local, nullptr).ok()) ++failed;
        if (max_relative_error(out, expected[t]) > 1e-6) ++wrong;
      }
    });
  }
  for (auto& c : callers) c.join();
  CHECK(failed == 0);
  CHECK(wrong == 0);
}

TEST_CASE("bad engine input is a clear error", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::ModelPlan plan = load_shipped("tiny");
  model::Weights w = model::Weights::seeded(plan, 1);

  CHECK(make_backend("tpu").status().code() == StatusCode::kInvalidArgument);
  CHECK(make_backend("tpu").status().message().find("unknown backend 'tpu'") != std::string::npos);

  auto zero_threads = (*backend)->prepare(plan, w, Partition{0, 1}, 0);
  CHECK(zero_threads.status().code() == StatusCode::kInvalidArgument);

  CHECK(max_ranks(plan) == 16);  // fc1 has 16 outputs; smaller layers run whole beyond their size
  auto too_many = (*backend)->prepare(plan, w, Partition{0, 17}, 1);
  CHECK(too_many.status().code() == StatusCode::kInvalidArgument);
  CHECK(too_many.status().message().find("widest layer 'fc1'") != std::string::npos);
  CHECK(validate_partition(plan, Partition{0, 0}).code() == StatusCode::kInvalidArgument);

  model::Weights wrong_shape = w;
  wrong_shape.set("fc1.weight", model::Tensor{{16, 3}, std::vector<float>(48, 0.0f)});
  auto bad = (*backend)->prepare(plan, wrong_shape, Partition{0, 1}, 1);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("fc1.weight") != std::string::npos);

  model::Weights missing;
  auto none = (*backend)->prepare(plan, missing, Partition{0, 1}, 1);
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(none.status().message().find("conv1.weight") != std::string::npos);

  auto prepared = (*backend)->prepare(plan, w, Partition{1, 2}, 1);
  REQUIRE(prepared.ok());
  auto slot = (*prepared)->new_slot();
  REQUIRE(slot.ok());
  std::vector<float> in(plan.spec.input.elements()), out(plan.output().elements());
  LocalExchange local;  // rank 0 of 1: does not match rank 1 of 2
  CHECK((*slot)->run(in.data(), out.data(), local, nullptr).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("prepared models are shared while held", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::ModelPlan plan = load_shipped("tiny");
  const model::Weights w = model::Weights::seeded(plan, 1);
  auto a = (*backend)->prepare(plan, w, Partition{0, 1}, 1);
  auto b = (*backend)->prepare(plan, w, Partition{0, 1}, 1);
  auto c = (*backend)->prepare(plan, w, Partition{0, 1}, 2);
  auto d = (*backend)->prepare(plan, w, Partition{1, 2}, 1);
  REQUIRE((a.ok() && b.ok() && c.ok() && d.ok()));
  CHECK(a->get() == b->get());
  CHECK(a->get() != c->get());
  CHECK(a->get() != d->get());
  CHECK((*c)->threads() == 2);
  CHECK((*d)->partition().rank == 1);
  CHECK((*d)->resident_weight_bytes() < (*a)->resident_weight_bytes());
}

TEST_CASE("unfused relu, lrn on 16-channel blocks and flatten after blocked layouts", "[engine]") {
  // Layouts flow between layers when K = 1: every layer kind after every other, checked against
  // the plain-loop reference, unpartitioned and with K = 3.
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "name": "mixed", "input": {"channels": 3, "height": 17, "width": 17},
    "layers": [
      {"name": "conv1", "type": "conv2d", "out_channels": 32, "kernel": 3, "stride": 2, "pad": 1},
      {"name": "pool1", "type": "maxpool", "kernel": 3, "stride": 2, "pad": 1},
      {"name": "relu1", "type": "relu"},
      {"name": "norm1", "type": "lrn", "size": 5, "alpha": 0.01, "beta": 0.75, "k": 2.0},
      {"name": "conv2", "type": "conv2d", "out_channels": 20, "kernel": 3, "stride": 1, "pad": 1},
      {"name": "pool2", "type": "avgpool", "kernel": 2, "stride": 2},
      {"name": "relu2", "type": "relu"},
      {"name": "flatten", "type": "flatten"},
      {"name": "relu3", "type": "relu"},
      {"name": "fc1", "type": "fully_connected", "out": 24},
      {"name": "relu4", "type": "relu"},
      {"name": "fc2", "type": "fully_connected", "out": 7},
      {"name": "prob", "type": "softmax"}]})");
  auto spec = model::model_spec_from_json(doc, "mixed");
  REQUIRE(spec.ok());
  auto plan = model::infer_shapes(*spec);
  REQUIRE(plan.ok());
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::Weights w = model::Weights::seeded(*plan, 9);
  const std::vector<float> input = model::seeded_input(plan->spec.input, 9);
  const std::vector<float> ref = serf::engine::testing::reference_forward(*plan, w, input);
  for (int threads : {1, 2}) {
    CHECK(max_relative_error(run_once(**backend, *plan, w, input, threads), ref) <= 1e-4);
  }
  auto unit = SimulatedUnit::create(**backend, *plan, w, 3, 1);
  REQUIRE(unit.ok());
  std::vector<float> out(ref.size());
  REQUIRE((*unit)->run(input.data(), out.data(), nullptr).ok());
  CHECK(max_relative_error(out, ref) <= 1e-4);
}
