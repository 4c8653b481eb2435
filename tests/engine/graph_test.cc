// The graph engine: a model with every layer kind (residual add, concat, grouped / depthwise /
// dilated conv2d, batchnorm, clip, sigmoid, global pooling, ceil-mode pooling) against the
// plain-loop reference, unpartitioned and over K = 2..6 ranks; where the planner gathers and what
// it fuses; a model whose last layer is too small to split.
#include <catch2/catch.hpp>

#include "engine/backend.h"
#include "engine/layer_steps.h"
#include "engine/simulated_unit.h"
#include "engine_test_util.h"
#include "model/weights.h"
#include "reference_forward.h"

using namespace serf;
using namespace serf::engine;
using serf::engine::testing::kEveryOp;
using serf::engine::testing::kGates;
using serf::engine::testing::kShuffle;
using serf::engine::testing::kUserOps;
using serf::engine::testing::max_relative_error;
using serf::engine::testing::plan_from;

namespace {

int layer(const model::ModelPlan& plan, const std::string& name) {
  for (size_t i = 0; i < plan.spec.layers.size(); ++i) {
    if (plan.spec.layers[i].name == name) return static_cast<int>(i);
  }
  FAIL("no layer " << name);
  return -1;
}

std::vector<float> run_unit(Backend& backend, const model::ModelPlan& plan, const model::Weights& w,
                            const std::vector<float>& input, int ranks, int threads) {
  auto unit = SimulatedUnit::create(backend, plan, w, ranks, threads);
  INFO(unit.status().message());
  REQUIRE(unit.ok());
  std::vector<float> out(static_cast<size_t>(plan.output().elements()));
  for (int round = 0; round < 2; ++round) {  // the second reuses every buffer
    const Status s = (*unit)->run(input.data(), out.data(), nullptr);
    INFO(s.message());
    REQUIRE(s.ok());
  }
  return out;
}

// The plan's output on the CPU backend, for K = 1..6 ranks (and T = 2 at K = 1 and 3), equals the
// plain-loop reference within 1e-4 relative, on weights and an input seeded with `seed`.
void check_against_reference(const model::ModelPlan& plan, uint64_t seed) {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::Weights w = model::Weights::seeded(plan, seed);
  const std::vector<float> input = model::seeded_input(plan.spec.input, seed);
  const std::vector<float> ref = serf::engine::testing::reference_forward(plan, w, input);
  for (int ranks = 1; ranks <= 6; ++ranks) {
    for (int threads : {1, 2}) {
      if (threads == 2 && ranks != 1 && ranks != 3) continue;
      INFO("K=" << ranks << " T=" << threads);
      CHECK(max_relative_error(run_unit(**backend, plan, w, input, ranks, threads), ref) <= 1e-4);
    }
  }
}

}  // namespace

TEST_CASE("every layer kind matches the reference, unpartitioned and over K ranks", "[engine]") {
  const model::ModelPlan plan = plan_from(kEveryOp);
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "g"))].out == model::Shape{12, 11, 11});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "mp"))].out == model::Shape{12, 6, 6});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "cat2"))].out == model::Shape{32, 1, 1});
  check_against_reference(plan, 5);
}

