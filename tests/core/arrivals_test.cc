#include "serf/core/arrivals.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace {

struct GapStats {
  double mean = 0, scv = 0;
};

GapStats gap_stats(serf::ArrivalProcess p, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  double last = 0, sum = 0, sum2 = 0;
  for (int k = 0; k < n; ++k) {
    const double t = p.next_s(rng);
    const double g = t - last;
    last = t;
    sum += g;
    sum2 += g * g;
  }
  GapStats s;
  s.mean = sum / n;
  s.scv = (sum2 / n - s.mean * s.mean) / (s.mean * s.mean);
  return s;
}

}  // namespace

TEST_CASE("arrival processes have the asked rate and gap SCV", "[arrivals]") {
  using serf::ArrivalKind;
  auto poisson = serf::ArrivalProcess::Create(ArrivalKind::kPoisson, 200.0);
  REQUIRE(poisson.ok());
  auto s = gap_stats(*poisson, 400000, 1);
  CHECK(s.mean == Approx(1.0 / 200).epsilon(0.01));
  CHECK(s.scv == Approx(1.0).epsilon(0.02));

  auto gamma = serf::ArrivalProcess::Create(ArrivalKind::kGamma, 50.0, 4.0);
  REQUIRE(gamma.ok());
  s = gap_stats(*gamma, 400000, 2);
  CHECK(s.mean == Approx(1.0 / 50).epsilon(0.02));
  CHECK(s.scv == Approx(4.0).epsilon(0.05));

  auto smooth = serf::ArrivalProcess::Create(ArrivalKind::kGamma, 50.0, 0.25);
  REQUIRE(smooth.ok());
  s = gap_stats(*smooth, 400000, 3);
  CHECK(s.scv == Approx(0.25).epsilon(0.02));

  auto det = serf::ArrivalProcess::Create(ArrivalKind::kDeterministic, 10.0, 0.0);
  REQUIRE(det.ok());
  std::mt19937_64 rng(1);
  CHECK(det->next_s(rng) == Approx(0.1));
  CHECK(det->next_s(rng) == Approx(0.2));
}

TEST_CASE("a rate schedule follows its segments and then ends", "[arrivals]") {
  auto p = serf::ArrivalProcess::CreateSchedule(serf::ArrivalKind::kPoisson,
                                                {{10.0, 100.0}, {5.0, 0.0}, {10.0, 400.0}});
  REQUIRE(p.ok());
  CHECK(p->mean_rate_per_s() == Approx(5000.0 / 25));
  std::mt19937_64 rng(7);
  std::vector<int> counts(3, 0);
  for (;;) {
    const double t = p->next_s(rng);
    if (std::isinf(t)) break;
    REQUIRE(t < 25.0);
    counts[t < 10 ? 0 : t < 15 ? 1 : 2]++;
  }
  CHECK(counts[0] == Approx(1000).margin(4 * std::sqrt(1000.0)));
  CHECK(counts[1] == 0);
  CHECK(counts[2] == Approx(4000).margin(4 * std::sqrt(4000.0)));
}

TEST_CASE("arrival processes reject bad parameters", "[arrivals]") {
  using serf::ArrivalKind;
  CHECK_FALSE(serf::ArrivalProcess::Create(ArrivalKind::kPoisson, 0.0).ok());
  CHECK_FALSE(serf::ArrivalProcess::Create(ArrivalKind::kPoisson, 1.0, 2.0).ok());
  CHECK_FALSE(serf::ArrivalProcess::Create(ArrivalKind::kGamma, 1.0, 0.0).ok());
  CHECK_FALSE(serf::ArrivalProcess::Create(ArrivalKind::kGamma, 1.0, NAN).ok());
  CHECK_FALSE(serf::ArrivalProcess::CreateSchedule(ArrivalKind::kPoisson, {}).ok());
  CHECK_FALSE(serf::ArrivalProcess::CreateSchedule(ArrivalKind::kPoisson, {{1.0, 0.0}}).ok());
  CHECK_FALSE(serf::parse_arrival_kind("bursty").ok());
  CHECK(*serf::parse_arrival_kind("gamma") == ArrivalKind::kGamma);
}
