// The bulk-service (batching) queue model against closed forms and brute-force chains.
#include "serf/core/batch_queue.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

using namespace serf;

namespace {

// P(A = k), k = 0..n, arrivals at rate lambda (per ms) during a Gamma(mean m, scv s) time.
std::vector<double> arrivals_pmf(double lambda, double m, double s, int n) {
  std::vector<double> p(static_cast<size_t>(n) + 1);
  if (s == 0) {  // Poisson(lambda m)
    const double a = lambda * m;
    p[0] = std::exp(-a);
    for (int k = 1; k <= n; ++k) p[k] = p[k - 1] * a / k;
  } else {  // negative binomial: shape 1/s, success probability 1 / (1 + lambda m s)
    const double r = 1.0 / s, q = lambda * m * s / (1.0 + lambda * m * s);
    p[0] = std::pow(1.0 - q, r);
    for (int k = 1; k <= n; ++k) p[k] = p[k - 1] * q * (r + k - 1) / k;
  }
  return p;
}

// The embedded chain at departures truncated at n states, solved by power iteration on the exact
// transition matrix (the truncated mass is sent to the last state), and the renewal-reward mean.
double brute_force_latency_ms(const std::vector<ServiceLevel>& levels, double rate_per_s, int n) {
  const int b = static_cast<int>(levels.size());
  const double lambda = rate_per_s / 1000.0;
  std::vector<std::vector<double>> pmf;
  for (const ServiceLevel& l : levels) pmf.push_back(arrivals_pmf(lambda, l.mean_ms, l.scv, n));
  std::vector<double> pi(static_cast<size_t>(n), 1.0 / n), next(static_cast<size_t>(n));
  for (int it = 0; it < 200000; ++it) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int q = 0; q < n; ++q) {
      const int size = std::max(1, std::min(q, b));
      const int base = q - std::min(q, b);
      double left = 1.0;
      for (int a = 0; base + a < n - 1; ++a) {
        next[base + a] += pi[q] * pmf[size - 1][a];
        left -= pmf[size - 1][a];
      }
      next[n - 1] += pi[q] * std::max(0.0, left);
    }
    double diff = 0;
    for (int q = 0; q < n; ++q) diff += std::abs(next[q] - pi[q]);
    pi.swap(next);
    if (diff < 1e-14) break;
  }
  double area = 0, length = 0;
  for (int q = 0; q < n; ++q) {
    const ServiceLevel& l = levels[static_cast<size_t>(std::max(1, std::min(q, b)) - 1)];
    const double s2 = l.mean_ms * l.mean_ms * (1 + l.scv);
    area += pi[q] * ((q == 0 ? 1 : q) * l.mean_ms + lambda * s2 / 2);
    length += pi[q] * ((q == 0 ? 1 / lambda : 0) + l.mean_ms);
  }
  return area / length / lambda;
}

double rate_at(const std::vector<ServiceLevel>& levels, double rho) {
  return rho * static_cast<double>(levels.size()) * 1000.0 / levels.back().mean_ms;
}

}  // namespace

TEST_CASE("bulk queue c = 1: b = 1 is M/G/1 (Pollaczek-Khinchine)", "[core][batch]") {
  for (double scv : {0.0, 0.3, 1.0, 2.5}) {
    for (double rho : {0.05, 0.5, 0.95}) {
      const std::vector<ServiceLevel> levels = {{20.0, scv}};
      const BatchPrediction p = bulk_single_slot(levels, rate_at(levels, rho));
      REQUIRE(p.stable);
      const double lambda = rho / 20.0;
      const double exact = 20.0 + lambda * 400.0 * (1 + scv) / (2 * (1 - rho));
      CHECK(p.latency_ms == Approx(exact).epsilon(1e-12));
      CHECK(p.service_ms == Approx(20.0).epsilon(1e-12));
      CHECK(p.mean_batch == Approx(1.0).epsilon(1e-12));
      CHECK(p.utilization == Approx(rho).epsilon(1e-12));
    }
  }
}

