#include "serf/core/batch_queue.h"

#include <algorithm>
#include <boost/math/constants/constants.hpp>
#include <boost/math/tools/roots.hpp>
#include <boost/math/tools/toms748_solve.hpp>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>

namespace serf {

namespace {

using Complex = std::complex<double>;

// The arrivals during one batch's service S (Gamma with mean m and SCV s; a constant at s = 0) at
// Poisson rate lambda: generating function K(z) = E[z^A] = E[exp(lambda S (z - 1))], and its first
// two factorial moments K'(1) = lambda m, K''(1) = lambda^2 E[S^2].
struct BatchArrivals {
  double lambda, m, s;
  // K(z)^p: (1 + lambda m s (1 - z))^(-p/s), or exp(p lambda m (z - 1)) when deterministic.
  Complex pgf_power(Complex z, double p) const {
    if (s == 0) return std::exp(p * lambda * m * (z - 1.0));
    return std::exp(-(p / s) * std::log(1.0 + lambda * m * s * (1.0 - z)));
  }
  Complex pgf(Complex z) const { return pgf_power(z, 1.0); }
  // d/dz K(z)^p = p lambda m K(z)^p / (1 + lambda m s (1 - z)).
  Complex pgf_power_derivative(Complex z, double p, Complex value) const {
    return p * lambda * m * value / (1.0 + lambda * m * s * (1.0 - z));
  }
  double k1() const { return lambda * m; }
  double k2() const { return lambda * lambda * m * m * (1.0 + s); }
  double second_moment() const { return m * m * (1.0 + s); }  // E[S^2]
};

// The root of z^b = K(z) on the branch z = w K(z)^(1/b), w = exp(2 pi i k / b), k = 1..b-1: the
// map is a contraction of the unit disk with factor rho = lambda m / b < 1 (K^(1/b) is itself a
// generating function with mean rho), so iteration converges from 0; Newton finishes.
Complex bulk_root(const BatchArrivals& a, int b, Complex w) {
  const double p = 1.0 / b;
  Complex z = 0.0;
  for (int it = 0; it < 12; ++it) z = w * a.pgf_power(z, p);
  for (int it = 0; it < 100; ++it) {
    const Complex g = a.pgf_power(z, p);
    const Complex step = (z - w * g) / (1.0 - w * a.pgf_power_derivative(z, p, g));
    z -= step;
    if (std::abs(step) < 1e-15) break;
  }
  if (std::abs(z - w * a.pgf_power(z, p)) < 1e-12) return z;
  // Newton wandered (only very close to rho = 1): plain contraction, slow but certain.
  z = 0.0;
  for (int it = 0; it < 10000000; ++it) {
    const Complex next = w * a.pgf_power(z, p);
    if (std::abs(next - z) < 1e-15) return next;
    z = next;
  }
  return z;
}

// Solves A x = y (n x n, row-major) by Gaussian elimination with partial pivoting; false when
// singular.
bool solve_dense(std::vector<double>& a, std::vector<double>& y, int n) {
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::abs(a[r * n + col]) > std::abs(a[piv * n + col])) piv = r;
    }
    if (!(std::abs(a[piv * n + col]) > 0)) return false;
    if (piv != col) {
      for (int k = 0; k < n; ++k) std::swap(a[col * n + k], a[piv * n + k]);
      std::swap(y[col], y[piv]);
    }
    for (int r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / a[col * n + col];
      if (f == 0) continue;
      for (int k = col; k < n; ++k) a[r * n + k] -= f * a[col * n + k];
      y[r] -= f * y[col];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double s = y[r];
    for (int k = r + 1; k < n; ++k) s -= a[r * n + k] * y[k];
    y[r] = s / a[r * n + r];
  }
  return true;
}

