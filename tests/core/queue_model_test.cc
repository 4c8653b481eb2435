#include "serf/core/queue_model.h"

#include <algorithm>
#include <boost/math/distributions/poisson.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <utility>
#include <vector>

using serf::Prediction;
using serf::QueueKind;
using serf::QueueModel;

namespace {

QueueModel make(QueueKind kind, const std::vector<double>& mean_ms, double scv = 0.0) {
  auto m = QueueModel::Create(kind, mean_ms, scv);
  REQUIRE(m.ok());
  return std::move(m).value();
}

// c servers that all take 1 s (mu = 1/s), so rates are in Erlangs.
std::vector<double> equal_ms(int c, double ms = 1000.0) {
  return std::vector<double>(static_cast<size_t>(c), ms);
}

}  // namespace

TEST_CASE("queue model names parse and print", "[core][queue]") {
  for (const char* name :
       {"md-interf", "mm-interf", "mdc", "mmc", "allen-cunneen", "mdc-exact", "mg-interf"}) {
    auto k = serf::parse_queue_kind(name);
    REQUIRE(k.ok());
    CHECK(std::string(serf::to_string(*k)) == name);
  }
  auto bad = serf::parse_queue_kind("mg1");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("md-interf"));
}

TEST_CASE("M/M/c waits match Erlang C", "[core][queue]") {
  // Wq = C(c, a) / (c mu - lambda) with mu = 1/s; C from the textbook formula.
  struct Case {
    int c;
    double a, wq_s;
  } cases[] = {{2, 1.0, 1.0 / 3.0},
               {3, 2.0, 4.0 / 9.0},
               {10, 8.0, 0.20459007539822177},
               {50, 45.0, 0.07277289344139767}};
  for (const auto& k : cases) {
    for (QueueKind kind : {QueueKind::kMmc, QueueKind::kMmInterf}) {
      const Prediction p = make(kind, equal_ms(k.c)).predict(k.c, k.a);
      REQUIRE(p.stable);
      CHECK(p.wait_ms == Approx(1000.0 * k.wq_s).epsilon(1e-12));
      CHECK(p.service_ms == Approx(1000.0).epsilon(1e-12));
      CHECK(p.utilization == Approx(k.a / k.c));
    }
  }
}

TEST_CASE("exact M/D/c matches published values", "[core][queue]") {
  CHECK(serf::exact_mdc_wait_over_d(2, 0.9) == Approx(2.146923).margin(5e-7));
  CHECK(serf::exact_mdc_wait_over_d(5, 0.8) == Approx(0.289060).margin(5e-7));
  CHECK(serf::exact_mdc_wait_over_d(10, 0.7) == Approx(0.041872).margin(5e-7));
  // c = 1 is M/D/1: Wq/D = rho / (2 (1 - rho)).
  for (double rho : {0.1, 0.5, 0.9, 0.99}) {
    CHECK(serf::exact_mdc_wait_over_d(1, rho) == Approx(rho / (2 * (1 - rho))).epsilon(1e-10));
  }
  // Through the model: D = 200 ms, c = 5, rho = 0.8 -> lambda = 20/s.
  const Prediction p = make(QueueKind::kMdcExact, equal_ms(5, 200.0)).predict(5, 20.0);
  REQUIRE(p.stable);
  CHECK(p.wait_ms == Approx(200.0 * 0.289060).margin(1e-4));
  CHECK(p.latency_ms == Approx(200.0 + p.wait_ms));
}

TEST_CASE("Cosmetatos is close to exact M/D/c", "[core][queue]") {
  // The approximation the paper builds on is within a few percent at moderate loads.
  for (int c : {2, 5, 10, 20}) {
    for (double rho : {0.5, 0.7, 0.9}) {
      const Prediction approx = make(QueueKind::kMdc, equal_ms(c)).predict(c, c * rho);
      const double exact = 1000.0 * serf::exact_mdc_wait_over_d(c, rho);
      CHECK(approx.wait_ms == Approx(exact).epsilon(0.06));
    }
  }
}

