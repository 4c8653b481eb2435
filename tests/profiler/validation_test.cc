// serf validate's arithmetic: predictions per measured point, error statistics, the planner check
// and the batch-means interval, on hand-made profiles and points.
#include "profiler/validation.h"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <utility>

#include "profiler/validation_io.h"
#include "serf/core/planner.h"
#include "serf/core/queue_model.h"
#include "serf/core/service_level.h"
#include "serf/sim/simulator.h"

using serf::Configuration;
using serf::Profile;
using serf::QueueKind;
using serf::profiler::MeasuredPoint;

namespace {

// 2 nodes x 2 cores: tuples (i, K, T) with i*T <= 2, K in {1, 2}.
Profile two_node_profile() {
  Profile p;
  p.model = "hand-made";
  p.hardware = {2, 2};
  p.tuples = {{{1, 1, 1}, 10.0, 0.0, 10}, {{2, 1, 1}, 14.0, 0.0, 10}, {{1, 1, 2}, 6.0, 0.0, 10},
              {{1, 2, 1}, 7.0, 0.0, 10},  {{2, 2, 1}, 9.0, 0.0, 10},  {{1, 2, 2}, 4.0, 0.0, 10}};
  p.reindex();
  return p;
}

double predicted_ms(const Profile& p, const Configuration& c, int nodes, double rate) {
  auto model = serf::model_for(p, c, nodes, QueueKind::kMdInterf);
  REQUIRE(model.ok());
  const int units = nodes / c.inter;
  return model->predict(c.service, rate / units).latency_ms;
}

// two_node_profile with batch tuples (1, 1, 1, b) and (2, 1, 1, b): {b, ms with one batch
// running, ms with two}.
Profile with_batches(std::initializer_list<std::array<double, 3>> batches) {
  Profile p = two_node_profile();
  for (const auto& [b, one, two] : batches) {
    p.tuples.push_back({{1, 1, 1, static_cast<int>(b)}, one, 0.0, 10});
    p.tuples.push_back({{2, 1, 1, static_cast<int>(b)}, two, 0.0, 10});
  }
  p.reindex();
  return p;
}

// The bulk-service model's prediction of configuration c at a cluster rate on 2 nodes (units of
// K = 1), as serf validate makes it.
serf::Prediction batched_prediction(const Profile& p, const Configuration& c, double rate) {
  auto fam = serf::family_for(p, c, 2, QueueKind::kMdInterf);
  REQUIRE(fam.ok());
  return fam->predict(c.service, rate / 2);
}

MeasuredPoint point(Configuration c, double rate, double mean_ms, double ci = -1) {
  MeasuredPoint m;
  m.config = c;
  m.rate_per_s = rate;
  m.requests = 100;
  m.mean_latency_ms = mean_ms;
  m.ci95_ms = ci;
  return m;
}

}  // namespace

TEST_CASE("a measurement equal to the prediction has zero error", "[validation]") {
  const Profile p = two_node_profile();
  std::vector<MeasuredPoint> points;
  for (Configuration c : {Configuration{1, 1, 1}, Configuration{2, 1, 1}, Configuration{1, 2, 2}})
    points.push_back(point(c, 50, predicted_ms(p, c, 2, 50)));
  auto report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  REQUIRE(report->models.size() == 1);
  const auto& mv = report->models[0];
  CHECK(mv.summary.count == 3);
  CHECK(mv.summary.unstable == 0);
  CHECK(mv.summary.max == Approx(0).margin(1e-12));
  // (1,1,1) runs 2 units at 25/s each: rho = 25 * 10 ms = 0.25.
  CHECK(mv.points[0].units == 2);
  CHECK(mv.points[0].unit_rate_per_s == 25.0);
  CHECK(mv.points[0].utilization == Approx(0.25));
}

