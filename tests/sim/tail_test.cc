// The tail-latency approximation and the bursty-arrival correction (serf/core/tail_latency.h,
// tail_objective.h) against closed forms and against the simulator, in the regime where the study
// (docs/simulation.md) found them to hold, with the tolerances it supports.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "serf/core/tail_objective.h"
#include "serf/sim/fallback_objective.h"
#include "serf/sim/simulator.h"

namespace {

using serf::ServiceLevel;

// A one-family profile (K = 1, T = 1) with the given levels on `nodes` nodes.
serf::Profile profile_of(const std::vector<ServiceLevel>& levels, int nodes) {
  serf::Profile p;
  p.model = "test";
  p.hardware = {nodes, 64};
  for (size_t i = 0; i < levels.size(); ++i) {
    p.tuples.push_back({{static_cast<int>(i + 1), 1, 1}, levels[i].mean_ms, levels[i].scv, 1, 0});
  }
  p.reindex();
  return p;
}

std::vector<ServiceLevel> interference(int c, double scv) {  // mild, as DNN tuples are
  std::vector<ServiceLevel> out;
  for (int i = 1; i <= c; ++i) out.push_back({10.0 * (1.0 + 0.1 * (i - 1)), scv});
  return out;
}

struct Compared {
  double model_mean, model_p99, sim_mean, sim_p99, sim_ci;
};

// Model (through the planner's objective) and simulator for one configuration at utilization rho.
Compared compare(const std::vector<ServiceLevel>& levels, double rho, double arrival_scv, int units,
                 int64_t requests = 1000000) {
  const int c = static_cast<int>(levels.size());
  std::vector<double> means;
  means.reserve(levels.size());
  for (const auto& l : levels) means.push_back(l.mean_ms);
  auto model = serf::QueueModel::Create(serf::QueueKind::kMdInterf, means, levels[0].scv);
  REQUIRE(model.ok());
  const serf::Profile profile = profile_of(levels, units);
  const serf::ConfigurationFamily family{1, 1, c, *model, {}, 1, {}, {}};
  serf::LatencyObjectiveOptions o;
  o.percentile = 99;
  o.arrival_scv = arrival_scv;
  o.nodes = units;
  auto objective = serf::LatencyObjective::Create(profile, o);
  REQUIRE(objective.ok());
  const double lambda = rho * c * 1000.0 / levels.back().mean_ms;
  const serf::Prediction p = model->predict(c, lambda);
  REQUIRE(p.stable);

  serf::sim::SimulationOptions so;
  so.levels = levels;
  so.units = units;
  so.rate_per_s = lambda * units;
  so.arrival_kind = arrival_scv == 1.0 ? serf::ArrivalKind::kPoisson : serf::ArrivalKind::kGamma;
  so.arrival_scv = arrival_scv;
  so.requests = requests;
  so.seed = 7;
  auto sim = serf::sim::simulate(so);
  REQUIRE(sim.ok());
  // The tail model's own mean: the paper's W_q with the service-SCV and arrival-SCV corrections.
  auto tail = serf::LatencyTail::Create(*model, c, lambda, levels,
                                        (*objective)->tail_wait_factor(family, c));
  REQUIRE(tail.ok());
  return {tail->mean_latency_ms(), (*objective)->score_ms(family, c, lambda, p), sim->latency_ms,
          sim->p99_ms, sim->latency_ci95_ms};
}

}  // namespace