TEST_CASE("c = 1 reduces to Pollaczek-Khinchine M/D/1", "[core][queue]") {
  const double mean_ms = 250.0, mu = 4.0;
  for (double lambda : {0.4, 2.0, 3.6, 3.99}) {
    const double rho = lambda / mu;
    const double wq_ms = 1000.0 * rho / (2 * mu * (1 - rho));
    for (QueueKind kind : {QueueKind::kMdInterf, QueueKind::kMdc, QueueKind::kMdcExact}) {
      const Prediction p = make(kind, {mean_ms}).predict(1, lambda);
      REQUIRE(p.stable);
      CHECK(p.wait_ms == Approx(wq_ms).epsilon(1e-9));
      CHECK(p.latency_ms == Approx(mean_ms + wq_ms).epsilon(1e-9));
    }
  }
}

TEST_CASE("equal service rates reduce M/D_interf/c to Cosmetatos' M/D/c", "[core][queue]") {
  for (int c : {1, 2, 4, 8, 64}) {
    const auto md_interf = make(QueueKind::kMdInterf, equal_ms(c, 300.0));
    const auto mdc = make(QueueKind::kMdc, equal_ms(c, 300.0));
    for (double rho : {0.05, 0.5, 0.95}) {
      const double lambda = rho * c / 0.3;
      const Prediction a = md_interf.predict(c, lambda), b = mdc.predict(c, lambda);
      REQUIRE(a.stable);
      CHECK(a.latency_ms == Approx(b.latency_ms).epsilon(1e-11));
      CHECK(a.wait_ms == Approx(b.wait_ms).epsilon(1e-11).margin(1e-300));
    }
  }
  // And mdc is Cosmetatos' formula on Erlang C (value computed by hand, c = 4, a = 3, mu = 1/s).
  CHECK(make(QueueKind::kMdc, equal_ms(4)).predict(4, 3.0).wait_ms ==
        Approx(1000.0 * 0.2662547827403142).epsilon(1e-12));
}

TEST_CASE("interference: M/M_interf/c and M/D_interf/c match a brute-force chain",
          "[core][queue]") {
  // Reference: the birth-death chain truncated at 5000 states, summed directly (c = 3, means
  // 100/120/150 ms, lambda = 15/s, rho = 0.75).
  const std::vector<double> means = {100.0, 120.0, 150.0};
  const Prediction mm = make(QueueKind::kMmInterf, means).predict(3, 15.0);
  REQUIRE(mm.stable);
  CHECK(mm.service_ms == Approx(137.97468354430382).epsilon(1e-12));
  CHECK(mm.wait_ms == Approx(102.53164556962021).epsilon(1e-12));
  const Prediction md = make(QueueKind::kMdInterf, means).predict(3, 15.0);
  CHECK(md.service_ms == Approx(137.97468354430382).epsilon(1e-12));
  CHECK(md.wait_ms == Approx(52.945418551571656).epsilon(1e-12));
  CHECK(md.latency_ms == Approx(190.92010209587545).epsilon(1e-12));
  CHECK(md.utilization == Approx(0.75));
}

TEST_CASE("Allen-Cunneen scales the Erlang C wait by (1 + scv) / 2", "[core][queue]") {
  const Prediction mmc = make(QueueKind::kMmc, equal_ms(3)).predict(3, 2.0);
  const Prediction ac = make(QueueKind::kAllenCunneen, equal_ms(3), 0.25).predict(3, 2.0);
  CHECK(ac.wait_ms == Approx(mmc.wait_ms * 0.625).epsilon(1e-12));
}

