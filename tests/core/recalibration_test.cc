#include "serf/core/recalibration.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "serf/core/planner.h"

using namespace serf;

namespace {

// K in {1, 2}, T in {1, 2, 4} on 4 nodes x 4 cores, with interference across i.
Profile profile() {
  Profile p;
  p.model = "toy";
  p.hardware = {4, 4};
  for (int k : {1, 2}) {
    for (int t : {1, 2, 4}) {
      for (int i = 1; i * t <= 4; ++i) {
        const double base = 1000.0 * (0.2 + 0.8 / t) * (0.3 + 0.7 / k) + 40.0 * (k - 1);
        p.tuples.push_back({{i, k, t}, base * (1.0 + 0.1 * (i - 1)), 0.02, 50, 0});
      }
    }
  }
  p.reindex();
  return p;
}

double mean_of(const Profile& p, ParallelismTuple t) {
  const TupleStats* s = p.find(t);
  REQUIRE(s != nullptr);
  return s->mean_ms;
}

}  // namespace

TEST_CASE("recalibrate: observed tuples as observed, the rest by their neighbours' drift",
          "[core][recalibration]") {
  const Profile before = profile();
  // (K=1, T=2) runs 20% slow at i = 1, (K=1, T=4) 5% fast at i = 1; nothing is observed at K = 2.
  const std::vector<TupleObservation> seen = {
      {{1, 1, 2}, 1.2 * mean_of(before, {1, 1, 2})},
      {{1, 1, 4}, 0.95 * mean_of(before, {1, 1, 4})},
  };
  auto r = recalibrate(before, seen);
  REQUIRE(r.ok());
  const Profile& after = r->profile;
  CHECK(r->observed == 2);
  CHECK(r->scaled == static_cast<int>(before.tuples.size()) - 2);
  const double k1 = std::sqrt(1.2 * 0.95);  // the geometric mean at K = 1 (and overall)
  CHECK(r->drift == Approx(k1).epsilon(1e-12));
  // Observed: exactly the observation.
  CHECK(mean_of(after, {1, 1, 2}) == Approx(1.2 * mean_of(before, {1, 1, 2})).epsilon(1e-12));
  CHECK(mean_of(after, {1, 1, 4}) == Approx(0.95 * mean_of(before, {1, 1, 4})).epsilon(1e-12));
  // Same (K, T): that family's drift, the interference shape across i kept.
  CHECK(mean_of(after, {2, 1, 2}) == Approx(1.2 * mean_of(before, {2, 1, 2})).epsilon(1e-12));
  CHECK(mean_of(after, {2, 1, 2}) / mean_of(after, {1, 1, 2}) ==
        Approx(mean_of(before, {2, 1, 2}) / mean_of(before, {1, 1, 2})).epsilon(1e-12));
  // Same K, another T: the drift seen at that K.
  CHECK(mean_of(after, {3, 1, 1}) == Approx(k1 * mean_of(before, {3, 1, 1})).epsilon(1e-12));
  // K = 2, never observed: every observation's drift.
  CHECK(mean_of(after, {2, 2, 2}) == Approx(k1 * mean_of(before, {2, 2, 2})).epsilon(1e-12));
  // SCVs are the profile's.
  CHECK(after.find({2, 2, 2})->scv == before.find({2, 2, 2})->scv);
  // No observations: the profile unchanged.
  auto same = recalibrate(before, {});
  REQUIRE(same.ok());
  CHECK(same->scaled == 0);
  CHECK(mean_of(same->profile, {4, 1, 1}) == mean_of(before, {4, 1, 1}));
}

TEST_CASE("recalibrate then re-plan: a uniform drift f scales the table by f at rates / f",
          "[core][recalibration]") {
  const Profile before = profile();
  const double f = 1.25;
  auto r = recalibrate(before, {{{1, 1, 1}, f * mean_of(before, {1, 1, 1})}});
  REQUIRE(r.ok());
  const std::vector<double> rates = {0.5, 1.0, 2.0, 4.0, 6.0};
  std::vector<double> slow_rates;
  for (double x : rates) slow_rates.push_back(x / f);
  auto old_table = plan_table(before, rates, PlanOptions{});
  auto new_table = plan_table(r->profile, slow_rates, PlanOptions{});
  REQUIRE(old_table.ok());
  REQUIRE(new_table.ok());
  REQUIRE(old_table->entries.size() == new_table->entries.size());
  for (size_t k = 0; k < rates.size(); ++k) {
    const TableEntry& a = old_table->entries[k];
    const TableEntry& b = new_table->entries[k];
    REQUIRE(a.stable == b.stable);
    if (!a.stable) continue;
    CHECK(b.config == a.config);
    CHECK(b.prediction.latency_ms == Approx(f * a.prediction.latency_ms).epsilon(1e-9));
  }
}

TEST_CASE("recalibrate rejects what it cannot use, naming it", "[core][recalibration]") {
  const Profile p = profile();
  auto missing = recalibrate(p, {{{1, 8, 1}, 100.0}});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("(i=1, K=8, T=1)") != std::string::npos);
  auto nan = recalibrate(p, {{{1, 1, 1}, std::nan("")}});
  REQUIRE_FALSE(nan.ok());
  CHECK(nan.status().message().find("observed mean") != std::string::npos);
  auto zero = recalibrate(p, {{{1, 1, 1}, 0.0}});
  CHECK_FALSE(zero.ok());
  auto twice = recalibrate(p, {{{1, 1, 1}, 100.0}, {{1, 1, 1}, 110.0}});
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message().find("twice") != std::string::npos);
  // A drift that carries a neighbour beyond the profile's range is refused, not planned with.
  Profile wide = p;
  wide.tuples[0].mean_ms = 1e-3;
  wide.tuples[1].mean_ms = 1e8;
  wide.reindex();
  auto out_of_range = recalibrate(wide, {{wide.tuples[0].tuple, 1e3}});
  CHECK_FALSE(out_of_range.ok());
}