TEST_CASE("the planner gathers only where a layer needs a whole tensor", "[engine]") {
  const model::ModelPlan plan = plan_from(kEveryOp);
  auto steps = plan_layer_steps(plan, Partition{1, 3});
  REQUIRE(steps.ok());
  auto step = [&](const char* name) {
    return steps->steps[static_cast<size_t>(layer(plan, name))];
  };
  CHECK(step("bn1").gathers.empty());  // channel-local on the slice
  CHECK(step("dw").gathers.empty());   // depthwise: its groups are the channels the rank holds
  CHECK(step("dw").activation_layer == layer(plan, "r2"));
  REQUIRE(step("pw").gathers.size() == 1);
  CHECK(step("pw").gathers[0].charged_layer == layer(plan, "dw"));
  // The residual add (and the relu after it) run in pw's kernel, accumulating into r1's buffer.
  CHECK(step("pw").accumulate);
  CHECK(step("pw").add_layer == layer(plan, "sum"));
  CHECK(step("pw").activation_layer == layer(plan, "r3"));
  CHECK(step("sum").noop);
  // Every buffer a step names is -1 (the input, or none: a fused step) or a real buffer; a fused
  // step's output once took groups_[-1]'s bytes (ASan: a read before the vector).
  const auto buffers = static_cast<int>(steps->buffer_sizes.size());
  for (const LayerStep& st : steps->steps) {
    CHECK((st.output.buffer >= -1 && st.output.buffer < buffers));
    for (const TensorRef& in : st.inputs) CHECK((in.buffer >= -1 && in.buffer < buffers));
  }
  for (int b : steps->tensor_buffer) CHECK((b >= -1 && b < buffers));
  CHECK(step("sum").fused_into == layer(plan, "pw"));
  CHECK(step("pw").output.buffer == steps->tensor_buffer[static_cast<size_t>(layer(plan, "r1"))]);
  CHECK(step("g").gathers.size() == 1);  // 4 groups: a slicing other than r3's 16 channels
  CHECK(step("g").group_slice.count == 1);
  CHECK(step("g2").gathers.empty());       // r3 was gathered in place for g
  CHECK(step("mix").gathers.size() == 1);  // r4 sliced by channels, s by groups of 3
  CHECK(step("mp").gathers.empty());
  CHECK(step("gap2").gathers.empty());
  CHECK(step("cat").gathers.size() == 2);
  CHECK(step("fc2").gathers.size() == 1);
  CHECK(step("prob").gathers.size() == 1);
  CHECK(steps->output_gathers.empty());
  CHECK_FALSE(step("g").replicated);

  auto six = plan_layer_steps(plan, Partition{5, 6});
  REQUIRE(six.ok());
  CHECK(six->steps[static_cast<size_t>(layer(plan, "g"))].replicated);    // 4 groups < 6
  CHECK(six->steps[static_cast<size_t>(layer(plan, "fc2"))].replicated);  // 5 outputs < 6
  CHECK_FALSE(six->steps[static_cast<size_t>(layer(plan, "c1"))].replicated);

  auto whole = plan_layer_steps(plan, Partition{0, 1});
  REQUIRE(whole.ok());
  for (const LayerStep& s : whole->steps) CHECK(s.gathers.empty());
  // Liveness: far fewer buffers than tensors.
  CHECK(whole->buffer_sizes.size() < plan.layers.size() / 2);
}

TEST_CASE("silu, hardswish, hardsigmoid and mul match the reference over K ranks", "[engine]") {
  const model::ModelPlan plan = plan_from(kGates);
  check_against_reference(plan, 7);
}

TEST_CASE("squeeze-and-excitation scales the rank's channels without an exchange", "[engine]") {
  const model::ModelPlan plan = plan_from(kGates);
  auto steps = plan_layer_steps(plan, Partition{1, 3});
  REQUIRE(steps.ok());
  auto step = [&](const char* name) {
    return steps->steps[static_cast<size_t>(layer(plan, name))];
  };
  CHECK(step("c1").activation_layer == layer(plan, "a1"));   // silu fused
  CHECK(step("dw").activation_layer == layer(plan, "a2"));   // hardswish fused
  CHECK(step("f2").activation_layer == layer(plan, "f2a"));  // hardsigmoid fused
  CHECK(step("fc").activation_layer == layer(plan, "hsw"));
  CHECK_FALSE(step("hs").noop);  // after a maxpool: its own step
  // se: dw's groups 4..7 scaled by e2's channels 4..7, both on this rank, in place.
  CHECK(step("se").gathers.empty());
  CHECK(step("se").channels.offset == 4);
  CHECK(step("se").channels.count == 4);
  CHECK(step("se").sliced_output);
  CHECK(step("se").output.buffer == step("dw").output.buffer);
  CHECK(step("se2").gathers.empty());  // a scale from a fully_connected sliced alike
  CHECK(step("m2").gathers.empty());   // equal shapes, sliced alike
  // se3: n is whole (lrn), so the scale's 16 floats are gathered and all channels scaled.
  REQUIRE(step("se3").gathers.size() == 1);
  CHECK(step("se3").gathers[0].charged_layer == layer(plan, "e3"));
  CHECK(step("se3").channels.count == 16);
  CHECK_FALSE(step("se3").sliced_output);
  // Shapes: the scale must be C x 1 x 1 of the first input's channels, or the same shape.
  auto bad = model::model_spec_from_json(nlohmann::json::parse(R"({"name": "b",
    "input": {"channels": 4, "height": 6, "width": 6}, "layers": [
      {"name": "p", "type": "avgpool", "kernel": [1, 6], "stride": 1},
      {"name": "m", "type": "mul", "inputs": ["input", "p"]}]})"),
                                         "bad");
  REQUIRE(bad.ok());
  const Status s = model::infer_shapes(*bad).status();
  CHECK(s.message() ==
        "layers[1] (m): input 'p' is 4x6x1 but 'input' is 4x6x6 (mul needs equal shapes, or a "
        "per-channel scale 4x1x1 as its second input)");
}

