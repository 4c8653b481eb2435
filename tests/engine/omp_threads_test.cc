// Checks that oneDNN (OpenMP runtime) honours the per-thread thread count our Executable sets:
// c slots with T threads each must really run T threads each. libgomp's GOMP_parallel (what
// `#pragma omp parallel` compiles to) is interposed here: this executable's definition wins over
// libgomp's for libdnnl's calls, records the team size asked for by the calling thread, and
// forwards to the real one.
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <thread>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine_test_util.h"
#include "model/weights.h"

namespace {
thread_local unsigned max_team_requested = 0;
thread_local unsigned parallel_regions = 0;
thread_local unsigned wide_regions = 0;  // regions of more than one thread
}  // namespace

extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  using Real = void (*)(void (*)(void*), void*, unsigned, unsigned);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "GOMP_parallel"));
  ++parallel_regions;
  // num_threads 0 means "the ICV": what omp_get_max_threads() says in this thread.
  max_team_requested = std::max(max_team_requested, num_threads);
  const unsigned team =
      num_threads > 0 ? num_threads : static_cast<unsigned>(omp_get_max_threads());
  if (team > 1) ++wide_regions;
  real(fn, data, num_threads, flags);
}

using namespace serf;
using namespace serf::engine;

TEST_CASE("each slot's oneDNN work uses that slot's thread count", "[engine]") {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::ModelPlan plan = serf::engine::testing::load_shipped("cifar10");
  const model::Weights w = model::Weights::seeded(plan, 5);
  const std::vector<float> input = model::seeded_input(plan.spec.input, 5);

  // Two slots side by side from two threads, with T = 1 and T = 2.
  unsigned team[3] = {0, 0, 0}, regions[3] = {0, 0, 0};
  std::atomic<int> failed{0};
  auto serve = [&](int threads) {
    auto prepared = (*backend)->prepare(plan, w, Partition{0, 1}, threads);
    if (!prepared.ok()) return ++failed, void();
    auto slot = (*prepared)->new_slot();
    if (!slot.ok()) return ++failed, void();
    std::vector<float> out(plan.output().elements());
    LocalExchange local;
    max_team_requested = 0;
    parallel_regions = 0;
    for (int i = 0; i < 5; ++i) {
      if (!(*slot)->run(input.data(), out.data(), local, nullptr).ok()) ++failed;
    }
    team[threads] = max_team_requested;
    regions[threads] = parallel_regions;
  };
  std::thread one(serve, 1), two(serve, 2);
  one.join();
  two.join();
  CHECK(failed == 0);
  INFO("T=1: " << regions[1] << " regions, largest team " << team[1] << "; T=2: " << regions[2]
               << " regions, largest team " << team[2]);
  CHECK(team[1] <= 1);  // oneDNN runs serially (no region, or a team of 1)
  CHECK(regions[2] > 0);
  CHECK(team[2] == 2);
}

namespace {

// Per layer name: the threads it ran on in one run of cifar10 at T threads and batch b (0: fused
// into another layer, or a view), and the regions of more than one thread that run opened.
std::map<std::string, int> layer_threads(int threads, int batch, unsigned* wide) {
  auto backend = make_backend("cpu");
  REQUIRE(backend.ok());
  const model::ModelPlan plan = serf::engine::testing::load_shipped("cifar10");
  const model::Weights w = model::Weights::seeded(plan, 5);
  std::vector<float> input;
  for (int r = 0; r < batch; ++r) {
    const std::vector<float> row = model::seeded_input(plan.spec.input, 5 + r);
    input.insert(input.end(), row.begin(), row.end());
  }
  auto prepared = (*backend)->prepare(plan, w, Partition{0, 1}, threads, batch);
  REQUIRE(prepared.ok());
  auto slot = (*prepared)->new_slot();
  REQUIRE(slot.ok());
  std::vector<float> out(static_cast<size_t>(plan.output().elements() * batch));
  LocalExchange local;
  LayerTimings timings;
  timings.resize(plan.layers.size());
  REQUIRE((*slot)->run(input.data(), out.data(), local, &timings).ok());  // warm-up
  wide_regions = 0;
  REQUIRE((*slot)->run(input.data(), out.data(), local, &timings).ok());
  *wide = wide_regions;
  std::map<std::string, int> by_name;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    by_name[plan.spec.layers[i].name] = timings.threads[i];
  }
  return by_name;
}

}  // namespace

