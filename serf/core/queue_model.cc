#include "serf/core/queue_model.h"

#include <algorithm>
#include <boost/math/constants/constants.hpp>
#include <cmath>
#include <complex>
#include <limits>

namespace serf {

namespace {

constexpr struct {
  QueueKind kind;
  const char* name;
} kKindNames[] = {
    {QueueKind::kMdInterf, "md-interf"},
    {QueueKind::kMmInterf, "mm-interf"},
    {QueueKind::kMdc, "mdc"},
    {QueueKind::kMmc, "mmc"},
    {QueueKind::kAllenCunneen, "allen-cunneen"},
    {QueueKind::kMdcExact, "mdc-exact"},
    {QueueKind::kMgInterf, "mg-interf"},
};

bool is_oblivious(QueueKind k) {
  return k == QueueKind::kMdc || k == QueueKind::kMmc || k == QueueKind::kAllenCunneen ||
         k == QueueKind::kMdcExact;
}

// Linear-space kernel limits: terms are rescaled when they pass kBig and dropped when they fall
// below kTiny times the running sum (which is >= the first term, so nothing that matters is lost).
constexpr double kBig = 1e200;
constexpr double kBigInv = 1e-200;
constexpr double kTiny = 1e-280;

}  // namespace

const char* to_string(QueueKind kind) {
  for (const auto& e : kKindNames) {
    if (e.kind == kind) return e.name;
  }
  return "?";
}

std::vector<QueueKind> all_queue_kinds() {
  std::vector<QueueKind> out;
  for (const auto& e : kKindNames) out.push_back(e.kind);
  return out;
}

std::string queue_kind_names() {
  std::string out;
  for (const auto& e : kKindNames) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

StatusOr<QueueKind> parse_queue_kind(const std::string& name) {
  for (const auto& e : kKindNames) {
    if (name == e.name) return e.kind;
  }
  return InvalidArgument("unknown queue model '" + name + "'; choose one of " + queue_kind_names());
}

StatusOr<QueueModel> QueueModel::Create(QueueKind kind, const std::vector<double>& mean_ms,
                                        double scv_1) {
  return Create(kind, mean_ms, std::vector<double>(mean_ms.size(), scv_1));
}

StatusOr<QueueModel> QueueModel::Create(QueueKind kind, const std::vector<double>& mean_ms,
                                        const std::vector<double>& scv) {
  if (mean_ms.empty()) return InvalidArgument("a queue model needs at least the tuple i = 1");
  if (scv.size() != mean_ms.size()) {
    return InvalidArgument("a queue model needs one SCV per mean service time");
  }
  if (mean_ms.size() > 1000000) return InvalidArgument("at most 1,000,000 servers are supported");
  for (size_t i = 0; i < mean_ms.size(); ++i) {
    if (!std::isfinite(mean_ms[i]) || mean_ms[i] <= 0) {
      return InvalidArgument("mean service time of i = " + std::to_string(i + 1) +
                             " must be finite and > 0 ms");
    }
  }
  for (double s : scv) {
    if (!std::isfinite(s) || s < 0) return InvalidArgument("scv must be finite and >= 0");
  }

  QueueModel m;
  m.kind_ = kind;
  m.oblivious_ = is_oblivious(kind);
  m.scv_1_ = scv.front();
  m.scv_ = scv;
  const size_t n = mean_ms.size();
  m.inv_mu_s_.resize(n);
  m.q_.resize(n);
  m.log_q_.resize(n);
  m.cosmetatos_.resize(n);
  m.min_service_s_.resize(n);
  double best = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < n; ++k) {
    const double i = static_cast<double>(k + 1);
    const double s = (m.oblivious_ ? mean_ms[0] : mean_ms[k]) / 1000.0;
    m.inv_mu_s_[k] = s;
    m.q_[k] = s / i;
    m.log_q_[k] = std::log(s) - std::log(i);
    m.cosmetatos_[k] = (i - 1.0) * (std::sqrt(4.0 + 5.0 * i) - 2.0) / (16.0 * i);
    best = std::min(best, s);
    m.min_service_s_[k] = best;
  }

  // The rescaled linear-space kernel is exact when a term that fell below kTiny can never climb
  // back to matter: true when the birth-death ratios lambda/(i mu_i) never increase in i (then the
  // terms rise, then fall), or when no run of ratios multiplies to more than e^600. Each single
  // ratio must also stay below e^200 so a term below kBig cannot overflow.
  double log_max_rate = -std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < n; ++k) {
    log_max_rate =
        std::max(log_max_rate, std::log(static_cast<double>(k + 1)) - std::log(m.inv_mu_s_[k]));
  }
  bool monotone = true;
  double run = 0, max_run = 0, max_step = -std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < n; ++k) {
    const double b = log_max_rate + m.log_q_[k];
    max_step = std::max(max_step, b);
    run = std::max(0.0, run + b);
    max_run = std::max(max_run, run);
    if (k > 0 && m.q_[k] > m.q_[k - 1]) monotone = false;
  }
  m.fast_ok_ = max_step < 200.0 && (monotone || max_run < 600.0);
  return m;
}