TEST_CASE("M/M/c: the wait distribution is exact (Erlang C, exponential tail)", "[tail]") {
  const int c = 8;
  const double mean_ms = 40, lambda = 170, mu = 1000 / mean_ms;
  auto model =
      serf::QueueModel::Create(serf::QueueKind::kMmInterf, std::vector<double>(c, mean_ms), 1.0);
  REQUIRE(model.ok());
  auto tail = serf::LatencyTail::Create(*model, c, lambda,
                                        std::vector<ServiceLevel>(c, ServiceLevel{mean_ms, 1.0}));
  REQUIRE(tail.ok());
  // Erlang C
  const double a = lambda / mu;
  double term = 1, sum = 1;
  for (int k = 1; k < c; ++k) sum += (term *= a / k);
  const double last = term * a / c / (1 - a / c), erlang_c = last / (sum + last);
  CHECK(tail->wait_probability() == Approx(erlang_c).epsilon(1e-9));
  CHECK(tail->wait_quantile_ms(0.99) ==
        Approx(1000 * std::log(erlang_c / 0.01) / (c * mu - lambda)).epsilon(1e-9));
  CHECK(tail->wait_quantile_ms((1 - erlang_c) / 2) == 0.0);  // below 1 - P_w nobody waits
  // The distribution's mean is the model's mean latency.
  CHECK(tail->mean_latency_ms() == Approx(model->predict(c, lambda).latency_ms).epsilon(1e-9));
}

TEST_CASE("latency quantiles are monotone and bracket the mean", "[tail]") {
  auto levels = interference(6, 0.1);
  std::vector<double> means;
  means.reserve(levels.size());
  for (const auto& l : levels) means.push_back(l.mean_ms);
  auto model = serf::QueueModel::Create(serf::QueueKind::kMdInterf, means, 0.1);
  REQUIRE(model.ok());
  auto tail = serf::LatencyTail::Create(*model, 6, 300, levels);
  REQUIRE(tail.ok());
  const double p50 = tail->latency_quantile_ms(0.5), p90 = tail->latency_quantile_ms(0.9),
               p99 = tail->latency_quantile_ms(0.99);
  CHECK(p50 < p90);
  CHECK(p90 < p99);
  CHECK(p50 < tail->mean_latency_ms() * 1.5);
  CHECK(p99 > tail->mean_latency_ms());
  CHECK(tail->latency_cdf(p99) == Approx(0.99).epsilon(1e-5));
  // Unstable: no percentile.
  CHECK(serf::LatencyTail::Create(*model, 6, 1e6, levels).status().code() ==
        serf::StatusCode::kInfeasible);
}

TEST_CASE("p99 approximation vs simulator, Poisson arrivals, where it holds", "[tail][sim]") {
  // The study's regime of good agreement: service SCV <= 0.3, rho <= 0.8. Tolerance: 10% on the
  // p99 (the study's 90th percentile of |error| there is about 7%), 5% on the mean.
  for (int c : {1, 4, 16}) {
    for (double rho : {0.3, 0.6, 0.8}) {
      const Compared r = compare(interference(c, 0.1), rho, 1.0, 1);
      INFO("c " << c << " rho " << rho << ": model mean " << r.model_mean << " p99 " << r.model_p99
                << ", sim mean " << r.sim_mean << " p99 " << r.sim_p99);
      CHECK(r.model_p99 == Approx(r.sim_p99).epsilon(0.10));
      CHECK(r.model_mean == Approx(r.sim_mean).epsilon(0.05));
    }
  }
}

TEST_CASE("bursty arrivals: Allen-Cunneen correction vs simulator with Gamma arrivals",
          "[tail][sim]") {
  // Without interference (the service term is then right: the correction only touches the wait),
  // where the study found the correction good: a unit arrival SCV in [0.5, 1.5]. Smooth and bursty
  // streams, one unit and a stream split over 4 units (ca2 = 2 over 4 units: 1.25 per unit).
  const struct {
    double ca2;
    int units;
  } cases[] = {{0.5, 1}, {0.5, 4}, {1.5, 1}, {2.0, 4}};
  for (const auto& k : cases) {
    const double ca2 = k.ca2;
    const int units = k.units;
    {
      for (double rho : {0.5, 0.8}) {
        const Compared r =
            compare(std::vector<ServiceLevel>(4, ServiceLevel{10.0, 0.1}), rho, ca2, units);
        INFO("ca2 " << ca2 << " units " << units << " rho " << rho << ": model mean "
                    << r.model_mean << " p99 " << r.model_p99 << ", sim mean " << r.sim_mean
                    << " p99 " << r.sim_p99);
        CHECK(r.model_mean == Approx(r.sim_mean).epsilon(0.05));
        CHECK(r.model_p99 == Approx(r.sim_p99).epsilon(0.10));
      }
    }
  }
  // The correction matters: the Poisson model is further off than the corrected one.
  const Compared bursty =
      compare(std::vector<ServiceLevel>(4, ServiceLevel{10.0, 0.1}), 0.8, 1.5, 1);
  const Compared poisson =
      compare(std::vector<ServiceLevel>(4, ServiceLevel{10.0, 0.1}), 0.8, 1.0, 1);
  CHECK(std::abs(poisson.model_mean - bursty.sim_mean) >
        3 * std::abs(bursty.model_mean - bursty.sim_mean));
}