TEST_CASE("layers too small for T threads run on fewer (cifar10 at T = 2)", "[engine]") {
  unsigned wide = 0;
  // Batch 1: only the two convolutions (4.9M and 23M multiply-adds) give each thread 1M; the
  // pools and LRNs (14-80K floats), fc1 (0.6M multiply-adds), fc2 and softmax do not.
  const auto one = layer_threads(2, 1, &wide);
  CHECK(one.at("conv1") == 2);
  CHECK(one.at("conv2") == 2);
  for (const char* small : {"pool1", "norm1", "norm2", "pool2", "fc1", "fc2", "prob"}) {
    INFO(small);
    CHECK(one.at(small) == 1);
  }
  CHECK(one.at("relu1") == 0);    // fused into conv1
  CHECK(one.at("flatten") == 0);  // a view
  // The small layers open no team: at most a few regions each for the two convolutions, not one
  // for each of the nine steps.
  INFO("regions of 2 threads in one request: " << wide);
  CHECK(wide > 0);
  CHECK(wide < 9);

  // A batch of 8 is 8 times the work: the pools, LRNs and fc1 split too; fc2 (15K
  // multiply-adds) and softmax (160 floats) still do not.
  const auto eight = layer_threads(2, 8, &wide);
  for (const char* big : {"conv1", "conv2", "pool1", "norm1", "norm2", "pool2", "fc1"}) {
    INFO(big);
    CHECK(eight.at(big) == 2);
  }
  CHECK(eight.at("fc2") == 1);
  CHECK(eight.at("prob") == 1);

  // T = 1: everything on one thread, and no team at all.
  const auto serial = layer_threads(1, 8, &wide);
  for (const auto& [name, t] : serial) {
    INFO(name);
    CHECK((t == 1 || t == 0));
  }
  CHECK(wide == 0);
}

TEST_CASE("step_threads: work per thread, this rank's share, never below 1 or above T",
          "[engine]") {
  using serf::engine::cpu::step_threads;
  LayerStep conv;
  conv.kind = model::LayerKind::kConv2d;
  conv.out_slice = {0, 64};
  model::LayerInfo info;
  info.out = {64, 16, 16};
  info.ins = {{64, 16, 16}};
  info.in = info.ins.front();
  info.connections = 3 << 20;  // 3M multiply-adds
  CHECK(step_threads(conv, info, 1, 1) == 1);
  CHECK(step_threads(conv, info, 1, 2) == 2);
  CHECK(step_threads(conv, info, 1, 4) == 3);  // 1M each for 3 threads, not 4
  CHECK(step_threads(conv, info, 2, 4) == 4);
  conv.out_slice = {0, 16};  // K = 4: this rank computes a quarter, 0.75M
  CHECK(step_threads(conv, info, 1, 2) == 1);
  conv.replicated = true;  // every rank computes it whole
  CHECK(step_threads(conv, info, 1, 2) == 2);

  LayerStep pool;
  pool.kind = model::LayerKind::kMaxPool;
  model::LayerInfo small;
  small.ins = {{64, 15, 15}};
  small.in = small.ins.front();
  small.out = {64, 7, 7};  // 14,400 + 3,136 floats
  CHECK(step_threads(pool, small, 1, 2) == 1);
  CHECK(step_threads(pool, small, 8, 2) == 2);  // 140K floats: 70K each
  pool.channels = {0, 16};                      // a quarter of the channels
  CHECK(step_threads(pool, small, 8, 2) == 1);

  LayerStep view;
  view.noop = true;
  CHECK(step_threads(view, info, 64, 4) == 1);
}