double QueueModel::max_rate_per_s(int c) const {
  return static_cast<double>(c) / inv_mu_s_[static_cast<size_t>(c - 1)];
}

double QueueModel::min_latency_ms(int c) const {
  return 1000.0 * min_service_s_[static_cast<size_t>(c - 1)];
}

// Kimura's two-moment interpolation (1994) between the waits of deterministic and exponential
// service, W(s) = (1 + s) / (2 s / W_M + (1 - s) / W_D): W_D at s = 0, W_M at s = 1, and
// Pollaczek-Khinchine exactly at c = 1 (where W_D = W_M / 2). W_D is the paper's Eq. 10, W_M the
// birth-death chain's wait, both from the same p_c / lambda (`base`).
double QueueModel::two_moment_wait(double base, double rho, double cosmetatos, double scv) {
  const double om = 1.0 - rho;
  const double wm = base * rho / (om * om);
  const double wd = 0.5 * base * (rho / (om * om) + cosmetatos / om);
  if (!(wm > 0) || !(wd > 0)) return 0.0;
  return (1.0 + scv) * wd * wm / (2.0 * scv * wd + (1.0 - scv) * wm);
}

// From the birth-death sums of configuration c, all relative to one common scale:
// s0 = sum_{n<c} t_n, s1 = sum_{n<c} t_n / mu_{n+1}, t_c, where t_n = prod_{i<=n} lambda/(i mu_i).
Prediction QueueModel::finish(int c, double lambda, double s0, double s1, double t_c) const {
  Prediction p;
  const size_t k = static_cast<size_t>(c - 1);
  const double rho = lambda * inv_mu_s_[k] / c;
  if (!stable_at(rho)) return p;
  const double om = 1.0 - rho;
  const double p_wait = t_c / om;  // sum_{n>=c} t_n (geometric tail)
  const double p0 = 1.0 / (s0 + p_wait);
  const double wait_probability = p_wait * p0;  // <= 1, so the products below cannot overflow
  // Eq. 11; with one server (or equal ones) it is exactly 1/mu_1, so say so without rounding.
  const double service_s =
      (oblivious_ || c == 1) ? inv_mu_s_[0] : p0 * s1 + wait_probability * inv_mu_s_[k];
  const double base = wait_probability * om / lambda;  // p_c / lambda
  double wait_s = 0;
  switch (kind_) {
    case QueueKind::kMmInterf:
    case QueueKind::kMmc:
      wait_s = base * rho / (om * om);
      break;
    case QueueKind::kMdInterf:
    case QueueKind::kMdc:
      // Eq. 10 with g(rho) = (1 - rho)/rho folded in, so there is no 0 * inf at small rho.
      wait_s = 0.5 * base * (rho / (om * om) + cosmetatos_[k] / om);
      break;
    case QueueKind::kAllenCunneen:
      wait_s = base * rho / (om * om) * 0.5 * (1.0 + scv_1_);
      break;
    case QueueKind::kMgInterf:
      wait_s = two_moment_wait(base, rho, cosmetatos_[k], scv_[k]);
      break;
    case QueueKind::kMdcExact:
      return predict_exact_mdc(c, lambda);
  }
  p.utilization = rho;
  p.wait_probability = wait_probability;
  p.service_ms = 1000.0 * service_s;
  p.wait_ms = 1000.0 * wait_s;
  p.latency_ms = p.service_ms + p.wait_ms;
  // Within an ulp of rho = 1 the wait can leave the range of a double: that is no steady state.
  if (!std::isfinite(p.latency_ms)) return Prediction{};
  p.stable = true;
  return p;
}