TEST_CASE("the unit arrival SCV of a split stream", "[tail]") {
  CHECK(serf::split_arrival_scv(4.0, 1) == 4.0);
  CHECK(serf::split_arrival_scv(4.0, 4) == Approx(1.75));
  CHECK(serf::split_arrival_scv(0.0, 2) == Approx(0.5));
  CHECK(serf::arrival_scv_wait_factor(1.0, 0.3) == Approx(1.0));
  CHECK(serf::arrival_scv_wait_factor(4.0, 0.0) == Approx(4.0));
}

TEST_CASE("the simulator fallback answers where the approximation is poor, and only there",
          "[tail][sim]") {
  const serf::sim::FallbackRegion region;
  CHECK(region.poor(4.0, 8, 0.3, false));         // bursty
  CHECK(region.poor(0.25, 8, 0.3, true));         // smooth
  CHECK(region.poor(1.0, 8, 0.95, true));         // a percentile near saturation
  CHECK_FALSE(region.poor(1.0, 8, 0.95, false));  // the mean there is the paper's model
  CHECK_FALSE(region.poor(1.2, 2, 0.6, true));

  const auto levels = interference(4, 0.1);
  std::vector<double> means;
  means.reserve(levels.size());
  for (const auto& l : levels) means.push_back(l.mean_ms);
  auto model = serf::QueueModel::Create(serf::QueueKind::kMdInterf, means, 0.1);
  REQUIRE(model.ok());
  const serf::Profile profile = profile_of(levels, 1);
  const serf::ConfigurationFamily family{1, 1, 4, *model, {}, 1, {}, {}};
  for (double ca2 : {1.0, 4.0}) {
    serf::LatencyObjectiveOptions o;
    o.percentile = 99;
    o.arrival_scv = ca2;
    o.nodes = 1;
    auto analytic = serf::LatencyObjective::Create(profile, o);
    REQUIRE(analytic.ok());
    const serf::sim::SimulationFallbackObjective fallback(**analytic);
    const double lambda = 0.5 * 4 * 1000 / levels.back().mean_ms;
    const serf::Prediction p = model->predict(4, lambda);
    const double score = fallback.score_ms(family, 4, lambda, p);
    if (ca2 == 1.0) {
      CHECK(fallback.simulations() == 0);
      CHECK(score == (*analytic)->score_ms(family, 4, lambda, p));
    } else {
      CHECK(fallback.simulations() == 1);
      serf::sim::SimulationOptions so;
      so.levels = levels;
      so.rate_per_s = lambda;
      so.arrival_kind = serf::ArrivalKind::kGamma;
      so.arrival_scv = 4.0;
      so.requests = 50000;  // 20000 / (1 - rho) clamped to [50k, 400k]
      so.percentile = 99;
      so.seed = 1;
      auto sim = serf::sim::simulate(so);
      REQUIRE(sim.ok());
      CHECK(score == sim->percentile_ms);
      CHECK(sim->percentile_ms == Approx(sim->p99_ms));
    }
  }
}
