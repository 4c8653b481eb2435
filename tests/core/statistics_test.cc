// The statistics module (serf/core/statistics.h) against values computed by hand.
#include "serf/core/statistics.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

using namespace serf;

TEST_CASE("quantiles interpolate between order statistics (Hyndman-Fan type 7)", "[core]") {
  // Sorted 10, 20, 30, 40: h = 3q. q = 0.5: h = 1.5, 20 + 0.5 * 10 = 25 (the usual median).
  const std::vector<double> v = {40, 10, 30, 20};
  CHECK(quantile(v, 0.5) == Approx(25));
  CHECK(median(v) == Approx(25));
  CHECK(quantile(v, 0.0) == 10);  // the min
  CHECK(quantile(v, 1.0) == 40);  // the max
  // q = 0.9: h = 2.7, 30 + 0.7 * 10 = 37.
  CHECK(quantile(v, 0.9) == Approx(37));
  // q = 0.99 over 1..100: h = 98.01, 99 + 0.01 * 1 = 99.01 (numpy's percentile(..., 99)).
  std::vector<double> hundred;
  for (int k = 1; k <= 100; ++k) hundred.push_back(k);
  CHECK(quantile_sorted(hundred, 0.99) == Approx(99.01));
  CHECK(quantile_sorted(hundred, 0.999) == Approx(99.901));  // p99.9, as serf load reports it
  CHECK(median({3, 1, 2}) == 2);                             // odd count: the middle value
  CHECK(quantile({}, 0.5) == 0);
  CHECK(quantile({7}, 0.99) == 7);
  CHECK(quantile(v, 2.0) == 40);  // q clamped to [0, 1]
}

TEST_CASE("the mean within z MADs of the median leaves wild values out", "[core]") {
  // 1..10 and a wild 1000: median 6, absolute deviations 0..5 and 994, MAD 3, robust sd 4.45;
  // z = 5 keeps |x - 6| <= 22.2: 1..10, mean 5.5. The plain mean is 95.5.
  const std::vector<double> v = {1000, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  CHECK(mean_within_mad(v, 5) == Approx(5.5));
  CHECK(mean_within_mad(v, 1e9) == Approx(mean(v)));
  // z = 1: |x - 6| <= 4.45: 2..10, mean 6.
  CHECK(mean_within_mad(v, 1) == Approx(6));
  // A skewed but steady spread is kept whole (a trimmed mean would cut its tail): 1, 1, 2, 3, 5,
  // median 2, MAD 1, robust sd 1.48; z = 5 keeps all: 2.4.
  CHECK(mean_within_mad({1, 1, 2, 3, 5}, 5) == Approx(2.4));
  // MAD 0: the values equal to the median are left, never none.
  CHECK(mean_within_mad({7, 7, 7, 30}, 5) == 7);
  CHECK(mean_within_mad({2, 4}, 5) == 3);  // two values: both within
  CHECK(mean_within_mad({9}, 5) == 9);
  CHECK(mean_within_mad({}, 5) == 0);
}

TEST_CASE("mean, variance (second central moment) and SCV", "[core]") {
  // 1, 3: mean 2, variance ((1-2)^2 + (3-2)^2) / 2 = 1, SCV 1 / 4.
  CHECK(mean({1, 3}) == 2);
  CHECK(variance({1, 3}) == 1);
  CHECK(scv({1, 3}) == Approx(0.25));
  CHECK(mean({}) == 0);
  CHECK(variance({5}) == 0);
  CHECK(scv({0, 0}) == 0);
}

TEST_CASE("95 % CI of independent means and batch means", "[core]") {
  // Means 1, 2, 3: sample sd 1, t(0.975, 2 dof) = 4.302653, half-width 4.302653 / sqrt(3).
  CHECK(ci95_half_width({1, 2, 3}) == Approx(4.302653 / std::sqrt(3.0)).epsilon(1e-6));
  CHECK(ci95_half_width({1}) == -1);
  // 2 batches of 1, 2 | 3, 4 (means 1.5, 3.5): sd sqrt(2), t(0.975, 1) = 12.7062, / sqrt(2).
  CHECK(batch_means_ci95({1, 2, 3, 4}, 2) == Approx(12.706205).epsilon(1e-6));
  // The last batch takes the remainder: 1, 2 | 3, 4, 5 -> means 1.5, 4: sd 1.767767.
  CHECK(batch_means_ci95({1, 2, 3, 4, 5}, 2) ==
        Approx(12.706205 * 1.767767 / std::sqrt(2.0)).epsilon(1e-6));
  CHECK(batch_means_ci95({1, 2, 3}, 2) == -1);                    // fewer than 2 values per batch
  CHECK(batch_means_ci95(std::vector<double>(100, 5.0)) == 0.0);  // constant data, 10 batches
  CHECK(batch_means_ci95({1, 2, 3}) < 0);  // too few for the default 10 batches
}

TEST_CASE("Gamma draws have the given mean and SCV", "[core]") {
  std::mt19937_64 rng(3);
  for (double scv_wanted : {0.25, 1.0, 4.0}) {
    GammaDraw draw(20.0, scv_wanted);
    std::vector<double> xs(200000);
    for (double& x : xs) x = draw(rng);
    CHECK(mean(xs) == Approx(20.0).epsilon(0.02));
    CHECK(scv(xs) == Approx(scv_wanted).epsilon(0.05));
  }
  GammaDraw constant(7.5, 0.0);  // SCV 0: the mean itself
  CHECK(constant(rng) == 7.5);
}

TEST_CASE("number formatters", "[core]") {
  CHECK(format_ms(12.345) == "12.3 ms");
  CHECK(format_rate(0.5) == "0.5");
  CHECK(format_rate(12.3456) == "12.35");
  CHECK(format_rate(123456.7) == "123457");  // no exponent past 1000
  CHECK(format_rate_text(2) == "2 requests/s");
  CHECK(format_percent(0.1234) == "12.3%");
  CHECK(format_count(28559232) == "28,559,232");
  CHECK(format_count(-1234) == "-1,234");
  CHECK(format_count(999) == "999");
  CHECK(format_shortest(0.1) == "0.1");
  CHECK(format_g(1e-300) == "1e-300");
  CHECK(format_sig4(270.39) == "270.4");
}
