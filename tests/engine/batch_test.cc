// Batches (issue 16): a batch of b rows through the CPU backend gives, row by row, what each row
// gives alone (within 1e-5), unpartitioned and over K ranks, on every layer kind, a shipped
// convolutional model and a dense model; bad batch sizes are errors.
#include <catch2/catch.hpp>

#include "engine/backend.h"
#include "engine/cpu/gemv.h"
#include "engine/simulated_unit.h"
#include "engine_test_util.h"
#include "model/weights.h"
#include "test_skip.h"

using namespace serf;
using namespace serf::engine;
using serf::engine::testing::kEveryOp;
using serf::engine::testing::kGates;
using serf::engine::testing::kShuffle;
using serf::engine::testing::kUserOps;
using serf::engine::testing::load_shipped;
using serf::engine::testing::max_relative_error;
using serf::engine::testing::plan_from;
using serf::engine::testing::run_batch;

namespace {

// A small ranking MLP: dense layers, one score out (the last layer is replicated when K > 1).
const char* kDense = R"({"name": "dense", "input": {"channels": 40, "height": 1, "width": 1},
 "layers": [
  {"name": "fc1", "type": "fully_connected", "out": 64},
  {"name": "r1", "type": "relu"},
  {"name": "fc2", "type": "fully_connected", "out": 32},
  {"name": "r2", "type": "relu"},
  {"name": "score", "type": "fully_connected", "out": 1}]})";

// A ResNet bottleneck (1x1, 3x3, 1x1 accumulating the residual) and a depthwise 3x3, every
// channel count a multiple of 16; `conv3x3` is the 3x3 layer's window.
std::string bottleneck(const std::string& conv3x3) {
  return R"({"name": "bottleneck", "input": {"channels": 32, "height": 14, "width": 14},
 "layers": [
  {"name": "c0", "type": "conv2d", "out_channels": 64, "kernel": 1},
  {"name": "r0", "type": "relu"},
  {"name": "c1", "type": "conv2d", "out_channels": 32, "kernel": 1},
  {"name": "r1", "type": "relu"},
  {"name": "c2", "type": "conv2d", "out_channels": 32, "kernel": 3, )" +
         conv3x3 + R"(},
  {"name": "r2", "type": "relu"},
  {"name": "c3", "type": "conv2d", "out_channels": 64, "kernel": 1},
  {"name": "sum", "type": "add", "inputs": ["c3", "r0"]},
  {"name": "r3", "type": "relu"},
  {"name": "dw", "type": "conv2d", "out_channels": 64, "kernel": 3, "pad": 1, "groups": 64},
  {"name": "r4", "type": "clip", "min": 0, "max": 6},
  {"name": "gap", "type": "global_avgpool"},
  {"name": "fl", "type": "flatten"},
  {"name": "fc", "type": "fully_connected", "out": 10}]})";
}
// Direct (dilated: no Winograd) and Winograd (stride 1, 32 channels) 3x3 layers.
const std::string kBottleneckDirect = bottleneck(R"("pad": 2, "dilation": 2)");
const std::string kBottleneckWinograd = bottleneck(R"("pad": 1)");

// ResNet's stem and the start of its layer1: a 7x7 convolution of 3 channels (NHWC brgconv, not
// blocked), max pooling in its layout, and two 1x1 convolutions reading the pooled features (the
// block's first layer and its downsample), their sum.
const char* kStem = R"({"name": "stem", "input": {"channels": 3, "height": 32, "width": 32},
 "layers": [
  {"name": "conv1", "type": "conv2d", "out_channels": 64, "kernel": 7, "stride": 2, "pad": 3},
  {"name": "r0", "type": "relu"},
  {"name": "pool", "type": "maxpool", "kernel": 3, "stride": 2, "pad": 1},
  {"name": "c1", "type": "conv2d", "out_channels": 32, "kernel": 1},
  {"name": "r1", "type": "relu"},
  {"name": "c2", "type": "conv2d", "out_channels": 64, "kernel": 1},
  {"name": "down", "type": "conv2d", "out_channels": 64, "kernel": 1, "inputs": ["pool"]},
  {"name": "sum", "type": "add", "inputs": ["c2", "down"]},
  {"name": "r2", "type": "relu"},
  {"name": "gap", "type": "global_avgpool"},
  {"name": "fl", "type": "flatten"},
  {"name": "fc", "type": "fully_connected", "out": 10}]})";

