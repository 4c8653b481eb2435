#include "serf/sim/histogram.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "serf/core/statistics.h"

TEST_CASE("histogram quantiles are within the stated relative error of an exact sort", "[sim]") {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> dist(2.0, 1.5);
  std::vector<double> xs(200001);
  serf::sim::LatencyHistogram h;
  for (double& x : xs) {
    x = dist(rng);
    h.add(x);
  }
  std::sort(xs.begin(), xs.end());
  for (double q : {0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const double exact = serf::quantile_sorted(xs, q);  // the one definition (type 7)
    CHECK(std::abs(h.quantile(q) - exact) <= serf::sim::LatencyHistogram::kRelativeError * exact);
  }
}

TEST_CASE("histogram counts zeros and merges", "[sim]") {
  serf::sim::LatencyHistogram a, b;
  for (int k = 0; k < 60; ++k) a.add(0.0);
  for (int k = 0; k < 40; ++k) b.add(5.0);
  a.merge(b);
  CHECK(a.count() == 100);
  CHECK(a.quantile(0.5) == 0.0);
  CHECK(a.quantile(0.61) == Approx(5.0).epsilon(serf::sim::LatencyHistogram::kRelativeError));
}