template <typename Sink>
void QueueModel::run_chain_fast(int c_max, double lambda, Sink& sink) const {
  double t = 1.0, s0 = 0.0, s1 = 0.0;
  for (int c = 1; c <= c_max; ++c) {
    const size_t k = static_cast<size_t>(c - 1);
    s0 += t;
    s1 += t * inv_mu_s_[k];
    t *= lambda * q_[k];
    sink(c, s0, s1, t);
    if (t > kBig) {
      t *= kBigInv;
      s0 *= kBigInv;
      s1 *= kBigInv;
    } else if (t < kTiny * s0) {
      t = 0.0;  // negligible from here on (see Create), and no subnormal arithmetic
    }
  }
}

template <typename Sink>
void QueueModel::run_chain_log(int c_max, double lambda, Sink& sink) const {
  // Online log-sum-exp: lt = log t_{c}, m = the common scale, s0/s1 relative to e^m.
  const double log_lambda = std::log(lambda);
  double lt = 0.0, m = 0.0, e = 1.0, s0 = 0.0, s1 = 0.0;
  for (int c = 1; c <= c_max; ++c) {
    const size_t k = static_cast<size_t>(c - 1);
    s0 += e;
    s1 += e * inv_mu_s_[k];
    lt += log_lambda + log_q_[k];
    if (lt > m) {
      const double scale = std::exp(m - lt);
      s0 *= scale;
      s1 *= scale;
      m = lt;
    }
    e = std::exp(lt - m);
    sink(c, s0, s1, e);
  }
}

template <typename Sink>
void QueueModel::run_chain(int c_max, double lambda, Sink&& sink) const {
  if (uses_fast_kernel()) {
    run_chain_fast(c_max, lambda, sink);
  } else {
    run_chain_log(c_max, lambda, sink);
  }
}

Prediction QueueModel::predict(int c, double rate_per_s) const {
  if (c < 1 || c > max_servers() || !(rate_per_s > 0) || !std::isfinite(rate_per_s)) return {};
  if (!(rate_per_s < max_rate_per_s(c))) return {};
  if (kind_ == QueueKind::kMdcExact) return predict_exact_mdc(c, rate_per_s);
  Prediction out;
  run_chain(c, rate_per_s, [&](int n, double s0, double s1, double t) {
    if (n == c) out = finish(c, rate_per_s, s0, s1, t);
  });
  return out;
}

void QueueModel::predict_all(double rate_per_s, Prediction* out) const {
  const int m = max_servers();
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s)) {
    std::fill(out, out + m, Prediction{});
    return;
  }
  if (kind_ == QueueKind::kMdcExact) {
    for (int c = 1; c <= m; ++c) out[c - 1] = predict(c, rate_per_s);
    return;
  }
  run_chain(m, rate_per_s, [&](int c, double s0, double s1, double t) {
    out[c - 1] = finish(c, rate_per_s, s0, s1, t);
  });
}