TEST_CASE("errors are relative to the measurement and summarised by hand-checkable stats",
          "[validation]") {
  const Profile p = two_node_profile();
  const Configuration c{1, 2, 2};  // one unit, 4 ms deterministic service
  std::vector<MeasuredPoint> points;
  std::vector<double> rates = {20, 40, 60, 80, 100};
  std::vector<double> factors = {1.10, 0.90, 1.00, 1.25, 0.80};  // measured = predicted / factor
  for (size_t k = 0; k < rates.size(); ++k)
    points.push_back(point(c, rates[k], predicted_ms(p, c, 2, rates[k]) / factors[k]));
  auto report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& s = report->models[0].summary;
  // |pred - meas| / meas = |factor - 1|: 0.10, 0.10, 0, 0.25, 0.20.
  CHECK(report->models[0].points[3].rel_error == Approx(0.25));
  CHECK(s.mean == Approx(0.13));
  CHECK(s.median == Approx(0.10));
  CHECK(s.max == Approx(0.25));
  // numpy-style: position 0.95 * 4 = 3.8 between 0.20 and 0.25.
  CHECK(s.p95 == Approx(0.20 + 0.8 * 0.05));
}

TEST_CASE("points at or beyond the predicted capacity are counted unstable, not scored",
          "[validation]") {
  const Profile p = two_node_profile();
  // (1,1,1): 2 units x 100/s = 200/s capacity; 250/s is beyond it.
  std::vector<MeasuredPoint> points = {point({1, 1, 1}, 250, 500), point({1, 1, 1}, 20, 11)};
  auto report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& mv = report->models[0];
  CHECK(mv.summary.unstable == 1);
  CHECK(mv.summary.count == 1);
  CHECK_FALSE(mv.points[0].prediction.stable);
  CHECK(mv.points[0].utilization == Approx(1.25));
}

TEST_CASE("the planner check names the measured best and the pick's penalty", "[validation]") {
  const Profile p = two_node_profile();
  const double rate = 30;
  // Predicted: (1,2,2) is fastest. Measured: make (1,1,2) 10% faster than (1,2,2).
  const double fast = predicted_ms(p, {1, 2, 2}, 2, rate);
  std::vector<MeasuredPoint> points = {point({1, 2, 2}, rate, fast),
                                       point({1, 1, 2}, rate, fast / 1.1),
                                       point({1, 1, 1}, rate, 3 * fast)};
  auto report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& mv = report->models[0];
  REQUIRE(mv.rates.size() == 1);
  const auto& rc = mv.rates[0];
  CHECK(rc.configurations == 3);
  CHECK(rc.measured_best == Configuration{1, 1, 2});
  CHECK(rc.planner_pick == Configuration{1, 2, 2});
  CHECK_FALSE(rc.match);
  CHECK(rc.penalty == Approx(0.1));
  CHECK(mv.matches == 0);
  CHECK(mv.max_penalty == Approx(0.1));
}

TEST_CASE("bad measurements name the point", "[validation]") {
  const Profile p = two_node_profile();
  auto r = serf::profiler::validate_predictions(p, {point({4, 1, 1}, 10, 10)}, 2,
                                                {QueueKind::kMdInterf});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("measured point 0"));
  r = serf::profiler::validate_predictions(p, {point({1, 1, 1}, 10, 10), point({1, 1, 1}, 10, 12)},
                                           2, {QueueKind::kMdInterf});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("repeats point 0"));
  r = serf::profiler::validate_predictions(p, {point({1, 1, 1}, 10, std::nan(""))}, 2,
                                           {QueueKind::kMdInterf});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().exit_code() == 2);
  auto m = serf::profiler::measured_from_json(nlohmann::json::parse(R"({"format":"x"})"), "m.json");
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.status().message(), Catch::Contains("m.json"));
}

TEST_CASE("rates at utilizations load each configuration alike", "[validation]") {
  const Profile p = two_node_profile();
  auto r = serf::profiler::rates_at_utilizations(p, {2, 1, 1}, 2, {0.9, 0.3});
  REQUIRE(r.ok());
  // 2 units x 2 slots / 14 ms = 285.7/s capacity.
  REQUIRE(r->size() == 2);
  CHECK((*r)[0] == Approx(0.3 * 4000.0 / 14.0));
  CHECK((*r)[1] == Approx(0.9 * 4000.0 / 14.0));
}

