#include "serf/core/planner.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "serf/core/rate_spec.h"
#include "serf/core/sizing.h"

using namespace serf;

namespace {

// A small profile shaped like the example: K in {1, 2}, T in {1, 2, 4}, 4 cores, interference.
Profile small_profile(int nodes = 4) {
  Profile p;
  p.model = "toy";
  p.hardware = {nodes, 4};
  for (int k : {1, 2}) {
    for (int t : {1, 2, 4}) {
      for (int i = 1; i * t <= 4; ++i) {
        const double base = 1000.0 * (0.2 + 0.8 / t) * (0.3 + 0.7 / k) + 40.0 * (k - 1);
        p.tuples.push_back({{i, k, t}, base * (1.0 + 0.1 * (i - 1)), 0.02, 50, 0});
      }
    }
  }
  p.reindex();
  REQUIRE(p.validate().ok());
  return p;
}

// Brute force: the best stable configuration's mean latency on `nodes` at cluster `rate`.
// The best mean latency over every configuration under `queue` (by default the model every planner
// entry point uses when not told: kDefaultQueue), by brute force.
double brute_best_ms(const Profile& p, int nodes, double rate, Configuration* best = nullptr,
                     QueueKind queue = kDefaultQueue) {
  double out = std::numeric_limits<double>::infinity();
  for (const Configuration& c : enumerate_configurations(p, nodes)) {
    auto m = model_for(p, c, nodes, queue);
    REQUIRE(m.ok());
    const Prediction pr = m->predict(c.service, rate / units_for(nodes, c.inter));
    if (pr.stable && pr.latency_ms < out) {
      out = pr.latency_ms;
      if (best) *best = c;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("configurations: c*T <= cores, K <= N, tuples present", "[core][planner]") {
  Profile p = small_profile();
  // Per K: T=1 -> c 1..4, T=2 -> 1..2, T=4 -> 1: 7; two K values.
  CHECK(enumerate_configurations(p, 4).size() == 14);
  CHECK(enumerate_configurations(p, 1).size() == 7);  // K = 2 needs 2 nodes
  // A missing tuple cuts its family at the gap.
  std::vector<TupleStats> kept;
  for (const TupleStats& s : p.tuples) {
    if (!(s.tuple == ParallelismTuple{3, 1, 1})) kept.push_back(s);
  }
  p.tuples = kept;
  p.reindex();
  CHECK(enumerate_configurations(p, 4).size() == 12);
  auto bad = model_for(p, {4, 1, 1}, 4, QueueKind::kMdInterf);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("(i=3, K=1, T=1)"));
  CHECK_THAT(model_for(p, {2, 1, 4}, 4, QueueKind::kMdInterf).status().message(),
             Catch::Contains("c*T = 8"));
  CHECK_THAT(model_for(p, {1, 8, 1}, 4, QueueKind::kMdInterf).status().message(),
             Catch::Contains("K = 8"));
}

TEST_CASE("plan_table picks the best configuration at every rate", "[core][planner]") {
  const Profile p = small_profile();
  std::vector<double> rates;
  for (int r = 1; r <= 60; ++r) rates.push_back(0.25 * r);
  auto table = plan_table(p, rates, 0, QueueKind::kMdInterf, false);
  REQUIRE(table.ok());
  CHECK(table->nodes == 4);
  CHECK(table->objective == "mean");
  REQUIRE(table->entries.size() == rates.size());
  bool some_unstable = false;
  for (const TableEntry& e : table->entries) {
    Configuration best;
    const double want = brute_best_ms(p, 4, e.rate_per_s, &best, QueueKind::kMdInterf);
    if (!std::isfinite(want)) {
      CHECK_FALSE(e.stable);
      some_unstable = true;
      continue;
    }
    REQUIRE(e.stable);
    CHECK(e.prediction.latency_ms == Approx(want).epsilon(1e-12));
    CHECK(e.units == units_for(4, e.config.inter));
    CHECK(e.unit_rate_per_s == Approx(e.rate_per_s / e.units));
  }
  CHECK(some_unstable);  // 15/s overloads 4 nodes
  // Low load: the fastest single request (K = 2, T = 4); the choice changes with load.
  CHECK(table->entries.front().config == Configuration{1, 2, 4});
  CHECK_FALSE(table->entries[30].config == table->entries.front().config);

  // keep_all (no pruning) chooses the same and keeps every prediction.
  auto all = plan_table(p, rates, 0, QueueKind::kMdInterf, true);
  REQUIRE(all.ok());
  REQUIRE(all->configurations.size() == 14);
  for (size_t r = 0; r < rates.size(); ++r) {
    CHECK(all->entries[r].stable == table->entries[r].stable);
    CHECK(all->entries[r].config == table->entries[r].config);
  }
  auto m = model_for(p, all->configurations[3], 4, QueueKind::kMdInterf);
  REQUIRE(m.ok());
  const Prediction direct = m->predict(all->configurations[3].service,
                                       rates[5] / units_for(4, all->configurations[3].inter));
  CHECK(all->predictions[3][5].latency_ms == Approx(direct.latency_ms).epsilon(1e-12));
}

TEST_CASE("lookup returns the nearest level at or above the rate", "[core][planner]") {
  auto table = plan_table(small_profile(), {1.0, 2.0, 4.0}, 0, QueueKind::kMdInterf, false);
  REQUIRE(table.ok());
  CHECK(table->lookup(0.1).entry->rate_per_s == 1.0);
  CHECK(table->lookup(1.0).entry->rate_per_s == 1.0);
  CHECK(table->lookup(1.5).entry->rate_per_s == 2.0);
  CHECK_FALSE(table->lookup(4.0).beyond_table);
  const auto beyond = table->lookup(9.0);
  CHECK(beyond.entry->rate_per_s == 4.0);
  CHECK(beyond.beyond_table);
  CHECK(ConfigurationTable{}.lookup(1.0).entry == nullptr);
}

namespace {
// An objective that charges 1 s per node a request uses: it must steer the choice to K = 1.
class NodeHungryPenalty : public Objective {
 public:
  std::string name() const override { return "mean+node-penalty"; }
  double score_ms(const ConfigurationFamily& f, int, double, const Prediction& p) const override {
    return p.stable ? p.latency_ms + 1000.0 * f.inter : std::numeric_limits<double>::infinity();
  }
};
}  // namespace

TEST_CASE("the objective is pluggable", "[core][planner]") {
  NodeHungryPenalty objective;
  PlanOptions options;
  options.objective = &objective;
  auto table = plan_table(small_profile(), {0.5, 1.0}, options);
  REQUIRE(table.ok());
  CHECK(table->objective == "mean+node-penalty");
  for (const TableEntry& e : table->entries) {
    CHECK(e.config.inter == 1);
    CHECK(e.score_ms == Approx(e.prediction.latency_ms + 1000.0));
  }
}

TEST_CASE("plan rejects bad rates and impossible clusters", "[core][planner]") {
  const Profile p = small_profile();
  CHECK_FALSE(plan_table(p, {}, 0, QueueKind::kMdInterf, false).ok());
  CHECK_FALSE(plan_table(p, {2.0, 1.0}, 0, QueueKind::kMdInterf, false).ok());
  CHECK_FALSE(plan_table(p, {0.0}, 0, QueueKind::kMdInterf, false).ok());
  CHECK_FALSE(plan_table(p, {1.0}, -3, QueueKind::kMdInterf, false).ok());
  Profile no_single = p;
  no_single.hardware.cores_per_node = 0;  // nothing fits
  CHECK_FALSE(plan_table(no_single, {1.0}, 0, QueueKind::kMdInterf, false).ok());
}

TEST_CASE("unit capacity matches M/M/1 in closed form", "[core][sizing]") {
  // M/M/1 with mu = 10/s: W = 1/(mu - lambda) <= 0.25 s  <=>  lambda <= 6/s.
  auto model = QueueModel::Create(QueueKind::kMmc, {100.0});
  REQUIRE(model.ok());
  const ConfigurationFamily fam{1, 1, 1, std::move(model).value(), {}, 1, {}, {}};
  CHECK(unit_capacity_per_s(fam, 1, 250.0, mean_latency_objective()) == Approx(6.0).epsilon(1e-9));
  CHECK(unit_capacity_per_s(fam, 1, 99.0, mean_latency_objective()) == 0.0);
}

TEST_CASE("size_for_slo finds the fewest nodes", "[core][sizing]") {
  const Profile p = small_profile();
  for (double rate : {0.5, 3.0, 10.0, 40.0}) {
    auto r = size_for_slo(p, rate, 800.0, 256);
    REQUIRE(r.ok());
    CHECK(r->feasible);
    CHECK(r->prediction.latency_ms <= 800.0);
    CHECK(r->prediction.latency_ms == Approx(brute_best_ms(p, r->nodes, rate)).epsilon(1e-12));
    if (r->nodes > 1) CHECK(brute_best_ms(p, r->nodes - 1, rate) > 800.0);
    // Capacity of that many nodes is at least the rate, and of one node fewer below it.
    auto cap = capacity(p, 800.0, r->nodes);
    REQUIRE(cap.ok());
    CHECK(cap->rate_per_s >= rate * (1 - 1e-9));
    if (r->nodes > 1) {
      auto less = capacity(p, 800.0, r->nodes - 1);
      CHECK((!less.ok() || less->rate_per_s < rate));
    }
  }
}

TEST_CASE("size_for_slo reports infeasible with the best latency reachable", "[core][sizing]") {
  const Profile p = small_profile();
  auto r = size_for_slo(p, 2.0, 100.0, 64);  // no request is served in 100 ms
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInfeasible);
  CHECK(r.status().exit_code() == 3);
  CHECK_THAT(r.status().message(), Catch::Contains("best reachable is"));
  auto rows = size_for_rates(p, {1.0, 2.0}, 100.0, 64);
  REQUIRE(rows.ok());
  CHECK_FALSE((*rows)[0].feasible);
  CHECK((*rows)[0].stable);
  CHECK((*rows)[0].score_ms > 100.0);
  CHECK_FALSE(size_for_slo(p, 1.0, -5.0, 64).ok());
  CHECK(size_for_slo(p, 1.0, -5.0, 64).status().exit_code() == 2);
}

TEST_CASE("capacity is where the best latency reaches the SLO", "[core][sizing]") {
  const Profile p = small_profile();
  auto cap = capacity(p, 900.0, 4);
  REQUIRE(cap.ok());
  CHECK(cap->score_ms <= 900.0);
  CHECK(cap->score_ms == Approx(900.0).epsilon(1e-6));
  CHECK(brute_best_ms(p, 4, cap->rate_per_s * (1 + 1e-6)) > 900.0);
  auto none = capacity(p, 50.0, 4);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::kInfeasible);
}

TEST_CASE("rate specs: lists and inclusive ranges", "[core][rates]") {
  auto list = parse_rate_spec("3,1,2.5");
  REQUIRE(list.ok());
  CHECK(*list == std::vector<double>{1, 2.5, 3});
  auto range = parse_rate_spec("0.1:1:0.1");
  REQUIRE(range.ok());
  REQUIRE(range->size() == 10);
  CHECK(range->back() == 1.0);
  CHECK((*range)[2] == Approx(0.3));
  auto coarse = parse_rate_spec("1:10:4");
  REQUIRE(coarse.ok());
  CHECK(*coarse == std::vector<double>{1, 5, 9});
  CHECK(parse_rate_spec("5").ok());
  for (const char* bad : {"", "a,b", "1,,2", "-1", "0", "1:2", "1:0.5:0.1", "1:10:0", "nan", "inf",
                          "1,1", "1:2:3:4", "1e-400", "0:1:0.1", "1:1e9:1e-3",
                          // strtod took a leading space and hex (session 26)
                          " 1", "1, 2", "0x10", "1:0x10:1", "5 "}) {
    INFO(bad);
    CHECK_FALSE(parse_rate_spec(bad).ok());
  }
}