// Row r of a batch of b (input seeded with seed + r) against that input run alone (K = 1, b = 1).
void check_rows(const model::ModelPlan& plan, const std::vector<int>& ranks_list,
                const std::vector<int>& batches) {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::Weights w = model::Weights::seeded(plan, 3);
  const int64_t in_n = plan.spec.input.elements(), out_n = plan.output().elements();
  std::vector<std::vector<float>> alone;
  std::vector<float> rows;
  const int most = *std::max_element(batches.begin(), batches.end());
  for (int r = 0; r < most; ++r) {
    const std::vector<float> x = model::seeded_input(plan.spec.input, 10 + r);
    rows.insert(rows.end(), x.begin(), x.end());
    alone.push_back(run_batch(**backend, plan, w, x, 1, 1, 1));
  }
  for (int ranks : ranks_list) {
    for (int batch : batches) {
      for (int threads : {1, 2}) {
        INFO("K=" << ranks << " T=" << threads << " b=" << batch);
        const std::vector<float> x(rows.begin(), rows.begin() + in_n * batch);
        const std::vector<float> out = run_batch(**backend, plan, w, x, ranks, threads, batch);
        REQUIRE(out.size() == static_cast<size_t>(out_n * batch));
        for (int r = 0; r < batch; ++r) {
          INFO("row " << r);
          const std::vector<float> row(out.begin() + out_n * r, out.begin() + out_n * (r + 1));
          CHECK(max_relative_error(row, alone[static_cast<size_t>(r)], 1e-3) <= 1e-5);
        }
      }
    }
  }
}

// Prepared on one rank (K = 1) at T = 1, 2 and b = 2, 8: the activation reorders each request
// makes (the input's and every change of layout between layers).
void check_activation_reorders(const model::ModelPlan& plan, int want) {
  const model::Weights w = model::Weights::seeded(plan, 1);
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  for (int threads : {1, 2}) {
    for (int batch : {2, 8}) {
      INFO("T=" << threads << " b=" << batch);
      auto prepared = (*backend)->prepare(plan, w, Partition{0, 1}, threads, batch);
      REQUIRE(prepared.ok());
      CHECK((*prepared)->activation_reorders() == want);
    }
  }
}

}  // namespace

TEST_CASE("a batch's rows equal the rows run alone: every layer kind, K = 1..3", "[engine]") {
  check_rows(plan_from(kEveryOp), {1, 2, 3}, {2, 5});
}

TEST_CASE("a batch's rows equal the rows run alone: gates and scales, K = 1..3", "[engine]") {
  check_rows(plan_from(kGates), {1, 2, 3}, {2, 5});
}

TEST_CASE("a batch's rows equal the rows run alone: slices and channel shuffles, K = 1..3",
          "[engine]") {
  check_rows(plan_from(kShuffle), {1, 2, 3}, {2, 5});
}

TEST_CASE("a batch's rows equal the rows run alone: gelu, prelu, upsample, K = 1..3", "[engine]") {
  check_rows(plan_from(kUserOps), {1, 2, 3}, {2, 5});
}

TEST_CASE("a batch's rows equal the rows run alone: dense layers, cifar10", "[engine]") {
  check_rows(plan_from(kDense), {1, 2, 4}, {3, 8});
  check_rows(load_shipped("cifar10"), {1, 3}, {4});
}

TEST_CASE("a batch's rows equal the rows run alone: 1x1, 3x3 and depthwise in nChw16c",
          "[engine]") {
  // The direct variant: oneDNN's Winograd at N = 8 rounds differently from N = 1 (rows up to
  // 2.4e-4 apart on the Winograd variant; it ran in nChw16c before this layout change too).
  check_rows(plan_from(kBottleneckDirect), {1, 2}, {2, 8});
}