TEST_CASE("latency grows with the arrival rate for every model", "[core][queue]") {
  const std::vector<double> means = {400, 460, 540, 650, 790, 960, 1170, 1420};
  for (QueueKind kind : {QueueKind::kMdInterf, QueueKind::kMmInterf, QueueKind::kMdc,
                         QueueKind::kMmc, QueueKind::kAllenCunneen, QueueKind::kMdcExact}) {
    const auto m = make(kind, means, 0.1);
    for (int c = 1; c <= 8; ++c) {
      double last = 0;
      const double top = m.max_rate_per_s(c);
      for (int k = 1; k < 200; ++k) {
        const Prediction p = m.predict(c, top * k / 200.0);
        REQUIRE(p.stable);
        CHECK(p.latency_ms > last);
        CHECK(p.latency_ms >= m.min_latency_ms(c));
        last = p.latency_ms;
      }
    }
  }
}

TEST_CASE("state probabilities sum to 1", "[core][queue]") {
  const auto m = make(QueueKind::kMdInterf, {100.0, 120.0, 150.0, 190.0});
  for (double lambda : {1.0, 10.0, 20.0}) {
    const auto p = m.state_probabilities(4, lambda, 20000);
    REQUIRE(p.size() == 20001);
    double sum = 0;
    for (double x : p) sum += x;
    CHECK(sum == Approx(1.0).epsilon(1e-12));
  }
  // Large c in log space.
  const auto big = make(QueueKind::kMmInterf, equal_ms(5000));
  const auto p = big.state_probabilities(5000, 4900.0, 200000);
  double sum = 0;
  for (double x : p) sum += x;
  CHECK(sum == Approx(1.0).epsilon(1e-10));
}

TEST_CASE("predict_all agrees with predict for every c", "[core][queue]") {
  const std::vector<double> means = {400, 460, 540, 650, 790, 960, 1170, 1420};
  for (QueueKind kind : {QueueKind::kMdInterf, QueueKind::kMmc, QueueKind::kMdcExact}) {
    const auto m = make(kind, means);
    std::vector<Prediction> all(means.size());
    for (double lambda : {0.5, 3.0, 6.0}) {
      m.predict_all(lambda, all.data());
      for (int c = 1; c <= 8; ++c) {
        const Prediction one = m.predict(c, lambda);
        CHECK(all[c - 1].stable == one.stable);
        if (one.stable) CHECK(all[c - 1].latency_ms == Approx(one.latency_ms).epsilon(1e-14));
      }
    }
  }
}

TEST_CASE("large c stays finite and the two kernels agree", "[core][queue]") {
  for (int c : {200, 1000, 10000}) {
    for (double rho : {0.01, 0.5, 0.9, 0.999}) {
      auto fast = make(QueueKind::kMdInterf, equal_ms(c, 100.0));
      auto slow = make(QueueKind::kMdInterf, equal_ms(c, 100.0));
      slow.force_log_space(true);
      const double lambda = rho * c * 10.0;
      const Prediction a = fast.predict(c, lambda), b = slow.predict(c, lambda);
      REQUIRE(a.stable);
      REQUIRE(b.stable);
      CHECK(std::isfinite(a.latency_ms));
      CHECK(a.latency_ms >= 100.0 * (1 - 1e-12));  // S is a mean of equal service times
      CHECK(a.latency_ms == Approx(b.latency_ms).epsilon(1e-9));
      CHECK(a.wait_ms == Approx(b.wait_ms).epsilon(1e-7).margin(1e-12));
    }
  }
  // Exact M/D/c for large c: finite, non-negative, below Cosmetatos' M/M/c bound.
  for (int c : {1000, 10000}) {
    const double w = serf::exact_mdc_wait_over_d(c, 0.99);
    CHECK(std::isfinite(w));
    CHECK(w >= 0);
    const double mmc = make(QueueKind::kMmc, equal_ms(c)).predict(c, 0.99 * c).wait_ms / 1000.0;
    CHECK(w < mmc);
  }
  // Interference that falls with i (so the fast kernel does not apply) at large c.
  std::vector<double> means(10000);
  for (size_t i = 0; i < means.size(); ++i) means[i] = 100.0 * (1.0 + 0.5 * std::sin(0.01 * i));
  auto wavy = make(QueueKind::kMdInterf, means);
  const Prediction p = wavy.predict(10000, 0.7 * wavy.max_rate_per_s(10000));
  CHECK(p.stable);
  CHECK(std::isfinite(p.latency_ms));
  CHECK(p.latency_ms >= wavy.min_latency_ms(10000));
}

