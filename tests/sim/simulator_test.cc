// The simulator against closed forms (M/M/1, M/M/c Erlang C, M/D/1 Pollaczek-Khinchine, GI/M/1,
// M/G/1-PS, an exact birth-death chain), within the batch-means confidence interval.
#include "serf/sim/simulator.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace {

using serf::sim::ServiceLevel;
using serf::sim::ServiceSemantics;
using serf::sim::SimulationOptions;
using serf::sim::SimulationResult;

SimulationOptions options(std::vector<ServiceLevel> levels, double rate_per_s,
                          int64_t n = 1000000) {
  SimulationOptions o;
  o.levels = std::move(levels);
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

// The mean is within two CI half-widths of the exact value, and the CI is tight enough (< 2% of
// the value) for that to mean something.
void check_within_ci(const SimulationResult& r, double exact_ms) {
  INFO("simulated " << r.latency_ms << " +- " << r.latency_ci95_ms << " ms, exact " << exact_ms);
  CHECK(r.latency_ci95_ms < 0.02 * exact_ms);
  CHECK(std::abs(r.latency_ms - exact_ms) <= 2 * r.latency_ci95_ms);
}

double erlang_c(int c, double a) {  // P(wait > 0) in M/M/c with offered load a = lambda/mu
  double term = 1, sum = 1;
  for (int k = 1; k < c; ++k) {
    term *= a / k;
    sum += term;
  }
  const double last = term * a / c / (1 - a / c);
  return last / (sum + last);
}

std::vector<ServiceLevel> flat(int c, double mean_ms, double scv) {
  return std::vector<ServiceLevel>(static_cast<size_t>(c), ServiceLevel{mean_ms, scv});
}

}  // namespace

TEST_CASE("M/M/1: mean and percentiles of the sojourn time", "[sim]") {
  // mu = 100/s, lambda = 70/s: the sojourn time is exponential with rate mu - lambda = 30/s.
  const auto r = run(options(flat(1, 10.0, 1.0), 70.0));
  check_within_ci(r, 1000.0 / 30);
  CHECK(r.p50_ms == Approx(1000.0 * std::log(2.0) / 30).epsilon(0.03));
  CHECK(r.p99_ms == Approx(1000.0 * std::log(100.0) / 30).epsilon(0.03));
  CHECK(r.wait_probability == Approx(0.7).epsilon(0.01));
}

TEST_CASE("M/M/c: Erlang C wait, for both semantics with flat service levels", "[sim]") {
  const int c = 8;
  const double mean_ms = 40, lambda = 170;  // rho = 170 / (8 * 25) = 0.85
  const double a = lambda * mean_ms / 1000, pw = erlang_c(c, a);
  const double wq_ms = 1000.0 * pw / (c * 1000.0 / mean_ms - lambda);
  for (auto sem : {ServiceSemantics::kStart, ServiceSemantics::kShared}) {
    auto o = options(flat(c, mean_ms, 1.0), lambda);
    o.semantics = sem;
    const auto r = run(o);
    INFO(serf::sim::service_semantics_name(sem));
    check_within_ci(r, mean_ms + wq_ms);
    CHECK(r.wait_probability == Approx(pw).epsilon(0.02));
    // P(Wq > t) = C exp(-(c mu - lambda) t)
    CHECK(r.wait_p99_ms ==
          Approx(1000.0 * std::log(pw / 0.01) / (c * 1000.0 / mean_ms - lambda)).epsilon(0.03));
  }
}

TEST_CASE("M/D/1: Pollaczek-Khinchine", "[sim]") {
  const double mean_ms = 5, lambda = 160;  // rho = 0.8
  const double rho = lambda * mean_ms / 1000;
  const auto r = run(options(flat(1, mean_ms, 0.0), lambda));
  check_within_ci(r, mean_ms + rho * mean_ms / (2 * (1 - rho)));
  CHECK(r.service_ms == Approx(mean_ms).epsilon(1e-9));
}

TEST_CASE("M/G/1 with Gamma service (SCV 3): Pollaczek-Khinchine", "[sim]") {
  const double mean_ms = 5, lambda = 120, scv = 3;  // rho = 0.6
  const double rho = lambda * mean_ms / 1000;
  const auto r = run(options(flat(1, mean_ms, scv), lambda, 2000000));
  check_within_ci(r, mean_ms + rho * mean_ms * (1 + scv) / (2 * (1 - rho)));
}

