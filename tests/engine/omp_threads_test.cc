// Checks that oneDNN (OpenMP runtime) honours the per-thread thread count our Executable sets:
// c slots with T threads each must really run T threads each. libgomp's GOMP_parallel (what
// `#pragma omp parallel` compiles to) is interposed here: this executable's definition wins over
// libgomp's for libdnnl's calls, records the team size asked for by the calling thread, and
// forwards to the real one.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "engine/backend.h"
#include "engine_test_util.h"
#include "model/weights.h"

namespace {
thread_local unsigned max_team_requested = 0;
thread_local unsigned parallel_regions = 0;
}  // namespace

extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  using Real = void (*)(void (*)(void*), void*, unsigned, unsigned);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "GOMP_parallel"));
  ++parallel_regions;
  // num_threads 0 means "the ICV": what omp_get_max_threads() says in this thread.
  max_team_requested = std::max(max_team_requested, num_threads);
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