TEST_CASE("a batch's 1x1 and 3x3 convolutions keep one blocked layout", "[engine][avx512]") {
  // b > 1, K = 1: nChw16c from the first convolution to the global pooling (oneDNN's jit kernels
  // on AVX-512), so the only reorders are the input's (plain rows in) and the pooled features'
  // (plain rows for fully_connected). Before, the NHWC brgconv kernels and Winograd's nChw16c
  // reordered the activations around every Winograd layer.
  if (!gemv_supported()) SERF_SKIP("no AVX-512 on this CPU: oneDNN's jit nChw16c kernels need it");
  check_activation_reorders(plan_from(kBottleneckWinograd), 2);
}

TEST_CASE("a pooled tensor that two blocked convolutions read is reordered once",
          "[engine][avx512]") {
  // resnet50's stem: the 7x7 convolution and its max pooling run in NHWC; layer1's first 1x1 and
  // its downsample both read the pooled features in nChw16c. Before, each reordered them (4
  // reorders a run); now the pooling's output is stored in nChw16c (3: the input, the pooled
  // features, the global pooling's features). Rows still equal the rows run alone.
  if (!gemv_supported()) SERF_SKIP("no AVX-512 on this CPU: oneDNN's jit nChw16c kernels need it");
  const model::ModelPlan plan = plan_from(kStem);
  check_activation_reorders(plan, 3);
  check_rows(plan, {1, 2}, {2, 8});
}

TEST_CASE("a batch below 1 is refused, and prepared models are cached per batch", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::ModelPlan plan = plan_from(kDense);
  const model::Weights w = model::Weights::seeded(plan, 1);
  auto zero = (*backend)->prepare(plan, w, Partition{0, 1}, 1, 0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().code() == StatusCode::kInvalidArgument);
  CHECK(zero.status().message().find("batch b = 0") != std::string::npos);
  auto one = (*backend)->prepare(plan, w, Partition{0, 1}, 1, 1);
  auto four = (*backend)->prepare(plan, w, Partition{0, 1}, 1, 4);
  auto four_again = (*backend)->prepare(plan, w, Partition{0, 1}, 1, 4);
  REQUIRE((one.ok() && four.ok() && four_again.ok()));
  CHECK((*one)->batch() == 1);
  CHECK((*four)->batch() == 4);
  CHECK(four->get() == four_again->get());
  CHECK(one->get() != four->get());
}

TEST_CASE("a node's batch sizes share one copy of the weights", "[engine]") {
  // As a serving node prepares them (mpi/engine_worker.cc): sizes 1..b of one (K, T).
  for (const model::ModelPlan& plan : {plan_from(kDense), load_shipped("cifar10")}) {
    for (int ranks : {1, 2}) {
      INFO(plan.spec.name << " K=" << ranks);
      auto backend = make_backend("cpu");
      REQUIRE(backend.ok());
      const model::Weights w = model::Weights::seeded(plan, 1);
      std::vector<std::shared_ptr<PreparedModel>> sizes;
      int64_t separate = 0;
      for (int n = 1; n <= 6; ++n) {
        auto prepared = (*backend)->prepare(plan, w, Partition{0, ranks}, 1, n);
        REQUIRE(prepared.ok());
        separate += (*prepared)->resident_weight_bytes();
        sizes.push_back(*prepared);
      }
      const int64_t one = sizes[0]->resident_weight_bytes(),
                    held = (*backend)->resident_weight_bytes();
      CHECK(one > 0);
      CHECK(separate >= 6 * one);
      if (plan.spec.name == "dense") {
        // Fully connected only: the panels are the same at every b, so exactly one copy.
        CHECK(held == one);
        CHECK((*backend)->weight_layouts_beyond_first() == 0);
      } else {
        // Convolutions share theirs unless oneDNN picks another layout at N = n (counted).
        CHECK(held < 2 * one);
        CHECK(((*backend)->weight_layouts_beyond_first() > 0) == (held > one));
      }
      sizes.clear();  // the last holder gone: nothing is held
      CHECK((*backend)->resident_weight_bytes() == 0);
    }
  }
}