// x_q = P(q waiting at a departure), q = 0..b-1, of a single slot serving batches of up to b
// (arrivals[n - 1]: the arrivals during a batch of n); false when the system is singular.
bool departure_probabilities(const std::vector<BatchArrivals>& arrivals, std::vector<double>* x) {
  const int b = static_cast<int>(arrivals.size());
  const BatchArrivals& full = arrivals.back();
  auto of = [&](int q) -> const BatchArrivals& {
    return arrivals[static_cast<size_t>(std::clamp(q, 1, b) - 1)];
  };
  // The generating function satisfies
  // Pi(z) (z^b - K_b(z)) = sum_q x_q (z^b K_{q}(z) - z^q K_b(z)); at each of the b - 1 roots of
  // z^b = K_b(z) inside the unit disk the left side vanishes, so sum_q x_q (K_q(z) - z^q) = 0.
  // Roots k and b - k are conjugate: one complex equation gives two real rows.
  std::vector<double> a(static_cast<size_t>(b) * b, 0.0), y(static_cast<size_t>(b), 0.0);
  int row = 0;
  const double two_pi = boost::math::constants::two_pi<double>();
  for (int k = 1; 2 * k <= b; ++k) {
    if (2 * k == b || k < b - k) {
      const Complex z = bulk_root(full, b, std::polar(1.0, two_pi * k / b));
      Complex zq = 1.0;
      const bool real_root = 2 * k == b;
      for (int q = 0; q < b; ++q) {
        const Complex e = of(q).pgf(z) - zq;
        a[static_cast<size_t>(row) * b + q] = e.real();
        if (!real_root) a[static_cast<size_t>(row + 1) * b + q] = e.imag();
        zq *= z;
      }
      row += real_root ? 1 : 2;
    }
  }
  // Normalisation Pi(1) = 1 (l'Hopital at z = 1): sum_q x_q (b - q + K_q'(1) - K_b'(1)) = b -
  // K_b'(1).
  for (int q = 0; q < b; ++q) {
    a[static_cast<size_t>(row) * b + q] = b - q + of(q).k1() - full.k1();
  }
  y[static_cast<size_t>(row)] = b - full.k1();
  if (!solve_dense(a, y, b)) return false;
  *x = std::move(y);
  return true;
}

}  // namespace

BatchPrediction bulk_single_slot(const std::vector<ServiceLevel>& levels, double rate_per_s) {
  BatchPrediction out;
  const int b = static_cast<int>(levels.size());
  const double lambda = rate_per_s / 1000.0;  // per ms
  if (b < 1 || !(lambda > 0) || !std::isfinite(lambda)) return out;
  const double rho = lambda * levels.back().mean_ms / b;
  if (!(rho < 1.0)) return out;
  // arrivals[n - 1]: during a batch of n. A departure leaving q >= 1 waiting starts a batch of
  // min(q, b); one leaving none waits for the next arrival, which starts a batch of 1.
  std::vector<BatchArrivals> arrivals;
  for (const ServiceLevel& l : levels) arrivals.push_back({lambda, l.mean_ms, l.scv});
  const BatchArrivals& full = arrivals.back();
  auto of = [&](int q) -> const BatchArrivals& {
    return arrivals[static_cast<size_t>(std::clamp(q, 1, b) - 1)];
  };

  std::vector<double> x;
  if (!departure_probabilities(arrivals, &x)) return out;

  // Mean queue at departures, Pi'(1) = (N''(1) - D''(1)) / (2 D'(1)), D(z) = z^b - K_b(z).
  double n2 = 0, below_p = 0, below_q = 0;
  for (int q = 0; q < b; ++q) {
    const BatchArrivals& k = of(q);
    n2 += x[q] * (b * (b - 1.0) + 2.0 * b * k.k1() + k.k2() - q * (q - 1.0) - 2.0 * q * full.k1() -
                  full.k2());
    below_p += x[q];
    below_q += q * x[q];
  }
  const double mean_q = (n2 - (b * (b - 1.0) - full.k2())) / (2.0 * (b - full.k1()));
  const double tail_p = std::max(0.0, 1.0 - below_p);     // P(q >= b)
  const double tail_q = std::max(0.0, mean_q - below_q);  // E[q; q >= b]

  // Renewal reward over the interval from one departure to the next: the area under the number
  // in the unit, over the interval's length, is the time-average number L; W = L / lambda.
  double area = 0, length = 0, served = 0, served_ms = 0, served_sq = 0;
  for (int q = 0; q < b; ++q) {
    const BatchArrivals& k = of(q);
    const double n = std::max(q, 1);
    area += x[q] * ((q == 0 ? 1.0 : q) * k.m + lambda * k.second_moment() / 2.0);
    length += x[q] * ((q == 0 ? 1.0 / lambda : 0.0) + k.m);
    served += x[q] * n;
    served_ms += x[q] * n * k.m;
    served_sq += x[q] * n * n;
  }
  area += tail_q * full.m + tail_p * lambda * full.second_moment() / 2.0;
  length += tail_p * full.m;
  served += tail_p * b;
  served_ms += tail_p * b * full.m;
  served_sq += tail_p * b * b;
  const double latency_ms = area / length / lambda;
  if (!std::isfinite(latency_ms) || !(latency_ms > 0)) return out;
  out.stable = true;
  out.utilization = rho;
  out.latency_ms = latency_ms;
  out.service_ms = served_ms / served;
  out.wait_ms = std::max(0.0, latency_ms - out.service_ms);
  out.mean_batch = served_sq / served;
  return out;
}