std::vector<double> QueueModel::state_probabilities(int c, double rate_per_s, int n_max) const {
  std::vector<double> p;
  if (c < 1 || c > max_servers() || n_max < 0 || !(rate_per_s > 0)) return p;
  const double rho = rate_per_s * inv_mu_s_[static_cast<size_t>(c - 1)] / c;
  if (!(rho < 1.0)) return p;
  // log t_n for n <= c, then the geometric tail t_n = t_c rho^(n-c).
  std::vector<double> lt(static_cast<size_t>(std::max(n_max, c)) + 1);
  const double log_lambda = std::log(rate_per_s);
  for (int n = 1; n <= c; ++n) lt[n] = lt[n - 1] + log_lambda + log_q_[static_cast<size_t>(n - 1)];
  for (size_t n = static_cast<size_t>(c) + 1; n < lt.size(); ++n) lt[n] = lt[n - 1] + std::log(rho);
  double m = lt[static_cast<size_t>(c)] - std::log1p(-rho);
  for (int n = 0; n < c; ++n) m = std::max(m, lt[static_cast<size_t>(n)]);
  double sum = std::exp(lt[static_cast<size_t>(c)] - std::log1p(-rho) - m);
  for (int n = 0; n < c; ++n) sum += std::exp(lt[static_cast<size_t>(n)] - m);
  const double log_norm = m + std::log(sum);
  p.resize(static_cast<size_t>(n_max) + 1);
  for (size_t n = 0; n < p.size(); ++n) p[n] = std::exp(lt[n] - log_norm);
  return p;
}

Prediction QueueModel::predict_exact_mdc(int c, double lambda) const {
  Prediction p;
  const double d_s = inv_mu_s_[0];
  const double rho = lambda * d_s / c;
  if (!stable_at(rho)) return p;
  p.stable = true;
  p.utilization = rho;
  p.service_ms = 1000.0 * d_s;
  p.wait_ms = p.service_ms * exact_mdc_wait_over_d(c, rho);
  p.latency_ms = p.service_ms + p.wait_ms;
  return p;
}

namespace {

// The root of z = w exp(rho (z - 1)) in the unit disk (w a c-th root of unity other than 1).
// The map is a contraction of the closed disk with factor rho, so fixed-point iteration converges
// from anywhere in it; Newton finishes. The start linearises around z = 1, where the slow roots
// are.
std::complex<double> mdc_root(std::complex<double> w, double rho) {
  using C = std::complex<double>;
  auto g = [&](C z) { return w * std::exp(rho * (z - 1.0)); };
  C z = 1.0 + (w - 1.0) / (1.0 - w * rho);
  if (!(std::abs(z) < 1.0)) z = 0.0;
  for (int it = 0; it < 8; ++it) z = g(z);
  for (int it = 0; it < 60; ++it) {
    const C gz = g(z);
    const C step = (z - gz) / (1.0 - rho * gz);
    z -= step;
    if (std::abs(step) < 1e-15 * std::max(1.0, std::abs(z))) break;
  }
  if (std::abs(z) < 1.0 + 1e-9 && std::abs(z - g(z)) < 1e-12) return z;
  // Newton wandered (possible only very close to z = 1): plain contraction, slow but certain.
  z = 0.0;
  for (int it = 0; it < 10000000; ++it) {
    const C next = g(z);
    if (std::abs(next - z) < 1e-15) return next;
    z = next;
  }
  return z;
}

}  // namespace

double exact_mdc_wait_over_d(int c, double rho) {
  if (c < 1 || !(rho > 0) || !(rho < 1.0)) return std::numeric_limits<double>::quiet_NaN();
  const double cd = static_cast<double>(c);
  const double a = cd * rho;
  double lq = (a * a - cd * (cd - 1.0)) / (2.0 * (cd - a));
  const double two_pi = boost::math::constants::two_pi<double>();
  // Roots come in conjugate pairs (k, c - k); 1/(1 - z) of a pair sums to twice the real part.
  for (int k = 1; 2 * k <= c; ++k) {
    const std::complex<double> w = std::polar(1.0, two_pi * k / cd);
    const std::complex<double> z = mdc_root(w, rho);
    const double term = (1.0 / (1.0 - z)).real();
    lq += (2 * k == c) ? term : 2.0 * term;
  }
  // Cancellation between the two parts leaves ~1e-13 * c of noise where Lq is ~0 (large c).
  return std::max(lq, 0.0) / a;
}

}  // namespace serf