TEST_CASE("bulk queue c = 1: M/M^(b)/1 with one service rate (closed form)", "[core][batch]") {
  // The CTMC (idle | busy with q waiting): busy states are geometric, pi(q) = pi(0) r^q, with r
  // the root in (0, 1) of mu r^(b+1) - (lambda + mu) r + lambda = 0.
  const double m = 10.0, mu = 1 / m;
  for (int b : {2, 5, 16}) {
    for (double rho : {0.2, 0.6, 0.9}) {
      const double lambda = rho * b * mu;
      double lo = 0, hi = 1 - 1e-15;
      for (int it = 0; it < 200; ++it) {  // f(r) > 0 below the root, < 0 between it and 1
        const double r = (lo + hi) / 2;
        (mu * std::pow(r, b + 1) - (lambda + mu) * r + lambda > 0 ? lo : hi) = r;
      }
      const double r = lo;
      const double pi0 = 1 / (mu / lambda + 1 / (1 - r));
      const double waiting = pi0 * r / ((1 - r) * (1 - r));
      const std::vector<ServiceLevel> levels(static_cast<size_t>(b), ServiceLevel{m, 1.0});
      const BatchPrediction p = bulk_single_slot(levels, lambda * 1000);
      REQUIRE(p.stable);
      INFO("b = " << b << ", rho = " << rho);
      CHECK(p.latency_ms == Approx(m + waiting / lambda).epsilon(1e-9));
      CHECK(p.wait_ms == Approx(waiting / lambda).epsilon(1e-9));
    }
  }
}

TEST_CASE("bulk queue c = 1: size-dependent service against a brute-force chain", "[core][batch]") {
  struct Case {
    std::vector<ServiceLevel> levels;
    double rho;
  };
  const std::vector<Case> cases = {
      {{{10, 0}, {12, 0}, {14, 0}, {16, 0}}, 0.9},
      {{{10, 0.3}, {12, 0.2}, {14, 0.1}, {16, 0.5}}, 0.7},
      {{{5, 1}, {9, 1}, {20, 1}}, 0.5},
      {{{10, 0}, {13, 0}, {16, 0}, {19, 0}, {22, 0}, {25, 0}, {28, 0}, {31, 0}}, 0.8},
      {{{10, 0.25}, {11, 0.25}, {12, 0.25}, {13, 0.25}, {14, 0.25}, {15, 0.25}}, 0.3},
      {{{8, 0.1}, {9, 0.1}}, 0.05},
  };
  for (const Case& k : cases) {
    const double rate = rate_at(k.levels, k.rho);
    const BatchPrediction p = bulk_single_slot(k.levels, rate);
    REQUIRE(p.stable);
    INFO("b = " << k.levels.size() << ", rho = " << k.rho);
    CHECK(p.latency_ms == Approx(brute_force_latency_ms(k.levels, rate, 400)).epsilon(1e-8));
    CHECK(p.service_ms >= k.levels.front().mean_ms);
    CHECK(p.service_ms <= k.levels.back().mean_ms);
    CHECK(p.mean_batch >= 1.0);
    CHECK(p.mean_batch <= static_cast<double>(k.levels.size()));
  }
}

TEST_CASE("bulk queue c = 1: unstable and degenerate input", "[core][batch]") {
  const std::vector<ServiceLevel> levels = {{10, 0}, {15, 0}};
  CHECK_FALSE(bulk_single_slot(levels, rate_at(levels, 1.0)).stable);
  CHECK_FALSE(bulk_single_slot(levels, rate_at(levels, 1.2)).stable);
  CHECK_FALSE(bulk_single_slot(levels, 0.0).stable);
  CHECK_FALSE(bulk_single_slot({}, 1.0).stable);
  // Just below saturation the answer stays finite and large.
  const BatchPrediction p = bulk_single_slot(levels, rate_at(levels, 0.999));
  REQUIRE(p.stable);
  CHECK(std::isfinite(p.latency_ms));
  CHECK(p.latency_ms > 100.0);
}

namespace {

// mean_ms(i, n) = 10 (1 + 0.2 (i - 1)) (1 + g (n - 1)), SCV s everywhere.
ServiceTable table_of(int c, int b, double g, double s) {
  std::vector<ServiceLevel> levels;
  for (int i = 1; i <= c; ++i) {
    for (int n = 1; n <= b; ++n)
      levels.push_back({10.0 * (1 + 0.2 * (i - 1)) * (1 + g * (n - 1)), s});
  }
  return *ServiceTable::Create(c, b, std::move(levels));
}

}  // namespace