namespace {

// The root r in (0, 1) of r + r^2 + ... + r^b = a (0 < a < b): the tail ratio of the chain's
// all-busy states (lambda = d (r + ... + r^b), each departure taking up to b).
double tail_ratio(double a, int b) {
  if (b == 1) return a;
  auto f = [&](double r) {
    return r * -std::expm1(b * std::log(r)) / (1.0 - r) - a;  // r (1 - r^b) / (1 - r) - a
  };
  double lo = std::min(a / (1.0 + a), 0.5), hi = 1.0 - 1e-15;
  if (f(lo) > 0) lo = 0.0;
  if (!(f(hi) > 0)) return hi;
  if (lo == 0.0) lo = 1e-300;
  std::uintmax_t iters = 100;
  const auto r = boost::math::tools::toms748_solve(
      f, lo, hi, boost::math::tools::eps_tolerance<double>(50), iters);
  return 0.5 * (r.first + r.second);
}

// The chain on (i batches running, q waiting): states (i, 0), i < c, where an arrival starts a
// batch of one at once and batch i leaves at rate i / mean(i, 1) (the paper's birth-death chain);
// and (c, q), q >= 0, where batches leave at rate d and a departure takes min(q, b) waiting
// requests. With d constant the all-busy states are geometric, pi(c, q) = pi(c, 0) r^q.
struct ChainSolution {
  double implied_rate = 0;  // c / (mean service of the batches running while all are busy)
  double wait_ms = 0, service_ms = 0, mean_batch = 0;
};

template <typename Mean>
ChainSolution solve_chain(int c, int b, double lambda, double d, const Mean& mean) {
  const double r = tail_ratio(lambda / d, b);
  // log pi of the light states relative to pi(c, 0) = 1, by the cut equations.
  std::vector<double> log_light(static_cast<size_t>(c));
  double lp = std::log(d / lambda);
  for (int i = c - 1; i >= 0; --i) {
    log_light[static_cast<size_t>(i)] = lp;
    if (i > 0) lp += std::log(i / (mean(i, 1) * lambda));
  }
  const double log_busy = -std::log1p(-r);  // sum_q r^q
  double top = log_busy;
  for (double x : log_light) top = std::max(top, x);
  const double busy = std::exp(log_busy - top), scale = std::exp(-top);  // pi(c, 0) = scale
  std::vector<double> light(static_cast<size_t>(c));
  for (int i = 0; i < c; ++i) light[i] = std::exp(log_light[i] - top);
  // Starts: a departure from (c, q >= 1) starts a batch of min(q, b) at level c; an arrival in
  // (i, 0) a batch of one at level i + 1. A batch started in a light state is among the batches
  // running while all are busy with the probability that the unit is all busy while at least
  // i + 1 batches run: weight busy / P(>= i + 1 running) (1 for the arrival that fills the unit).
  double at_least = busy, light_weighted = 0, light_total = 0, light_service = 0;
  for (int i = c - 1; i >= 0; --i) {
    const double w = busy / at_least;  // at_least = P(>= i + 1 running), unnormalised
    light_weighted += light[i] * w;
    light_total += light[i];
    light_service += light[i] * mean(i + 1, 1);
    at_least += light[i];
  }
  double starts = lambda * light_weighted, busy_ms = lambda * light_weighted * mean(c, 1);
  double served = lambda * light_total, served_ms = lambda * light_service;
  double served_sq = lambda * light_total;
  double rn = scale;
  for (int n = 1; n <= b; ++n) {
    rn *= r;
    const double rate = n < b ? d * rn : d * rn / (1.0 - r);  // departures that start n
    starts += rate;
    busy_ms += rate * mean(c, n);
    served += rate * n;
    served_ms += rate * n * mean(c, n);
    served_sq += rate * n * n;
  }
  const double total = light_total + busy;
  ChainSolution out;
  out.implied_rate = c * starts / busy_ms;
  out.wait_ms = scale * r / ((1.0 - r) * (1.0 - r)) / total / lambda;  // L_q / lambda
  out.service_ms = served_ms / served;
  out.mean_batch = served_sq / served;
  return out;
}

// The chain with the all-busy departure rate d at its fixed point d = c / E[mean(c, n)] over the
// batches running while all are busy. d lies between c / max_n mean(c, n) and c / min_n mean(c, n)
// (where the implied rate is above, resp. below, d), so a bracketing solver finds it.
template <typename Mean>
ChainSolution fixed_point_chain(int c, int b, double lambda, const Mean& mean) {
  double slow = 0, fast = std::numeric_limits<double>::infinity();
  for (int n = 1; n <= b; ++n) {
    slow = std::max(slow, mean(c, n));
    fast = std::min(fast, mean(c, n));
  }
  double lo = c / slow, hi = c / fast;
  auto g = [&](double d) { return solve_chain(c, b, lambda, d, mean).implied_rate - d; };
  if (hi > lo * (1 + 1e-14)) {
    const double g_lo = g(lo), g_hi = g(hi);
    if (g_lo <= 0) {
      hi = lo;
    } else if (g_hi >= 0) {
      lo = hi;
    } else {
      std::uintmax_t iters = 60;
      const auto root = boost::math::tools::toms748_solve(
          g, lo, hi, g_lo, g_hi, boost::math::tools::eps_tolerance<double>(40), iters);
      lo = root.first;
      hi = root.second;
    }
  }
  return solve_chain(c, b, lambda, 0.5 * (lo + hi), mean);
}

double scv_for(QueueKind kind, double profiled) {
  if (kind == QueueKind::kMdInterf) return 0.0;
  if (kind == QueueKind::kMmInterf) return 1.0;
  return profiled;
}

}  // namespace

