#include "serf/core/idle_penalty.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "serf/core/planner.h"

using namespace serf;

TEST_CASE("idle delta: linear in log gap between points, constant beyond", "[core][idle]") {
  const std::vector<IdlePoint> pts = {{0.1, 0.1, 5}, {10, 0.3, 5}};
  CHECK(idle_delta_ms(pts, 1.0) == Approx(0.2));
  CHECK(idle_delta_ms(pts, 0.01) == Approx(0.1));
  CHECK(idle_delta_ms(pts, 100) == Approx(0.3));
  CHECK(idle_delta_ms({}, 1.0) == 0.0);
}

TEST_CASE("idle penalty: the mean over exponential gaps", "[core][idle]") {
  CHECK(idle_penalty_mean_ms({{1, 0.25, 3}}, 500) == Approx(0.25));
  CHECK(idle_penalty_mean_ms({}, 500) == 0.0);
  CHECK(idle_penalty_mean_ms({{1, 0.25, 3}}, 0) == 0.0);
  // Against a fine trapezoid integral of delta(g) * rate * exp(-rate g).
  const std::vector<IdlePoint> pts = {{0.1, 0.05, 5}, {1, 0.15, 5}, {10, 0.4, 5}};
  for (double rate : {50.0, 500.0, 5000.0}) {
    const double mean_gap = 1000.0 / rate;
    double sum = 0, dg = mean_gap / 20000.0;
    for (int j = 0; j < 400000; ++j) {
      const double g0 = j * dg, g1 = g0 + dg;
      const double f0 = idle_delta_ms(pts, g0) * std::exp(-g0 / mean_gap);
      const double f1 = idle_delta_ms(pts, g1) * std::exp(-g1 / mean_gap);
      sum += 0.5 * (f0 + f1) * dg / mean_gap;
    }
    CHECK(idle_penalty_mean_ms(pts, rate) == Approx(sum).epsilon(0.01));
  }
}

// A toy profile on 1 node x 2 cores: (1, 1, 1) at 0.4 ms, and (2, 1, 1) at 0.5 ms when `two`.
Profile toy_profile(bool two) {
  Profile p;
  p.model = "toy";
  p.hardware = {1, 2};
  p.tuples.push_back({{1, 1, 1}, 0.4, 0.0, 50, 0});
  if (two) p.tuples.push_back({{2, 1, 1}, 0.5, 0.0, 50, 0});
  p.reindex();
  return p;
}

TEST_CASE("idle penalty in the prediction: c = 1 is M/D/1 with the penalty as service",
          "[core][idle]") {
  Profile p = toy_profile(true);
  const Configuration one{1, 1, 1};
  auto plain = family_for(p, one, 1, QueueKind::kMdInterf);
  REQUIRE(plain.ok());
  const double rate = 800;  // requests/s: rho = 0.32 without the penalty
  const Prediction before = plain->predict(1, rate);
  const double s0 = 0.4e-3;
  CHECK(before.latency_ms == Approx(1e3 * (s0 + rate * s0 * s0 / (2 * (1 - rate * s0)))));
  // A constant penalty d paid by the arrivals that find the slot free (1 - rho'): the service
  // S' = S + (1 - lambda S') d, so S' = (S + d) / (1 + lambda d); the wait is M/D/1's at S'.
  const double d = 0.15e-3;
  p.tuples[0].idle = {{1.0, 1e3 * d, 10}};
  auto with = family_for(p, one, 1, QueueKind::kMdInterf);
  REQUIRE(with.ok());
  const Prediction after = with->predict(1, rate);
  const double s1 = (s0 + d) / (1 + rate * d);
  REQUIRE(after.stable);
  CHECK(after.service_ms == Approx(1e3 * s1).epsilon(1e-3));
  CHECK(after.latency_ms ==
        Approx(1e3 * (s1 + rate * s1 * s1 / (2 * (1 - rate * s1)))).epsilon(1e-3));
  // The planner's families carry it too (build_families), and c = 2 without idle points is as
  // before.
  auto families = build_families(p, 1, QueueKind::kMdInterf);
  REQUIRE(families.ok());
  REQUIRE(families->size() == 1);
  CHECK(families->front().predict(1, rate).latency_ms == Approx(after.latency_ms));
  auto two = family_for(p, {2, 1, 1}, 1, QueueKind::kMdInterf);
  REQUIRE(two.ok());
  auto model_two = model_for(p, {2, 1, 1}, 1, QueueKind::kMdInterf);
  REQUIRE(model_two.ok());
  CHECK(families->front().predict(2, rate).latency_ms ==
        Approx(model_two->predict(2, rate).latency_ms));
  CHECK(two->predict(2, rate).latency_ms == Approx(model_two->predict(2, rate).latency_ms));
}

TEST_CASE("busy excess in the prediction: c = 1 is M/D/1 with both penalties as service",
          "[core][idle]") {
  Profile p = toy_profile(false);
  const Configuration one{1, 1, 1};
  const double rate = 800, s0 = 0.4e-3, d = 0.15e-3, e = 0.05e-3;
  // The free-slot arrivals (1 - rho') pay d, the busy ones (rho') e: S' = S + (1 - lambda S') d
  // + lambda S' e, so S' = (S + d) / (1 + lambda (d - e)); the wait is M/D/1's at S'.
  p.tuples[0].idle = {{1.0, 1e3 * d, 10, 1e3 * e}};
  auto fam = family_for(p, one, 1, QueueKind::kMdInterf);
  REQUIRE(fam.ok());
  const Prediction with = fam->predict(1, rate);
  const double s1 = (s0 + d) / (1 + rate * (d - e));
  REQUIRE(with.stable);
  CHECK(with.service_ms == Approx(1e3 * s1).epsilon(1e-3));
  CHECK(with.latency_ms ==
        Approx(1e3 * (s1 + rate * s1 * s1 / (2 * (1 - rate * s1)))).epsilon(1e-3));
  // More than without the busy term, and the busy term alone (d = 0) is S' = S / (1 - lambda e).
  p.tuples[0].idle = {{1.0, 1e3 * d, 10}};
  auto idle_only = family_for(p, one, 1, QueueKind::kMdInterf);
  REQUIRE(idle_only.ok());
  CHECK(with.latency_ms > idle_only->predict(1, rate).latency_ms);
  p.tuples[0].idle = {{1.0, 0.0, 10, 1e3 * e}};
  auto busy_only = family_for(p, one, 1, QueueKind::kMdInterf);
  REQUIRE(busy_only.ok());
  CHECK(busy_only->predict(1, rate).service_ms == Approx(1e3 * s0 / (1 - rate * e)).epsilon(1e-3));
}

TEST_CASE("busy excess: interpolated and averaged like the idle delta", "[core][idle]") {
  const std::vector<IdlePoint> pts = {{0.1, 0.1, 5, 0.02}, {10, 0.3, 5, 0.06}};
  CHECK(busy_delta_ms(pts, 1.0) == Approx(0.04));
  CHECK(busy_delta_ms(pts, 0.01) == Approx(0.02));
  CHECK(busy_delta_ms(pts, 100) == Approx(0.06));
  CHECK(busy_penalty_mean_ms({{1, 0.25, 3, 0.05}}, 500) == Approx(0.05));
  CHECK(busy_penalty_mean_ms({{1, 0.25, 3}}, 500) == 0.0);  // profiles before session 31
  CHECK(idle_delta_ms(pts, 1.0) == Approx(0.2));            // the idle delta is untouched by it
}