TEST_CASE("batch model with b = 1 is the queue model of its kind, exactly", "[core][batch]") {
  for (QueueKind kind : {QueueKind::kMdInterf, QueueKind::kMmInterf, QueueKind::kMgInterf}) {
    for (int c : {1, 3, 8}) {
      const ServiceTable t = table_of(c, 1, 0.0, 0.3);
      auto batch = BatchQueueModel::Create(kind, t);
      REQUIRE(batch.ok());
      std::vector<double> mean, scv;
      for (int i = 1; i <= c; ++i) {
        mean.push_back(t.at(i, 1).mean_ms);
        scv.push_back(0.3);
      }
      auto plain = QueueModel::Create(kind, mean, scv);
      REQUIRE(plain.ok());
      for (double rho : {0.1, 0.5, 0.9}) {
        const double rate = rho * c * 1000.0 / t.at(c, 1).mean_ms;
        const BatchPrediction a = batch->predict(rate);
        const Prediction p = plain->predict(c, rate);
        REQUIRE(a.stable);
        CHECK(a.latency_ms == p.latency_ms);
        CHECK(a.wait_ms == p.wait_ms);
        CHECK(a.mean_batch == 1.0);
      }
    }
  }
}

TEST_CASE("batch model with c = 1 is the exact single-slot bulk queue", "[core][batch]") {
  const ServiceTable t = table_of(1, 8, 0.3, 0.2);
  std::vector<ServiceLevel> levels;
  for (int n = 1; n <= 8; ++n) levels.push_back(t.at(1, n));
  for (QueueKind kind : {QueueKind::kMgInterf, QueueKind::kMdInterf, QueueKind::kMmInterf}) {
    auto m = BatchQueueModel::Create(kind, t);
    REQUIRE(m.ok());
    CHECK(m->exact());
    std::vector<ServiceLevel> as_kind = levels;
    for (ServiceLevel& l : as_kind) {
      l.scv = kind == QueueKind::kMdInterf ? 0.0 : kind == QueueKind::kMmInterf ? 1.0 : 0.2;
    }
    for (double rho : {0.05, 0.5, 0.95}) {
      const double rate = rho * m->max_rate_per_s();
      const BatchPrediction a = m->predict(rate), e = bulk_single_slot(as_kind, rate);
      REQUIRE(a.stable);
      CHECK(a.latency_ms == Approx(e.latency_ms).epsilon(1e-9));
      CHECK(a.service_ms == Approx(e.service_ms).epsilon(1e-9));
      CHECK(a.utilization == Approx(rho).epsilon(1e-12));
    }
  }
}

TEST_CASE("batch model: stability, monotone latency, and what it refuses", "[core][batch]") {
  const ServiceTable t = table_of(4, 16, 0.1, 0.05);
  auto m = BatchQueueModel::Create(QueueKind::kMgInterf, t);
  REQUIRE(m.ok());
  CHECK_FALSE(m->exact());
  CHECK(m->max_rate_per_s() == Approx(1000.0 * 4 * 16 / t.at(4, 16).mean_ms));
  CHECK_FALSE(m->predict(m->max_rate_per_s()).stable);
  CHECK_FALSE(m->predict(0.0).stable);
  double last = 0, last_batch = 0;
  for (double rho = 0.02; rho < 0.999; rho += 0.02) {
    const BatchPrediction p = m->predict(rho * m->max_rate_per_s());
    REQUIRE(p.stable);
    INFO("rho " << rho);
    CHECK(p.latency_ms > last);
    CHECK(p.mean_batch >= last_batch - 1e-9);
    CHECK(p.mean_batch >= 1.0);
    CHECK(p.mean_batch <= 16.0);
    CHECK(p.latency_ms >= m->min_latency_ms());
    last = p.latency_ms;
    last_batch = p.mean_batch;
  }
  CHECK_FALSE(BatchQueueModel::Create(QueueKind::kMdc, t).ok());
  CHECK_FALSE(BatchQueueModel::Create(QueueKind::kAllenCunneen, t).ok());
}