TEST_CASE("rho >= 1 is unstable, never a number", "[core][queue]") {
  const auto m = make(QueueKind::kMdInterf, {100.0, 150.0});
  CHECK(m.max_rate_per_s(2) == Approx(2 / 0.15));
  CHECK_FALSE(m.predict(2, 2 / 0.15).stable);
  CHECK_FALSE(m.predict(2, 100.0).stable);
  CHECK(m.predict(2, 13.0).stable);
  CHECK_FALSE(m.predict(1, 10.0).stable);
  CHECK_FALSE(m.predict(2, 0.0).stable);
  CHECK_FALSE(m.predict(2, std::nan("")).stable);
  CHECK_FALSE(make(QueueKind::kMdcExact, {100.0}).predict(1, 10.0).stable);
  // Within an ulp of the limit: a finite number or unstable, for every model, never inf or NaN.
  for (QueueKind kind : {QueueKind::kMdInterf, QueueKind::kMmInterf, QueueKind::kMdc,
                         QueueKind::kAllenCunneen, QueueKind::kMdcExact}) {
    const auto big = make(kind, {1e9, 2e9, 3e9, 4e9});
    for (int c = 1; c <= 4; ++c) {
      const Prediction p = big.predict(c, std::nextafter(big.max_rate_per_s(c), 0.0));
      if (p.stable) CHECK(std::isfinite(p.latency_ms));
      if (p.stable) CHECK(std::isfinite(p.wait_ms));
    }
  }
}

TEST_CASE("bad service times are rejected", "[core][queue]") {
  CHECK_FALSE(QueueModel::Create(QueueKind::kMdInterf, {}).ok());
  CHECK_FALSE(QueueModel::Create(QueueKind::kMdInterf, {100.0, -1.0}).ok());
  CHECK_FALSE(QueueModel::Create(QueueKind::kMdInterf, {100.0, std::nan("")}).ok());
  CHECK_FALSE(QueueModel::Create(QueueKind::kAllenCunneen, {100.0}, -0.1).ok());
}

namespace {

// Independent check of exact M/D/c: the chain Q(t + D) = max(Q(t) - c, 0) + Poisson(a), truncated
// at n_max states and solved directly (Gaussian elimination on pi (P - I) = 0, sum pi = 1). Its
// stationary law is the time-stationary number in system, so Wq/D = E[(Q - c)+] / a.
double chain_mdc_wait_over_d(int c, double rho, int n_max) {
  const double a = c * rho;
  const boost::math::poisson_distribution<double> arrivals(a);
  const int n = n_max + 1;
  // Rows: equations sum_i pi_i (P_ij - delta_ij) = 0 for j < n - 1, last row sum pi = 1.
  std::vector<std::vector<double>> m(static_cast<size_t>(n), std::vector<double>(n + 1, 0.0));
  for (int i = 0; i < n; ++i) {
    const int base = std::max(i - c, 0);
    double left = 1.0;
    for (int j = base; j < n; ++j) {
      const double p = j == n - 1 ? left : boost::math::pdf(arrivals, j - base);
      left -= p;
      if (j < n - 1) m[j][i] += p;
    }
    if (i < n - 1) m[i][i] -= 1.0;
  }
  for (int i = 0; i < n; ++i) m[n - 1][i] = 1.0;
  m[n - 1][n] = 1.0;
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
    }
    std::swap(m[col], m[pivot]);
    for (int r = 0; r < n; ++r) {
      if (r == col || m[r][col] == 0.0) continue;
      const double f = m[r][col] / m[col][col];
      for (int k = col; k <= n; ++k) m[r][k] -= f * m[col][k];
    }
  }
  double lq = 0;
  for (int i = c + 1; i < n; ++i) lq += (i - c) * (m[i][n] / m[i][i]);
  return lq / a;
}

}  // namespace