TEST_CASE("slices and channel shuffles match the reference over K ranks", "[engine]") {
  const model::ModelPlan plan = plan_from(kShuffle);
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "b"))].out == model::Shape{22, 5, 5});
  check_against_reference(plan, 11);
}

TEST_CASE("a shuffle after a concat and the slices after it exchange nothing more", "[engine]") {
  const model::ModelPlan plan = plan_from(kShuffle);
  auto steps = plan_layer_steps(plan, Partition{1, 3});
  REQUIRE(steps.ok());
  auto step = [&](const char* name) {
    return steps->steps[static_cast<size_t>(layer(plan, name))];
  };
  CHECK(step("cat1").gathers.size() == 2);  // both branches' last conv2d, sliced
  CHECK(step("sh1").gathers.empty());       // the concat's output is whole
  CHECK(step("lo").gathers.empty());
  CHECK(step("hi").gathers.empty());
  CHECK(step("h1").gathers.empty());
  CHECK(step("cat2").gathers.size() == 1);  // h3r only: lo is whole
  CHECK(step("sh2").gathers.empty());
  CHECK_FALSE(step("sh1").sliced_output);
  CHECK_FALSE(step("lo").sliced_output);
  // Bad specs: one line naming the layer and the rule.
  auto bad = [](const char* layers) {
    auto spec = model::model_spec_from_json(
        nlohmann::json::parse(std::string(R"({"name": "b", "input": {"channels": 6, "height": 4,
          "width": 4}, "layers": [)") +
                              layers + "]}"),
        "bad");
    REQUIRE(spec.ok());
    return model::infer_shapes(*spec).status().message();
  };
  CHECK(bad(R"({"name": "s", "type": "channel_shuffle", "groups": 4})") ==
        "layers[0] (s): channel_shuffle groups 4 must be at least 1 and divide the input's 6 "
        "channels");
  CHECK(bad(R"({"name": "s", "type": "slice", "begin": 4, "end": 7})") ==
        "layers[0] (s): slice of channels [4, 7) needs 0 <= begin < end <= the input's 6 channels");
  CHECK(bad(R"({"name": "s", "type": "slice", "begin": 3, "end": 3})") ==
        "layers[0] (s): slice of channels [3, 3) needs 0 <= begin < end <= the input's 6 channels");
}

TEST_CASE("gelu, prelu, upsample, pad and conv_transpose2d match the reference over K ranks",
          "[engine]") {
  const model::ModelPlan plan = plan_from(kUserOps);
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "rp"))].out == model::Shape{12, 13, 18});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "ep"))].out == model::Shape{12, 13, 20});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "t1"))].out == model::Shape{8, 26, 40});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "t2"))].out == model::Shape{8, 52, 42});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "t2"))].parameters == 8 * 2 * 2 * 3 + 8);
  CHECK(max_ranks(plan) == 16);
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "up"))].out == model::Shape{16, 10, 10});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "ub"))].out == model::Shape{12, 10, 15});
  CHECK(plan.layers[static_cast<size_t>(layer(plan, "p1"))].parameters == 16);
  check_against_reference(plan, 13);
  // gelu runs inside the conv2d before it; prelu and upsample on each rank's channels, so K = 3
  // gathers nothing before the global pooling's flatten reaches the fully_connected.
  auto steps = plan_layer_steps(plan, Partition{2, 3});
  REQUIRE(steps.ok());
  auto step = [&](const char* name) {
    return steps->steps[static_cast<size_t>(layer(plan, name))];
  };
  CHECK(step("c1").activation_layer == layer(plan, "g1"));
  CHECK(step("p1").sliced_output);
  CHECK(step("p1").gathers.empty());
  CHECK(step("up").gathers.empty());
  CHECK(step("up").channels.count == 5);  // 16 channels over 3 ranks: 6, 5, 5
  CHECK(step("ub").sliced_output);
  CHECK(step("g2").gathers.empty());
  CHECK(step("rp").gathers.empty());
  CHECK(step("ep").sliced_output);
  CHECK(step("t1").gathers.size() == 1);  // a whole input, like a conv2d
  CHECK(step("t1").activation_layer == layer(plan, "t1r"));
  CHECK(step("t1").out_slice.count == 2);    // 8 output channels over 3 ranks: 3, 3, 2
  CHECK(step("t2").group_slice.count == 1);  // 4 groups over 3 ranks: 2, 1, 1
  CHECK(step("pf").gathers.empty());
  CHECK(step("fc2").gathers.size() == 1);
}

