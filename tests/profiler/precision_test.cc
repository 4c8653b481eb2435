// Measurements that know their precision (MSER-5 warm-up cut, VALID/INVALID verdicts) and the
// calibration cost, measured and projected, on hand-made series and profiles.
#include "profiler/precision.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "profiler/cost.h"
#include "serf/core/profile.h"

using serf::profiler::judge_point;
using serf::profiler::mser5_cut;
using serf::profiler::PrecisionTarget;

namespace {

std::vector<double> normal_series(size_t n, double mean, double sd, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_CASE("MSER-5 cuts a transient and keeps a stationary series", "[precision]") {
  // 150 values decaying from 60 to 10, then 1850 stationary ones around 10.
  std::vector<double> v = normal_series(2000, 10, 1, 7);
  for (size_t k = 0; k < 150; ++k) v[k] += 50.0 * (1.0 - static_cast<double>(k) / 150.0);
  const auto cut = mser5_cut(v);
  CHECK(cut.settled);
  CHECK(cut.requests >= 100);
  CHECK(cut.requests <= 200);
  CHECK(cut.requests % 5 == 0);

  const auto flat = mser5_cut(normal_series(2000, 10, 1, 8));
  CHECK(flat.settled);
  CHECK(flat.requests < 200);
}

TEST_CASE("MSER-5 calls a growing (saturated) series unsettled", "[precision]") {
  std::vector<double> v = normal_series(1000, 0, 1, 9);
  for (size_t k = 0; k < v.size(); ++k) v[k] += 0.5 * static_cast<double>(k);  // a queue growing
  CHECK_FALSE(mser5_cut(v).settled);
  CHECK(mser5_cut({1, 2, 3}).requests == 0);  // fewer than 4 batches: nothing to cut
}

TEST_CASE("the p99 needs 368 requests for a bounded order-statistic CI", "[precision]") {
  CHECK(serf::profiler::min_requests_for_percentile(99) == 368);
  CHECK(serf::profiler::min_requests_for_percentile(90) == 36);
  PrecisionTarget t;
  t.min_duration_s = 0;
  t.min_requests = 1;
  t.precision = 0.5;
  const auto v367 = judge_point(normal_series(367, 10, 0.1, 1), 1, t);
  CHECK_FALSE(v367.percentile_bounded);
  const auto v2000 = judge_point(normal_series(2000, 10, 0.1, 1), 1, t);
  REQUIRE(v2000.percentile_bounded);
  CHECK(v2000.percentile_lo_ms <= v2000.percentile_ms);
  CHECK(v2000.percentile_ms <= v2000.percentile_hi_ms);
  CHECK(v2000.valid);
}

TEST_CASE("a point is VALID only when every condition holds, with each reason named",
          "[precision]") {
  PrecisionTarget t;  // 3 %, 10 s, 100 requests, p99
  const std::vector<double> v = normal_series(2000, 10, 1, 3);
  const auto ok = judge_point(v, 20, t);
  CHECK(ok.valid);
  CHECK(ok.reason_text() == "VALID");
  CHECK(ok.ci95_rel > 0);
  CHECK(ok.ci95_rel < 0.03);
  CHECK(std::fabs(ok.mean_ms - 10) < 0.2);
  CHECK(ok.measured + ok.warmup == 2000);

  const auto short_run = judge_point(v, 5, t);
  CHECK_FALSE(short_run.valid);
  CHECK_THAT(short_run.reason_text(), Catch::Contains("min duration 10 s"));

  t.precision = 0.001;
  const auto imprecise = judge_point(v, 20, t);
  CHECK_FALSE(imprecise.valid);
  CHECK_THAT(imprecise.reason_text(), Catch::Contains("> target 0.1%"));

  t.precision = 0.03;
  const auto failed = judge_point(v, 20, t, 2);
  CHECK_FALSE(failed.valid);
  CHECK_THAT(failed.reason_text(), Catch::Contains("2 request(s) not answered"));

  t.min_requests = 5000;
  const auto few = judge_point(v, 20, t);
  CHECK_FALSE(few.valid);
  CHECK_THAT(few.reason_text(), Catch::Contains("< min 5000"));
}

TEST_CASE("the projected exhaustive cost: points x run length, against the tuples", "[cost]") {
  serf::Profile p;
  p.model = "hand-made";
  p.hardware = {2, 2};
  p.tuples = {{{1, 1, 1}, 10.0, 0.0, 100}, {{2, 1, 1}, 14.0, 0.0, 100}, {{1, 1, 2}, 6.0, 0.0, 100},
              {{1, 2, 1}, 7.0, 0.0, 100},  {{2, 2, 1}, 9.0, 0.0, 100},  {{1, 2, 2}, 4.0, 0.0, 100}};
  p.reindex();
  serf::profiler::ExhaustiveCostOptions o;
  o.nodes = 2;
  o.inter = {1, 2};
  o.rates_per_s = {50, 150, 1000};  // 1000/s saturates every configuration
  o.probe_requests = 20000;
  auto cost = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(cost.ok());
  CHECK(cost->configurations == 6);
  CHECK(cost->levels == 3);
  CHECK(cost->points == 18);
  CHECK(cost->unstable >= 6);
  CHECK(cost->exhaustive_s >= 18 * o.target.min_duration_s);
  // The tuples at the same precision: SCV 0 needs only the minimum, 10 samples: (2 + 10) x
  // mean_ms / i; as the file says, (2 + 100) x mean_ms / i.
  const double per_sample_s = (10.0 + 14.0 / 2 + 6.0 + 7.0 + 9.0 / 2 + 4.0) / 1e3;
  CHECK(cost->tuple_samples == 60);
  CHECK(cost->tuple_profile_s == Approx(12 * per_sample_s));
  CHECK(cost->tuple_profile_as_profiled_s == Approx(102 * per_sample_s));
  CHECK(cost->ratio == Approx(cost->exhaustive_s / (12 * per_sample_s)));
  // Side by side on 2 nodes (serf profile --side-by-side): a K = 1 tuple on both units, 5 of its
  // 10 samples each after 2 warm-up: 7 x (10 + 7 + 6 ms) = 161 ms; the K = 2 ones on the one
  // unit: 12 x (7 + 4.5 + 4 ms) = 186 ms. 347 ms in all.
  CHECK(cost->tuple_profile_side_by_side_s == Approx(0.347));
  CHECK(cost->ratio_side_by_side == Approx(cost->exhaustive_s / 0.347));
  CHECK(cost->longest_tenth_share >= 1.0 / 18 - 1e-12);  // the longest of 18 points
  CHECK(cost->longest_tenth_share <= 1);
  // A noisy tuple needs (1.96 / 0.03)^2 SCV samples: SCV 0.5 -> 2135.
  p.tuples[0].scv = 0.5;
  auto noisy = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(noisy.ok());
  CHECK(noisy->tuple_samples == 50 + 2135);
  CHECK(noisy->tuple_profile_s == Approx(12 * per_sample_s + 2125 * 10.0 / 1e3));
  p.tuples[0].scv = 0;
  // A tighter target costs more: the run length grows like 1 / precision^2 once past the minimum.
  o.target.precision = 0.003;
  auto tight = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(tight.ok());
  CHECK(tight->longest_point_s > 10 * cost->longest_point_s);
  o.rates_per_s.clear();
  CHECK_FALSE(serf::profiler::project_exhaustive_cost(p, o).ok());
}

TEST_CASE("a projected point is charged the answers a VALID point needs, not only its CI",
          "[cost]") {
  // One 10 ms tuple at 1 request/s: the mean's CI is met in a handful of requests, but the
  // runner (judge_point) calls a point VALID only with >= 368 answers (the p99 bounded) after
  // the warm-up: 368 x 1.1 / 1 = 404.8 s, not the 10 s minimum duration.
  serf::Profile p;
  p.model = "hand-made";
  p.hardware = {1, 1};
  p.tuples = {{{1, 1, 1}, 10.0, 0.0, 100}};
  p.reindex();
  serf::profiler::ExhaustiveCostOptions o;
  o.nodes = 1;
  o.inter = {1};
  o.rates_per_s = {1};
  auto cost = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(cost.ok());
  CHECK(cost->points == 1);
  CHECK(cost->floored == 1);
  CHECK(cost->exhaustive_s == Approx(368 * 1.1));
  o.target.min_requests = 500;  // a larger floor of its own
  cost = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(cost.ok());
  CHECK(cost->exhaustive_s == Approx(500 * 1.1));
  o.target.min_requests = 100;
  o.target.percentile = 50;  // bounded with 6 answers: the 100 minimum rules
  o.switch_s = 2;
  cost = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(cost.ok());
  CHECK(cost->exhaustive_s == Approx(2 + 100 * 1.1));
  o.target.min_duration_s = 200;  // the minimum duration over the floor
  cost = serf::profiler::project_exhaustive_cost(p, o);
  REQUIRE(cost.ok());
  CHECK(cost->exhaustive_s == Approx(2 + 200));
}

TEST_CASE("the measured calibration cost: wall times, ratio and the same best configuration",
          "[cost]") {
  serf::Profile p;
  p.tuples = {{{1, 1, 1}, 10.0, 0.0, 100}, {{2, 1, 1}, 14.0, 0.0, 100}};
  p.tuples[0].wall_s = 1.5;
  p.tuples[1].wall_s = 0.5;
  serf::profiler::ModelValidation mv;
  serf::profiler::RateComparison exact, near, off, unstable;
  exact.planner_stable = near.planner_stable = off.planner_stable = true;
  exact.match = exact.within_ci = true;
  near.within_ci = true;  // not the best, but within the CIs
  mv.rates = {exact, near, off, unstable};
  const auto c = serf::profiler::calibration_cost(p, 12, 300, mv);
  CHECK(c.tuples == 2);
  CHECK(c.profile_wall_s == Approx(2.0));
  CHECK(c.points == 12);
  CHECK(c.ratio == Approx(150));
  CHECK(c.rates == 3);  // the unstable pick is not compared
  CHECK(c.same_best == 1);
  CHECK(c.same_best_within_ci == 2);
  CHECK(serf::profiler::calibration_cost(p, 12, 0, mv).ratio == 0);  // unknown: no ratio
}

TEST_CASE("the planner's pick within the measured CIs of the best counts as the same best",
          "[cost]") {
  serf::Profile p;
  p.model = "hand-made";
  p.hardware = {1, 2};
  p.tuples = {{{1, 1, 1}, 10.0, 0.0, 10}, {{2, 1, 1}, 14.0, 0.0, 10}, {{1, 1, 2}, 6.0, 0.0, 10}};
  p.reindex();
  // At 20/s the model picks (1,1,2) (6 ms service). Measured: (2,1,1) 0.3 ms better, CIs 0.5 ms.
  auto pt = [](serf::Configuration c, double mean, double ci) {
    serf::profiler::MeasuredPoint m;
    m.config = c;
    m.rate_per_s = 20;
    m.requests = 100;
    m.mean_latency_ms = mean;
    m.ci95_ms = ci;
    return m;
  };
  auto r = serf::profiler::validate_predictions(
      p, {pt({1, 1, 2}, 7.0, 0.5), pt({2, 1, 1}, 6.7, 0.5)}, 1, {serf::QueueKind::kMdInterf});
  REQUIRE(r.ok());
  REQUIRE(r->models[0].rates.size() == 1);
  const auto& rc = r->models[0].rates[0];
  CHECK(rc.planner_pick == serf::Configuration{1, 1, 2});
  CHECK_FALSE(rc.match);
  CHECK(rc.within_ci);
  CHECK(r->models[0].matches_within_ci == 1);
  // Far outside the CIs: not the same.
  r = serf::profiler::validate_predictions(p, {pt({1, 1, 2}, 9.0, 0.5), pt({2, 1, 1}, 6.7, 0.5)}, 1,
                                           {serf::QueueKind::kMdInterf});
  REQUIRE(r.ok());
  CHECK_FALSE(r->models[0].rates[0].within_ci);
}