TEST_CASE("exact M/D/c agrees with the embedded chain solved directly", "[core][queue]") {
  for (auto [c, rho] : {std::pair<int, double>{1, 0.5}, {3, 0.7}, {8, 0.85}, {20, 0.6}}) {
    INFO("c=" << c << " rho=" << rho);
    CHECK(serf::exact_mdc_wait_over_d(c, rho) ==
          Approx(chain_mdc_wait_over_d(c, rho, 300)).epsilon(1e-8).margin(1e-12));
  }
}

TEST_CASE("mg-interf: md-interf at SCV 0, mm-interf at SCV 1, Pollaczek-Khinchine at c = 1",
          "[core][queue]") {
  const std::vector<double> means = {100.0, 110.0, 125.0, 140.0, 160.0};
  for (int c = 1; c <= 5; ++c) {
    const double top = c * 1000.0 / means[static_cast<size_t>(c - 1)];
    for (double rho : {0.05, 0.4, 0.8, 0.97}) {
      INFO("c = " << c << ", rho = " << rho);
      const double rate = rho * top;
      const Prediction md = make(QueueKind::kMdInterf, means).predict(c, rate);
      const Prediction mm = make(QueueKind::kMmInterf, means).predict(c, rate);
      const Prediction g0 = make(QueueKind::kMgInterf, means, 0.0).predict(c, rate);
      const Prediction g1 = make(QueueKind::kMgInterf, means, 1.0).predict(c, rate);
      CHECK(g0.wait_ms == Approx(md.wait_ms).epsilon(1e-12));
      CHECK(g1.wait_ms == Approx(mm.wait_ms).epsilon(1e-12));
      CHECK(g0.service_ms == md.service_ms);
      // Between the two (and beyond mm-interf above SCV 1), growing with the SCV, wherever the
      // deterministic wait is the smaller (in light traffic Cosmetatos' factor makes Eq. 10 exceed
      // the exponential wait for c >= 2; the interpolation then runs the other way).
      const Prediction half = make(QueueKind::kMgInterf, means, 0.5).predict(c, rate);
      const Prediction more = make(QueueKind::kMgInterf, means, 1.5).predict(c, rate);
      if (md.wait_ms < mm.wait_ms) {
        CHECK(half.wait_ms > md.wait_ms);
        CHECK(half.wait_ms < mm.wait_ms);
        CHECK(more.wait_ms > mm.wait_ms);
      } else {
        CHECK(rho < 0.5);
        CHECK(half.wait_ms <= md.wait_ms);
        CHECK(half.wait_ms >= mm.wait_ms);
      }
    }
  }
  // c = 1: W_q = lambda E[S^2] / (2 (1 - rho)) for any SCV.
  for (double scv : {0.0, 0.25, 1.0, 1.5}) {
    const double rho = 0.7, s = 0.1, lambda = rho / s;
    const Prediction p = make(QueueKind::kMgInterf, {100.0}, scv).predict(1, lambda);
    CHECK(p.wait_ms ==
          Approx(1000.0 * lambda * s * s * (1 + scv) / (2 * (1 - rho))).epsilon(1e-12));
  }
  // The SCV of tuple c counts, not of tuple 1.
  auto per_level = QueueModel::Create(QueueKind::kMgInterf, {100.0, 120.0}, {0.0, 1.0});
  REQUIRE(per_level.ok());
  CHECK(per_level->predict(2, 12.0).wait_ms ==
        Approx(make(QueueKind::kMmInterf, {100.0, 120.0}).predict(2, 12.0).wait_ms));
}
