// The fast code of serf/core/queue_model.cc against a literal transcription of the paper's
// Eq. 10-12 (ARCHITECTURE.md, docs/queueing.md "The paper's equations in the code"): plain
// products of rho_i and factorials in long double, no log space, no rescaling, no folding of
// g(rho). Small c only (1..8), where the plain products cannot overflow.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "serf/core/queue_model.h"

using serf::Prediction;
using serf::QueueKind;
using serf::QueueModel;

namespace {

struct Literal {
  long double wait_s = 0;     // Eq. 10
  long double service_s = 0;  // Eq. 11
  long double latency_s = 0;  // Eq. 12
};

long double factorial(int n) {
  long double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

// prod_{i=1..n} rho_i
long double prod_rho(const std::vector<long double>& rho_i, int n) {
  long double p = 1;
  for (int i = 1; i <= n; ++i) p *= rho_i[static_cast<size_t>(i - 1)];
  return p;
}

// M/D_interf/c as the paper writes it, with mu_i = 1 / (mean of tuple i in s).
Literal paper_md_interf(const std::vector<double>& mean_ms, int c, long double lambda) {
  std::vector<long double> mu(static_cast<size_t>(c)), rho_i(static_cast<size_t>(c));
  for (int i = 1; i <= c; ++i) {
    mu[static_cast<size_t>(i - 1)] = 1000.0L / mean_ms[static_cast<size_t>(i - 1)];
    rho_i[static_cast<size_t>(i - 1)] = lambda / mu[static_cast<size_t>(i - 1)];
  }
  const long double mu_c = mu[static_cast<size_t>(c - 1)];
  const long double rho = lambda / (c * mu_c);
  // p_0 normalises p_n = p_0 prod_{i<=n} rho_i / n! (n < c) and the geometric tail
  // p_n = p_0 rho^(n-c) prod_{i<=c} rho_i / c! (n >= c), summed in closed form.
  long double inv_p0 = 0;
  for (int n = 0; n < c; ++n) inv_p0 += prod_rho(rho_i, n) / factorial(n);
  inv_p0 += prod_rho(rho_i, c) / factorial(c) / (1 - rho);
  const long double p0 = 1 / inv_p0;
  const long double f_c = (c - 1) * (std::sqrt(4.0L + 5.0L * c) - 2) / (16.0L * c);
  const long double g_rho = (1 - rho) / rho;
  Literal out;
  // Eq. 10
  out.wait_s = 0.5L * (1 + f_c * g_rho) * p0 * prod_rho(rho_i, c) / (lambda * factorial(c)) * rho /
               ((1 - rho) * (1 - rho));
  // Eq. 11: sum_{i=1..c} p_{i-1} / mu_i + p_0 prod rho_i / (mu_c c! (1 - rho))
  for (int i = 1; i <= c; ++i) {
    const long double p_prev = p0 * prod_rho(rho_i, i - 1) / factorial(i - 1);
    out.service_s += p_prev / mu[static_cast<size_t>(i - 1)];
  }
  out.service_s += p0 * prod_rho(rho_i, c) / (mu_c * factorial(c) * (1 - rho));
  // Eq. 12
  out.latency_s = out.service_s + out.wait_s;
  return out;
}

// Interference profiles of 8 tuples (ms): none, mild and steep slowdown, sublinear speedup of the
// slot (mean grows slower than i), and an irregular one whose per-request rate is not monotone.
std::vector<std::pair<std::string, std::vector<double>>> profiles() {
  std::vector<std::pair<std::string, std::vector<double>>> out;
  std::vector<double> flat, mild, steep, irregular;
  for (int i = 1; i <= 8; ++i) {
    flat.push_back(40.0);
    mild.push_back(40.0 * (1.0 + 0.05 * (i - 1)));
    steep.push_back(40.0 * std::pow(1.35, i - 1));
  }
  irregular = {12.5, 19.0, 17.5, 31.0, 29.0, 55.0, 48.0, 90.0};
  out.emplace_back("flat", flat);
  out.emplace_back("mild", mild);
  out.emplace_back("steep", steep);
  out.emplace_back("irregular", irregular);
  return out;
}

void check_close(double fast, long double literal, const std::string& what) {
  INFO(what << ": fast " << fast << " literal " << static_cast<double>(literal));
  REQUIRE(std::isfinite(fast));
  const long double rel = std::fabs((fast - literal) / literal);
  CHECK(rel <= 1e-9L);
}

}  // namespace

TEST_CASE("Eq. 10-12: the fast code equals a literal transcription of the paper for c 1..8",
          "[core][queue][paper]") {
  const std::vector<double> rhos = {0.001, 0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.99};
  int compared = 0;
  for (const auto& [name, mean_ms] : profiles()) {
    for (bool log_space : {false, true}) {
      auto created = QueueModel::Create(QueueKind::kMdInterf, mean_ms, 0.0);
      REQUIRE(created.ok());
      QueueModel model = std::move(created).value();
      model.force_log_space(log_space);
      REQUIRE(model.uses_fast_kernel() == !log_space);
      for (double rho : rhos) {
        // One arrival rate for every c at once (predict_all), then one per c at this rho.
        for (int c = 1; c <= 8; ++c) {
          const double lambda = rho * c * 1000.0 / mean_ms[static_cast<size_t>(c - 1)];
          const Literal lit = paper_md_interf(mean_ms, c, lambda);
          const Prediction p = model.predict(c, lambda);
          std::vector<Prediction> all(8);
          model.predict_all(lambda, all.data());
          const std::string where = name + (log_space ? " log" : " fast") +
                                    " c=" + std::to_string(c) + " rho=" + std::to_string(rho);
          REQUIRE(p.stable);
          CHECK(p.utilization == Approx(rho).epsilon(1e-12));
          check_close(p.wait_ms / 1000.0, lit.wait_s, where + " Eq. 10 W_q");
          check_close(p.service_ms / 1000.0, lit.service_s, where + " Eq. 11 S");
          check_close(p.latency_ms / 1000.0, lit.latency_s, where + " Eq. 12 W");
          const Prediction& q = all[static_cast<size_t>(c - 1)];
          REQUIRE(q.stable);
          check_close(q.latency_ms / 1000.0, lit.latency_s, where + " Eq. 12 W (predict_all)");
          ++compared;
        }
      }
    }
  }
  CHECK(compared == 4 * 2 * 10 * 8);
}

TEST_CASE("the literal transcription is itself right: M/D/1 and the brute-force chain",
          "[core][queue][paper]") {
  // c = 1 is Pollaczek-Khinchine M/D/1: W_q = rho / (2 mu (1 - rho)), S = 1/mu.
  const Literal one = paper_md_interf({100.0}, 1, 6.0L);  // mu = 10/s, rho = 0.6
  CHECK(static_cast<double>(one.wait_s) == Approx(0.6 / (2 * 10 * 0.4)).epsilon(1e-15));
  CHECK(static_cast<double>(one.service_s) == Approx(0.1).epsilon(1e-15));
  // c = 3 with interference: the reference values of queue_model_test's brute-force chain.
  const Literal three = paper_md_interf({100.0, 120.0, 150.0}, 3, 15.0L);
  CHECK(static_cast<double>(three.service_s) == Approx(0.13797468354430382).epsilon(1e-12));
  CHECK(static_cast<double>(three.wait_s) == Approx(0.052945418551571656).epsilon(1e-12));
}