TEST_CASE("GI/M/1 with Gamma arrivals: the exact sigma root", "[sim]") {
  for (double ca2 : {0.25, 4.0}) {
    const double mu = 100, lambda = 75, k = 1 / ca2;
    // sigma = A*(mu (1 - sigma)), A*(s) = (k lambda / (k lambda + s))^k: fixed point from 0.5.
    double sigma = 0.5;
    for (int it = 0; it < 2000; ++it)
      sigma = std::pow(k * lambda / (k * lambda + mu * (1 - sigma)), k);
    auto o = options(flat(1, 1000 / mu, 1.0), lambda, 2000000);
    o.arrival_kind = serf::ArrivalKind::kGamma;
    o.arrival_scv = ca2;
    INFO("arrival SCV " << ca2);
    check_within_ci(run(o), 1000.0 / (mu * (1 - sigma)));
  }
}

TEST_CASE("shared semantics with exponential work is the exact birth-death chain", "[sim]") {
  // Interference: mean_ms(n) grows with n, so the chain's death rate in state n is n / mean_ms(n).
  const std::vector<ServiceLevel> levels = {{10, 1}, {13, 1}, {17, 1}, {22, 1}};
  const double lambda = 150;  // rho = 150 / (4 / 22ms) = 0.825
  const int c = static_cast<int>(levels.size());
  // Unnormalised p_n, then L = sum n p_n and W = L / lambda (Little).
  double p = 1, norm = 1, l = 0;
  for (int n = 1; n < 20000; ++n) {
    const int k = std::min(n, c);
    p *= lambda / 1000 / (k / levels[static_cast<size_t>(k - 1)].mean_ms);
    norm += p;
    l += n * p;
  }
  auto o = options(levels, lambda, 4000000);
  o.semantics = ServiceSemantics::kShared;
  check_within_ci(run(o), 1000.0 * (l / norm) / lambda);
}

TEST_CASE("shared semantics with mean_ms(n) = n m is M/G/1 processor sharing", "[sim]") {
  // Deterministic work; PS is insensitive: W = m / (1 - rho). c = 64 makes the cap irrelevant.
  std::vector<ServiceLevel> levels;
  for (int n = 1; n <= 64; ++n) levels.push_back({4.0 * n, 0.0});
  auto o = options(levels, 150);  // rho = 150 * 4 ms = 0.6
  o.semantics = ServiceSemantics::kShared;
  check_within_ci(run(o), 4.0 / (1 - 0.6));
}

TEST_CASE("start semantics: service time of the number running, itself included", "[sim]") {
  // c = 2 with deterministic levels 10 and 30 ms: a request that starts alone takes 10 ms, one that
  // starts beside another takes 30 ms, so the mean service lies strictly between.
  auto o = options({{10, 0}, {30, 0}}, 10);
  const auto r = run(o);
  CHECK(r.service_ms > 10.5);
  CHECK(r.service_ms < 29.5);
  CHECK(r.p50_ms == Approx(10).epsilon(0.001));  // most start alone at 10 requests/s
  CHECK(r.p999_ms > 30);
  // The shared semantics slows a running request down when another arrives: it differs.
  o.semantics = ServiceSemantics::kShared;
  CHECK(std::abs(run(o).latency_ms - r.latency_ms) > 5 * r.latency_ci95_ms);
}

TEST_CASE("random routing splits the load over the units", "[sim]") {
  // 4 units at 4 x 60/s: each unit is an M/M/1 at 60/s (Poisson splitting).
  auto o = options(flat(1, 10.0, 1.0), 240.0);
  o.units = 4;
  const auto r = run(o);
  check_within_ci(r, 1000.0 / 40);
  CHECK(r.utilization == Approx(0.6));
  CHECK(r.simulated_s == Approx(1000000 / 240.0).epsilon(0.01));
}

TEST_CASE("the simulator is deterministic per seed", "[sim]") {
  auto o = options({{3, 0.5}, {4, 0.5}}, 300, 200000);
  for (auto sem : {ServiceSemantics::kStart, ServiceSemantics::kShared}) {
    o.semantics = sem;
    o.seed = 5;
    const auto a = run(o), b = run(o);
    CHECK(a.latency_ms == b.latency_ms);
    CHECK(a.p99_ms == b.p99_ms);
    o.seed = 6;
    CHECK(run(o).latency_ms != a.latency_ms);
  }
}