TEST_CASE("bursty arrivals scale the predicted wait as the planner does", "[validation]") {
  const Profile p = two_node_profile();
  const Configuration c{1, 2, 2};  // one unit: the stream is not split
  MeasuredPoint poisson = point(c, 100, 10);
  MeasuredPoint bursty = point({1, 1, 2}, 100, 10);  // two units: SCV 4 splits to 2.5 each
  bursty.arrival_scv = 4;
  MeasuredPoint bursty_one = point(c, 120, 10);
  bursty_one.arrival_scv = 4;
  auto report = serf::profiler::validate_predictions(p, {poisson, bursty, bursty_one}, 2,
                                                     {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& pts = report->models[0].points;
  auto model = serf::model_for(p, c, 2, QueueKind::kMdInterf);
  REQUIRE(model.ok());
  // Deterministic service (md-interf assumes SCV 0): the Allen-Cunneen factor is the unit's ca2.
  CHECK(pts[2].prediction.wait_ms == Approx(4 * model->predict(1, 120).wait_ms));
  CHECK(pts[2].prediction.service_ms == Approx(model->predict(1, 120).service_ms));
  auto two_units = serf::model_for(p, {1, 1, 2}, 2, QueueKind::kMdInterf);
  REQUIRE(two_units.ok());
  CHECK(pts[1].prediction.wait_ms == Approx(2.5 * two_units->predict(1, 50).wait_ms));
  CHECK(pts[0].prediction.wait_ms == Approx(model->predict(1, 100).wait_ms));
  MeasuredPoint bad = poisson;
  bad.arrival_scv = -1;
  CHECK_FALSE(serf::profiler::validate_predictions(p, {bad}, 2, {QueueKind::kMdInterf}).ok());
}

TEST_CASE("the p99 is compared only where enough requests were measured", "[validation]") {
  const Profile p = two_node_profile();
  MeasuredPoint few = point({1, 2, 2}, 100, 10);
  few.p99_latency_ms = 30;
  few.requests = serf::profiler::kMinRequestsForP99 - 1;
  MeasuredPoint many = point({1, 2, 2}, 150, 10);
  many.p99_latency_ms = 30;
  many.requests = serf::profiler::kMinRequestsForP99;
  auto report = serf::profiler::validate_predictions(p, {few, many}, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& mv = report->models[0];
  CHECK_FALSE(mv.points[0].has_p99);
  REQUIRE(mv.points[1].has_p99);
  // M/D/1 at rho = 0.6: the p99 lies well above the mean and the service time.
  CHECK(mv.points[1].predicted_p99_ms > 2 * mv.points[1].prediction.latency_ms);
  CHECK(mv.points[1].p99_rel_error == Approx(std::fabs(mv.points[1].predicted_p99_ms - 30) / 30));
  CHECK(mv.p99_summary.count == 1);
}

TEST_CASE("points whose service time drifted from the profile are summarised apart",
          "[validation]") {
  const Profile p = two_node_profile();
  const Configuration c{1, 2, 2};  // 4 ms
  MeasuredPoint steady = point(c, 50, predicted_ms(p, c, 2, 50) * 1.05);
  steady.mean_service_ms = 4.2;  // +5%
  MeasuredPoint drifted = point(c, 100, predicted_ms(p, c, 2, 100) * 2);
  drifted.mean_service_ms = 5.0;  // +25%: the machine changed
  auto report =
      serf::profiler::validate_predictions(p, {steady, drifted}, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& mv = report->models[0];
  CHECK(mv.points[0].service_drift == Approx(0.05));
  CHECK(mv.points[1].service_drift == Approx(0.25));
  CHECK(mv.summary.count == 2);
  REQUIRE(mv.steady_summary.count == 1);
  CHECK(mv.steady_summary.max == Approx(std::fabs(1 / 1.05 - 1)));
}

TEST_CASE("the rescaled prediction takes the profile's error out", "[validation]") {
  // The machine runs every service 20 % slower than profiled. A measurement that is exactly what
  // the 20 %-slower profile predicts has a large plain error and no rescaled error.
  const Profile p = two_node_profile();
  Profile slower = p;
  for (auto& t : slower.tuples) t.mean_ms *= 1.2;
  slower.reindex();
  for (const Configuration c : {Configuration{1, 1, 1}, Configuration{2, 1, 1}}) {
    const double rate = 120;  // (1,1,1): 60/s per unit, rho 0.72 slower; (2,1,1): moderate
    auto model = serf::model_for(slower, c, 2, QueueKind::kMdInterf);
    REQUIRE(model.ok());
    const auto truth = model->predict(c.service, rate / 2);
    REQUIRE(truth.stable);
    MeasuredPoint m = point(c, rate, truth.latency_ms);
    m.mean_service_ms = truth.service_ms;
    auto report = serf::profiler::validate_predictions(p, {m}, 2, {QueueKind::kMdInterf});
    REQUIRE(report.ok());
    const auto& r = report->models[0].points[0];
    CHECK(r.rel_error > 0.2);  // the profile's 20 % near saturation
    REQUIRE(r.has_rescaled);
    CHECK(r.rescale == Approx(1.2).epsilon(1e-4));
    CHECK(r.rescaled_latency_ms == Approx(truth.latency_ms).epsilon(1e-6));
    CHECK(r.rescaled_rel_error == Approx(0).margin(1e-6));
    CHECK(report->models[0].rescaled_summary.count == 1);
  }
  // Without a measured service time there is nothing to rescale to.
  const Configuration c{1, 1, 1};
  auto report = serf::profiler::validate_predictions(p, {point(c, 50, predicted_ms(p, c, 2, 50))},
                                                     2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  CHECK_FALSE(report->models[0].points[0].has_rescaled);
  CHECK(report->models[0].rescaled_summary.count == 0);
}

namespace {

// A short Poisson path at `rate_per_s` over `units` units, as an exhaustive run records it, with
// the "measured" latencies of a system that is exactly the replay queue, plus `extra_ms` each.
MeasuredPoint traced_point(const Profile& p, Configuration c, int units, double rate_per_s,
                           int requests, int warmup, uint64_t seed, double extra_ms) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate_per_s / 1000.0);
  std::uniform_int_distribution<int> unit(0, units - 1);
  serf::profiler::RequestTrace t;
  t.warmup = warmup;
  double at = 0;
  for (int k = 0; k < requests + warmup; ++k) {
    t.arrival_ms.push_back(at);
    t.unit.push_back(unit(rng));
    at += gap(rng);
  }
  auto levels = serf::service_levels(p, c);
  REQUIRE(levels.ok());
  for (auto& l : *levels) l.scv = 0;
  auto lat = serf::sim::replay_latencies(*levels, serf::sim::ServiceSemantics::kShared, units,
                                         t.arrival_ms, t.unit);
  REQUIRE(lat.ok());
  double sum = 0;
  for (size_t k = 0; k < lat->size(); ++k) {
    t.latency_ms.push_back((*lat)[k] + extra_ms);
    if (k >= static_cast<size_t>(warmup)) sum += t.latency_ms.back();
  }
  MeasuredPoint m = point(c, rate_per_s, sum / requests);
  m.requests = requests;
  m.trace = t;
  return m;
}

}  // namespace

TEST_CASE("the sample-path estimate cancels arrival luck", "[validation]") {
  // (1,1,1) on 2 nodes: 2 units of M/D/1, 10 ms, rho 0.8, where Pollaczek-Khinchine is exact:
  // 10 + 0.8 x 10 / (2 x 0.2) = 30 ms. A 400-request path's own mean strays far from 30 ms.
  const Profile p = two_node_profile();
  const Configuration c{1, 1, 1};
  double worst_raw = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const MeasuredPoint m = traced_point(p, c, 2, 160, 400, 40, seed, 0);
    auto report = serf::profiler::validate_predictions(p, {m}, 2, {QueueKind::kMdInterf});
    REQUIRE(report.ok());
    const auto& r = report->models[0].points[0];
    REQUIRE(r.prediction.stable);
    CHECK(r.prediction.latency_ms == Approx(30).epsilon(1e-6));
    worst_raw = std::max(worst_raw, r.rel_error);
    REQUIRE(r.has_adjusted);
    // The measurement is the replay itself: nothing is left but the replay's long-run mean.
    CHECK(r.replay_ms == Approx(m.mean_latency_ms).epsilon(1e-9));
    CHECK(r.adjusted_ms == Approx(r.replay_expected_ms).epsilon(1e-9));
    CHECK(r.adjusted_rel_error < 0.03);
    CHECK(r.adjusted_ci95_ms < 0.03 * 30);
    CHECK(report->models[0].adjusted_summary.count == 1);
  }
  CHECK(worst_raw > 0.1);  // what the raw measurement alone would have blamed on the model
  // What the real system does beyond the queue stays in: 3 ms more per request.
  const MeasuredPoint slow = traced_point(p, c, 2, 160, 400, 40, 1, 3.0);
  auto report = serf::profiler::validate_predictions(p, {slow}, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& r = report->models[0].points[0];
  REQUIRE(r.has_adjusted);
  CHECK(r.adjusted_ms == Approx(r.replay_expected_ms + 3).epsilon(1e-9));
  CHECK(r.adjusted_ci95_ms < 0.03 * 30);
}

TEST_CASE("a point's trace is read back and checked", "[validation]") {
  const Profile p = two_node_profile();
  const MeasuredPoint m = traced_point(p, Configuration{2, 1, 1}, 2, 100, 50, 5, 9, 0);
  nlohmann::json point = {{"service", 2},
                          {"inter", 1},
                          {"intra", 1},
                          {"rate", 100},
                          {"requests", 50},
                          {"mean_latency_ms", m.mean_latency_ms},
                          {"trace", serf::profiler::trace_json(m.trace)}};
  nlohmann::json doc = {
      {"format", "serf-exhaustive/1"}, {"model", "hand-made"}, {"points", {point}}};
  auto set = serf::profiler::measured_from_json(doc, "ex.json");
  REQUIRE(set.ok());
  const auto& t = set->points[0].trace;
  CHECK(t.warmup == 5);
  REQUIRE(t.arrival_ms.size() == 55);
  CHECK(t.unit == m.trace.unit);
  CHECK(t.arrival_ms[10] == Approx(m.trace.arrival_ms[10]).margin(1e-3));  // to 1 us
  CHECK(t.latency_ms[10] == Approx(m.trace.latency_ms[10]).margin(1e-3));
  // One list short of the others: one line naming the trace.
  doc["points"][0]["trace"]["unit"].erase(0);
  auto bad = serf::profiler::measured_from_json(doc, "ex.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("points[0].trace"));
  // A unit beyond the cluster's is caught when the path is replayed.
  doc["points"][0]["trace"] = serf::profiler::trace_json(m.trace);
  doc["points"][0]["trace"]["unit"][3] = 7;
  set = serf::profiler::measured_from_json(doc, "ex.json");
  REQUIRE(set.ok());
  auto report = serf::profiler::validate_predictions(p, set->points, 2, {QueueKind::kMdInterf});
  REQUIRE_FALSE(report.ok());
  CHECK_THAT(report.status().message(), Catch::Contains("unit 7"));
}

TEST_CASE("the planner check also names the best by sample-path estimate", "[validation]") {
  const Profile p = two_node_profile();
  // (1,1,2) is the better configuration and its trace says so; its raw mean is made unlucky.
  MeasuredPoint fast = traced_point(p, Configuration{1, 1, 2}, 2, 50, 200, 20, 3, 0);
  const MeasuredPoint slow = traced_point(p, Configuration{1, 1, 1}, 2, 50, 200, 20, 4, 0);
  fast.mean_latency_ms = 2 * slow.mean_latency_ms;
  auto report = serf::profiler::validate_predictions(p, {fast, slow}, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& mv = report->models[0];
  REQUIRE(mv.rates.size() == 1);
  const auto& rc = mv.rates[0];
  CHECK(rc.planner_pick == Configuration{1, 1, 2});
  CHECK(rc.measured_best == Configuration{1, 1, 1});
  CHECK_FALSE(rc.match);
  REQUIRE(rc.has_adjusted);
  CHECK(rc.adjusted_best == Configuration{1, 1, 2});
  CHECK(rc.adjusted_match);
  CHECK(rc.adjusted_penalty == 0);
  CHECK(mv.adjusted_rates == 1);
  CHECK(mv.adjusted_matches == 1);
  // Without a trace on one of them there is no estimate to compare.
  MeasuredPoint bare = slow;
  bare.trace = {};
  report = serf::profiler::validate_predictions(p, {fast, bare}, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  CHECK_FALSE(report->models[0].rates[0].has_adjusted);
  CHECK(report->models[0].adjusted_rates == 0);
}

TEST_CASE("batched configurations are predicted by the bulk-service model", "[validation]") {
  // Batches of 2 and 4 on one node: tuples (i, 1, 1, b).
  const Profile p = with_batches({{2, 12.0, 17.0}, {4, 15.0, 21.0}});
  const Configuration one{1, 1, 1, 2}, two{2, 1, 1, 4};
  auto batched_ms = [&](const Configuration& c, double rate) {
    return batched_prediction(p, c, rate).latency_ms;
  };
  // c = 1 is the exact M/D^(b)/1; the measurement equal to it has zero error, 10 % off 10 %.
  MeasuredPoint a = point(one, 150, batched_ms(one, 150));
  MeasuredPoint b = point(two, 300, 1.1 * batched_ms(two, 300));
  MeasuredPoint plain = point({1, 1, 1}, 150, predicted_ms(p, {1, 1, 1}, 2, 150));
  auto report = serf::profiler::validate_predictions(p, {a, b, plain}, 2,
                                                     {QueueKind::kMdInterf, QueueKind::kMdc});
  REQUIRE(report.ok());
  const auto& md = report->models[0];
  REQUIRE(md.points.size() == 3);
  CHECK(md.summary.count == 3);
  CHECK(md.summary.not_modelled == 0);
  CHECK(md.points[0].measured.config == one);
  CHECK(md.points[0].rel_error == Approx(0).margin(1e-12));
  CHECK(md.points[1].rel_error == Approx(0.1 / 1.1));
  CHECK(md.points[2].rel_error == Approx(0).margin(1e-12));
  // Batching lowers the latency at a load b = 1 cannot carry as well: (1,1,1) saturates at
  // 100/s per unit, (1,1,1,2) carries 2/12 ms = 166/s; at 75/s per unit both are stable.
  CHECK(md.points[0].utilization == Approx(75.0 / (2 / 12e-3)));
  CHECK_FALSE(md.points[0].has_adjusted);
  CHECK_FALSE(md.points[0].has_p99);
  // The planner compares the batched and unbatched configurations measured at 150/s.
  REQUIRE(md.rates.size() == 1);
  CHECK(md.rates[0].configurations == 2);
  // M/D/c does not batch: the two batched points are left out of its rows, counted.
  const auto& mdc = report->models[1];
  CHECK(mdc.summary.not_modelled == 2);
  CHECK(mdc.points.size() == 1);
  CHECK(mdc.summary.count == 1);
  // The bulk-service model assumes Poisson arrivals.
  MeasuredPoint bursty = a;
  bursty.arrival_scv = 2;
  auto refused = serf::profiler::validate_predictions(p, {bursty}, 2, {QueueKind::kMdInterf});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("Poisson") != std::string::npos);
  // A batch size the profile lacks tuples for is named.
  auto missing = serf::profiler::validate_predictions(p, {point({1, 1, 2, 2}, 50, 10)}, 2,
                                                      {QueueKind::kMdInterf});
  CHECK_FALSE(missing.ok());
  // Rates at utilizations of a batched configuration: fractions of c b / the full batches' time.
  auto rates = serf::profiler::rates_at_utilizations(p, two, 2, {0.5});
  REQUIRE(rates.ok());
  CHECK(rates->at(0) == Approx(0.5 * 2 * (2 * 4 / 21e-3)));
}

TEST_CASE("a batched point is rescaled to its measured service time", "[validation]") {
  // The machine ran 20 % faster than profiled: the measurement is the bulk-service model of the
  // profile with every tuple at 0.8 of its time. The raw prediction is off; the one rescaled to
  // the point's measured service time (the queue model alone) is not.
  const Profile p = with_batches({{2, 12.0, 17.0}, {3, 13.5, 19.0}, {4, 15.0, 21.0}});
  Profile faster = p;
  for (auto& t : faster.tuples) t.mean_ms *= 0.8;
  faster.reindex();
  std::vector<MeasuredPoint> points;
  for (const Configuration& c : {Configuration{1, 1, 1, 4}, Configuration{2, 1, 1, 4}}) {
    const serf::Prediction truth = batched_prediction(faster, c, 250);
    REQUIRE(truth.stable);
    MeasuredPoint m = point(c, 250, truth.latency_ms);
    m.mean_service_ms = truth.service_ms;
    points.push_back(m);
  }
  MeasuredPoint no_service = points[0];
  no_service.mean_service_ms = 0;  // not measured: nothing to rescale to
  no_service.rate_per_s = 200;
  points.push_back(no_service);
  auto report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  INFO((report.ok() ? std::string() : report.status().message()));
  REQUIRE(report.ok());
  const auto& md = report->models[0];
  REQUIRE(md.points.size() == 3);
  for (size_t k = 0; k < 2; ++k) {
    INFO("point " << k);
    CHECK(md.points[k].rel_error > 0.1);
    REQUIRE(md.points[k].has_rescaled);
    CHECK(md.points[k].rescale == Approx(0.8).epsilon(1e-4));
    CHECK(md.points[k].rescaled_rel_error == Approx(0).margin(1e-4));
  }
  CHECK_FALSE(md.points[2].has_rescaled);
  CHECK(md.rescaled_summary.count == 2);
}

TEST_CASE("a batched point's b is read from and written to the files", "[validation]") {
  const std::string text = R"({"format": "serf-exhaustive/1", "model": "m", "points": [
    {"rate": 100, "service": 1, "inter": 1, "intra": 1, "batch": 4, "requests": 50,
     "mean_latency_ms": 20},
    {"rate": 100, "service": 1, "inter": 1, "intra": 1, "requests": 50, "mean_latency_ms": 20}]})";
  auto m = serf::profiler::measured_from_json(nlohmann::json::parse(text), "m.json");
  REQUIRE(m.ok());
  REQUIRE(m->points.size() == 2);
  CHECK(m->points[0].config.batch == 4);
  CHECK(m->points[1].config.batch == 1);  // files written before batches
  auto bad = nlohmann::json::parse(text);
  bad["points"][0]["batch"] = 0;
  auto refused = serf::profiler::measured_from_json(bad, "m.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("points[0].batch") != std::string::npos);
}

TEST_CASE("a measurement's misspelt or negative fields are refused, naming them", "[validation]") {
  // A misspelt field was ignored (its default used), and a negative CI was read as "none given".
  const auto good = nlohmann::json::parse(R"({"format": "serf-exhaustive/1", "model": "m",
    "hardware": {"nodes": 2, "cores_per_node": 2}, "total_wall_s": 3, "points": [
    {"rate": 100, "service": 1, "inter": 1, "intra": 1, "requests": 50, "mean_latency_ms": 20,
     "p99_latency_ms": 40, "mean_latency_ci95_ms": null, "mean_service_ms": 10, "wall_s": 1,
     "trace": {"warmup": 0, "arrival_ms": [1], "unit": [0], "latency_ms": [20]}}]})");
  REQUIRE(serf::profiler::measured_from_json(good, "m.json").ok());
  const std::pair<nlohmann::json::json_pointer, std::string> cases[] = {
      {nlohmann::json::json_pointer("/bacth"), "m.json: unknown field 'bacth'"},
      {nlohmann::json::json_pointer("/hardware/node"), "m.json: hardware: unknown field 'node'"},
      {nlohmann::json::json_pointer("/points/0/bacth"), "m.json: points[0]: unknown field 'bacth'"},
      {nlohmann::json::json_pointer("/points/0/trace/units"),
       "m.json: points[0].trace: unknown field 'units'"},
      {nlohmann::json::json_pointer("/points/0/p99_latency_ms"),
       "points[0].p99_latency_ms must be >= 0"},
      {nlohmann::json::json_pointer("/points/0/mean_latency_ci95_ms"),
       "points[0].mean_latency_ci95_ms must be >= 0"},
      {nlohmann::json::json_pointer("/points/0/mean_service_ms"),
       "points[0].mean_service_ms must be >= 0"},
      {nlohmann::json::json_pointer("/points/0/wall_s"), "points[0].wall_s must be >= 0"},
      {nlohmann::json::json_pointer("/total_wall_s"), "total_wall_s must be >= 0 seconds"}};
  for (const auto& [at, want] : cases) {
    auto doc = good;
    doc[at] = -1;
    const auto m = serf::profiler::measured_from_json(doc, "m.json");
    REQUIRE_FALSE(m.ok());
    CHECK_THAT(m.status().message(), Catch::Contains(want));
  }
}

TEST_CASE("the fresh prediction uses the tuples measured just before the point", "[validation]") {
  // The machine ran every service 20 % slower than profiled while the points were measured; the
  // tuples measured just before each point saw it. The fresh prediction is the slower profile's.
  const Profile p = two_node_profile();
  Profile slower = p;
  for (auto& t : slower.tuples) t.mean_ms *= 1.2;
  slower.reindex();
  const double rate = 120;
  std::vector<MeasuredPoint> points;
  for (const Configuration c : {Configuration{1, 1, 1}, Configuration{2, 1, 1}}) {
    auto model = serf::model_for(slower, c, 2, QueueKind::kMdInterf);
    REQUIRE(model.ok());
    const auto truth = model->predict(c.service, rate / 2);
    REQUIRE(truth.stable);
    MeasuredPoint m = point(c, rate, truth.latency_ms, 0.01 * truth.latency_ms);
    for (int i = 1; i <= c.service; ++i) m.fresh.push_back(*slower.find({i, 1, 1}));
    points.push_back(m);
  }
  auto report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  const auto& mv = report->models[0];
  for (const auto& r : mv.points) {
    CHECK(r.rel_error > 0.2);  // the stale profile's error near saturation
    REQUIRE(r.has_fresh);
    CHECK(r.fresh_latency_ms == Approx(r.measured.mean_latency_ms).epsilon(1e-9));
    CHECK(r.fresh_rel_error == Approx(0).margin(1e-9));
  }
  CHECK(mv.fresh_summary.count == 2);
  CHECK(mv.fresh_summary.within_ci95 == 2);
  CHECK(mv.fresh_summary.with_ci95 == 2);
  // Both configurations at one rate: the fresh pick is the measured best.
  REQUIRE(mv.rates.size() == 1);
  CHECK(mv.rates[0].has_fresh);
  CHECK(mv.rates[0].fresh_match);
  CHECK(mv.rates[0].fresh_pick == mv.rates[0].measured_best);
  CHECK(mv.fresh_rates == 1);
  CHECK(mv.fresh_matches == 1);
  // Without fresh tuples, nothing fresh is reported.
  points[0].fresh.clear();
  report = serf::profiler::validate_predictions(p, points, 2, {QueueKind::kMdInterf});
  REQUIRE(report.ok());
  CHECK_FALSE(report->models[0].points[0].has_fresh);
  CHECK(report->models[0].fresh_summary.count == 1);
  CHECK(report->models[0].fresh_rates == 0);
}

TEST_CASE("a point's fresh tuples are written, read back and checked", "[validation]") {
  const Profile p = two_node_profile();
  const std::vector<serf::TupleStats> fresh = {*p.find({1, 1, 1}), *p.find({2, 1, 1})};
  nlohmann::json point = {{"service", 2},
                          {"inter", 1},
                          {"intra", 1},
                          {"rate", 50},
                          {"requests", 100},
                          {"mean_latency_ms", 20},
                          {"fresh_tuples", serf::profiler::fresh_tuples_json(fresh)}};
  nlohmann::json doc = {
      {"format", "serf-exhaustive/1"}, {"model", "hand-made"}, {"points", {point}}};
  auto set = serf::profiler::measured_from_json(doc, "ex.json");
  REQUIRE(set.ok());
  REQUIRE(set->points[0].fresh.size() == 2);
  CHECK(set->points[0].fresh[1].tuple == serf::ParallelismTuple{2, 1, 1});
  CHECK(set->points[0].fresh[1].mean_ms == 14.0);
  CHECK(set->points[0].fresh[1].samples == 10);
  auto bad = [&](const nlohmann::json& d, const std::string& says) {
    auto r = serf::profiler::measured_from_json(d, "ex.json");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("points[0].fresh_tuples"));
    CHECK_THAT(r.status().message(), Catch::Contains(says));
  };
  nlohmann::json d = doc;
  d["points"][0]["fresh_tuples"].erase(1);  // (2,1,1) missing
  bad(d, "expected the 2 tuple(s)");
  d = doc;
  d["points"][0]["fresh_tuples"][1]["intra"] = 2;  // another configuration's tuple
  bad(d, "expected the tuple (2, 1, 1)");
  d = doc;
  d["points"][0]["fresh_tuples"][0]["mean_ms"] = -1;
  bad(d, "mean_ms must lie in");
  d = doc;
  d["points"][0]["fresh_tuples"][0]["scv"] = "x";
  bad(d, "scv");
  d = doc;
  d["points"][0]["fresh_tuples"][0]["mean"] = 1;  // misspelt
  bad(d, "unknown field 'mean'");
  d = doc;
  d["points"][0]["fresh_tuples"] = 3;
  bad(d, "expected an array");
}
