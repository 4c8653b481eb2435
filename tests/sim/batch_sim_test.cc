// The simulator's batching (a free slot takes up to b waiting requests) against the exact
// single-slot bulk queue, the unbatched simulator, and hand-checkable delays.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "serf/core/batch_queue.h"
#include "serf/sim/simulator.h"

namespace {

using serf::ServiceLevel;
using serf::ServiceTable;
using serf::sim::SimulationOptions;
using serf::sim::SimulationResult;

SimulationOptions batched(const ServiceTable& table, double rate_per_s, int64_t n = 1000000) {
  SimulationOptions o;
  o.batching = table;
  o.rate_per_s = rate_per_s;
  o.requests = n;
  o.seed = 42;
  return o;
}

SimulationResult run(const SimulationOptions& o) {
  auto r = serf::sim::simulate(o);
  REQUIRE(r.ok());
  return *r;
}

// levels[n - 1]: a batch of n on the single slot.
ServiceTable single_slot(const std::vector<ServiceLevel>& levels) {
  return *ServiceTable::Create(1, static_cast<int>(levels.size()), levels);
}

}  // namespace

TEST_CASE("batching, one slot: the exact bulk queue (M/G^(b)/1, size-dependent service)",
          "[sim][batch]") {
  const std::vector<std::vector<ServiceLevel>> cases = {
      {{10, 0}, {12, 0}, {14, 0}, {16, 0}},
      {{10, 0.3}, {12, 0.2}, {14, 0.1}, {16, 0.5}},
      {{5, 1}, {9, 1}, {20, 1}},
      {{10, 0}, {13, 0}, {16, 0}, {19, 0}, {22, 0}, {25, 0}, {28, 0}, {31, 0}},
  };
  for (const auto& levels : cases) {
    for (double rho : {0.3, 0.75}) {
      const double rate = rho * static_cast<double>(levels.size()) * 1000.0 / levels.back().mean_ms;
      // Exponential service (the third case) needs longer runs for the same precision.
      const int64_t n = levels.front().scv == 1 ? 6000000 : 2000000;
      const SimulationResult r = run(batched(single_slot(levels), rate, n));
      const serf::BatchPrediction exact = serf::bulk_single_slot(levels, rate);
      REQUIRE(exact.stable);
      INFO("b = " << levels.size() << ", rho = " << rho << ": simulated " << r.latency_ms << " +- "
                  << r.latency_ci95_ms << ", exact " << exact.latency_ms);
      CHECK(r.latency_ci95_ms < 0.02 * exact.latency_ms);
      CHECK(std::abs(r.latency_ms - exact.latency_ms) <= 2.5 * r.latency_ci95_ms);
      CHECK(r.service_ms == Approx(exact.service_ms).epsilon(0.02));
      CHECK(r.utilization == Approx(rho).epsilon(1e-12));
    }
  }
}

TEST_CASE("batching with b = 1 is the unbatched simulator, draw for draw", "[sim][batch]") {
  const std::vector<ServiceLevel> levels = {{10, 0.2}, {11, 0.2}, {13, 0.2}};
  SimulationOptions plain;
  plain.levels = levels;
  plain.rate_per_s = 0.8 * 3 * 1000.0 / 13;
  plain.requests = 200000;
  plain.seed = 9;
  const SimulationOptions b1 = [&] {
    SimulationOptions o = batched(*ServiceTable::Uniform(levels, 1), plain.rate_per_s, 200000);
    o.seed = 9;
    return o;
  }();
  const SimulationResult a = run(plain), b = run(b1);
  CHECK(a.latency_ms == b.latency_ms);
  CHECK(a.p99_ms == b.p99_ms);
  CHECK(a.wait_probability == b.wait_probability);
}

TEST_CASE("batching: batches form only when requests wait; b x more capacity", "[sim][batch]") {
  // c = 2, a batch costs the same at any size: at a load that one-request batches could not carry
  // (3x their capacity) the unit is stable and the mean service is the level's.
  const std::vector<ServiceLevel> levels = {{10, 0}, {10, 0}};
  const auto table = *ServiceTable::Uniform(levels, 8);
  const SimulationResult r = run(batched(table, 3 * 2 * 100.0, 400000));
  CHECK(r.utilization == Approx(3.0 / 8.0));
  CHECK(r.service_ms == Approx(10.0).epsilon(1e-9));
  CHECK(r.latency_ms < 30.0);
  // At a vanishing load nobody waits: every request is a batch of one.
  const SimulationResult light = run(batched(table, 0.5, 20000));
  CHECK(light.wait_probability < 0.01);
}

TEST_CASE("batching: a max batch delay holds a lone request up to D", "[sim][batch]") {
  // One slot, b = 2, 10 ms per batch, 5 ms delay, 0.1 requests/s: each request waits D alone.
  const auto table = single_slot({{10, 0}, {10, 0}});
  SimulationOptions o = batched(table, 0.1, 20000);
  o.max_batch_delay_ms = 5.0;
  const SimulationResult r = run(o);
  CHECK(r.latency_ms == Approx(15.0).epsilon(0.002));
  CHECK(r.wait_ms == Approx(5.0).epsilon(0.01));
  // A full batch goes at once: deterministic arrivals 6 ms apart and D = 100 ms: requests leave
  // in pairs, the first of a pair waiting 6 ms for the second (a pair every 12 ms, served in 10).
  SimulationOptions pairs = batched(table, 1000.0 / 6.0, 20000);
  pairs.arrival_kind = serf::ArrivalKind::kDeterministic;
  pairs.arrival_scv = 0;
  pairs.max_batch_delay_ms = 100.0;
  const SimulationResult p = run(pairs);
  CHECK(p.service_ms == Approx(10.0));
  CHECK(p.wait_ms == Approx(3.0).epsilon(1e-6));  // half wait 6 ms, half none
}

TEST_CASE("batching: bad options are refused", "[sim][batch]") {
  const auto table = single_slot({{10, 0}, {12, 0}});
  SimulationOptions o = batched(table, 100.0, 20000);
  o.semantics = serf::sim::ServiceSemantics::kShared;
  CHECK_FALSE(serf::sim::simulate(o).ok());
  o = batched(table, 100.0, 20000);
  o.max_batch_delay_ms = -1;
  CHECK_FALSE(serf::sim::simulate(o).ok());
  o = batched(table, 2 * 1000.0 / 12 * 1.01, 20000);  // rho 1.01
  CHECK(serf::sim::simulate(o).status().code() == serf::StatusCode::kInfeasible);
  SimulationOptions plain;
  plain.levels = {{10, 0}};
  plain.rate_per_s = 10;
  plain.requests = 20000;
  plain.max_batch_delay_ms = 1;
  CHECK_FALSE(serf::sim::simulate(plain).ok());
}