TEST_CASE("the simulator refuses unstable loads and bad options", "[sim]") {
  auto unstable = serf::sim::simulate(options(flat(2, 10.0, 1.0), 200.0));  // rho = 1
  REQUIRE_FALSE(unstable.ok());
  CHECK(unstable.status().code() == serf::StatusCode::kInfeasible);
  CHECK_FALSE(serf::sim::simulate(options({}, 10.0)).ok());
  CHECK_FALSE(serf::sim::simulate(options(flat(1, -1.0, 1.0), 10.0)).ok());
  CHECK_FALSE(serf::sim::simulate(options(flat(1, 1.0, 1.0), 10.0, 100)).ok());
}

TEST_CASE("replay: a given sample path is served by hand-checkable rules", "[sim][replay]") {
  using serf::sim::replay_latencies;
  // c = 1, 10 ms: the second request waits 5 ms behind the first; the third finds the unit idle.
  auto one =
      replay_latencies(flat(1, 10.0, 0.0), ServiceSemantics::kStart, 1, {0, 5, 30}, {0, 0, 0});
  REQUIRE(one.ok());
  CHECK(*one == std::vector<double>{10, 15, 10});
  // Two units: the same arrivals on separate units never wait.
  auto two = replay_latencies(flat(1, 10.0, 0.0), ServiceSemantics::kStart, 2, {0, 5}, {0, 1});
  REQUIRE(two.ok());
  CHECK(*two == std::vector<double>{10, 10});
  // c = 2, 10 ms alone, 16 ms together. Shared: the first runs 5 ms alone (half its work), then
  // both advance at 1/16 per ms: the first leaves at 5 + 8 = 13; the second, half done, alone
  // again, leaves at 13 + 5 = 18.
  const std::vector<ServiceLevel> levels{{10.0, 0.0}, {16.0, 0.0}};
  auto shared = replay_latencies(levels, ServiceSemantics::kShared, 1, {0, 5}, {0, 0});
  REQUIRE(shared.ok());
  CHECK(shared->at(0) == Approx(13));
  CHECK(shared->at(1) == Approx(13));
  // Start: the time is fixed when a request starts, by the number running then.
  auto start = replay_latencies(levels, ServiceSemantics::kStart, 1, {0, 5}, {0, 0});
  REQUIRE(start.ok());
  CHECK(*start == std::vector<double>{10, 16});
}

TEST_CASE("replay of a long Poisson path has the simulator's long-run mean", "[sim][replay]") {
  // M/D/1 at rho = 0.6 on 2 units: P-K gives 10 + 0.6 * 10 / (2 * 0.4) = 17.5 ms.
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> gap(0.12);  // per ms: 60/s per unit
  std::uniform_int_distribution<int> unit(0, 1);
  std::vector<double> arrivals;
  std::vector<int> units;
  double t = 0;
  for (int k = 0; k < 400000; ++k) {
    t += gap(rng);
    arrivals.push_back(t);
    units.push_back(unit(rng));
  }
  auto lat = serf::sim::replay_latencies(flat(1, 10.0, 0.0), ServiceSemantics::kShared, 2, arrivals,
                                         units);
  REQUIRE(lat.ok());
  double sum = 0;
  for (double x : *lat) sum += x;
  CHECK(sum / static_cast<double>(lat->size()) == Approx(17.5).epsilon(0.02));
}

TEST_CASE("replay refuses a path it cannot serve", "[sim][replay]") {
  using serf::sim::replay_latencies;
  const auto levels = flat(1, 10.0, 0.0);
  CHECK_FALSE(replay_latencies(levels, ServiceSemantics::kShared, 1, {0, 1}, {0}).ok());
  CHECK_FALSE(replay_latencies(levels, ServiceSemantics::kShared, 1, {5, 1}, {0, 0}).ok());
  CHECK_FALSE(replay_latencies(levels, ServiceSemantics::kShared, 2, {0, 1}, {0, 2}).ok());
  CHECK_FALSE(replay_latencies(levels, ServiceSemantics::kShared, 1, {0, NAN}, {0, 0}).ok());
  CHECK_FALSE(replay_latencies({}, ServiceSemantics::kShared, 1, {0}, {0}).ok());
}