StatusOr<BatchQueueModel> BatchQueueModel::Create(QueueKind kind, const ServiceTable& table) {
  if (kind != QueueKind::kMdInterf && kind != QueueKind::kMmInterf &&
      kind != QueueKind::kMgInterf) {
    return InvalidArgument(std::string("queue model ") + to_string(kind) +
                           " does not model batching; use md-interf, mg-interf or mm-interf");
  }
  BatchQueueModel m;
  m.kind_ = kind;
  m.c_ = table.service();
  m.b_ = table.batch();
  m.min_ms_ = std::numeric_limits<double>::infinity();
  for (int i = 1; i <= m.c_; ++i) {
    for (int n = 1; n <= m.b_; ++n) {
      m.mean_.push_back(table.at(i, n).mean_ms);
      m.min_ms_ = std::min(m.min_ms_, table.at(i, n).mean_ms);
    }
  }
  for (int n = 1; n <= m.b_; ++n) {
    const ServiceLevel& l = table.at(m.c_, n);
    m.fast_slot_.push_back({l.mean_ms / m.c_, scv_for(kind, l.scv)});
  }
  if (m.b_ == 1) {
    std::vector<double> mean_ms, scv;
    for (int i = 1; i <= m.c_; ++i) {
      mean_ms.push_back(table.at(i, 1).mean_ms);
      scv.push_back(table.at(i, 1).scv);
    }
    SERF_ASSIGN_OR_RETURN(QueueModel q, QueueModel::Create(kind, mean_ms, scv));
    m.unbatched_.push_back(std::move(q));
  }
  return m;
}

double BatchQueueModel::max_rate_per_s() const { return 1000.0 * c_ * b_ / mean_ms(c_, b_); }

BatchPrediction BatchQueueModel::predict(double rate_per_s) const {
  BatchPrediction out;
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s) || !(rate_per_s < max_rate_per_s())) {
    return out;
  }
  if (b_ == 1) {
    static_cast<Prediction&>(out) = unbatched_.front().predict(c_, rate_per_s);
    out.mean_batch = out.stable ? 1.0 : 0.0;
    return out;
  }
  // The c-fold fast slot, exactly and as the chain sees it: their ratio carries what the chain
  // leaves out (the service distribution, and a batch's time depending on its own size).
  const BatchPrediction exact = bulk_single_slot(fast_slot_, rate_per_s);
  if (!exact.stable) return out;
  const double lambda = rate_per_s / 1000.0;
  const auto fast_mean = [&](int, int n) { return fast_slot_[static_cast<size_t>(n - 1)].mean_ms; };
  const ChainSolution one = fixed_point_chain(1, b_, lambda, fast_mean);
  const ChainSolution unit =
      c_ == 1 ? one
              : fixed_point_chain(c_, b_, lambda, [&](int i, int n) { return mean_ms(i, n); });
  const double rho = lambda * mean_ms(c_, b_) / (c_ * b_);
  const double cd = c_;
  const double cosmetatos =
      1.0 + (cd - 1.0) * (std::sqrt(4.0 + 5.0 * cd) - 2.0) / (16.0 * cd) * (1.0 - rho) / rho;
  // The service ratio fades with c: a batch's size is set by the gap since the last departure,
  // which with c slots depends less and less on the batch before it.
  out.service_ms = unit.service_ms * std::pow(exact.service_ms / one.service_ms, 1.0 / cd);
  out.wait_ms = one.wait_ms > 0 ? unit.wait_ms * (exact.wait_ms / one.wait_ms) * cosmetatos : 0.0;
  out.latency_ms = out.service_ms + out.wait_ms;
  out.utilization = rho;
  out.mean_batch = c_ == 1 ? exact.mean_batch : unit.mean_batch;
  if (!std::isfinite(out.latency_ms) || !(out.latency_ms > 0)) return BatchPrediction{};
  out.stable = true;
  return out;
}

}  // namespace serf