TEST_CASE("layer_norm matches the reference over K ranks; each rank gathers its whole rows",
          "[engine]") {
  // An MLP's LayerNorm (issue 15): the hidden features of each image normalised together.
  const model::ModelPlan plan =
      plan_from(R"({"name": "ln", "input": {"channels": 40, "height": 1, "width": 1},
    "layers": [{"name": "h", "type": "fully_connected", "out": 24},
               {"name": "n", "type": "layer_norm", "epsilon": 1e-3}, {"type": "gelu"},
               {"name": "o", "type": "fully_connected", "out": 7}]})");
  CHECK(plan.layers[1].parameters == int64_t{2} * 24);
  check_against_reference(plan, 17);
  auto steps = plan_layer_steps(plan, Partition{1, 3});
  REQUIRE(steps.ok());
  CHECK(steps->steps[1].gathers.size() == 1);  // h's three slices, made whole on every rank
  CHECK_FALSE(steps->steps[1].sliced_output);
  auto bad = model::model_spec_from_json(
      nlohmann::json::parse(R"({"name": "b", "input": {"channels": 3, "height": 4, "width": 4},
        "layers": [{"name": "n", "type": "layer_norm"}]})"),
      "bad");
  REQUIRE(bad.ok());
  CHECK(model::infer_shapes(*bad).status().message() ==
        "layers[0] (n): layer_norm needs a flat input but gets 3x4x4 (add {\"type\": "
        "\"flatten\"} before it)");
}

TEST_CASE("a last layer smaller than K runs whole on every rank", "[engine]") {
  // A ranking MLP: one score out. K = 2 splits the hidden layer and replicates the last.
  const model::ModelPlan plan =
      plan_from(R"({"name": "rank", "input": {"channels": 64, "height": 1, "width": 1},
    "layers": [{"name": "h", "type": "fully_connected", "out": 32}, {"type": "relu"},
               {"name": "score", "type": "fully_connected", "out": 1}]})");
  CHECK(plan.spec.input == model::Shape{64, 1, 1});
  CHECK(max_ranks(plan) == 32);
  CHECK(validate_partition(plan, Partition{0, 2}).ok());
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::Weights w = model::Weights::seeded(plan, 2);
  const std::vector<float> input = model::seeded_input(plan.spec.input, 2);
  const std::vector<float> ref = serf::engine::testing::reference_forward(plan, w, input);
  for (int ranks : {1, 2, 3, 32}) {
    INFO("K=" << ranks);
    CHECK(max_relative_error(run_unit(**backend, plan, w, input, ranks, 1), ref) <= 1e-5);
  }
  const Status too_many = validate_partition(plan, Partition{0, 33});
  CHECK(too_many.message().find("exceeds the widest layer 'h' (32 outputs") != std::string::npos);
}

TEST_CASE("K > 1 on a model with nothing to split says why", "[engine]") {
  const model::ModelPlan plan = plan_from(R"({"name": "pools", "input": {"channels": 4,
    "height": 8, "width": 8}, "layers": [{"type": "maxpool", "kernel": 2}, {"type": "relu"}]})");
  CHECK(max_ranks(plan) == 1);
  const Status s = validate_partition(plan, Partition{0, 2});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "inter-node parallelism K = 2: model pools has no conv2d or fully_connected layer to "
        "split over ranks (every layer would run whole on every rank); use K = 1");
}
