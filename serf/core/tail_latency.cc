#include "serf/core/tail_latency.h"

#include <boost/math/distributions/gamma.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <boost/math/tools/roots.hpp>
#include <cmath>
#include <limits>

namespace serf {
namespace {

// P(S <= x) for a Gamma service time of the given mean and SCV (a step at the mean when scv = 0).
double service_cdf(const ServiceLevel& l, double x) {
  if (x <= 0) return 0;
  if (l.scv <= 0) return x >= l.mean_ms ? 1.0 : 0.0;
  return boost::math::gamma_p(1.0 / l.scv, x / (l.mean_ms * l.scv));
}

}  // namespace

StatusOr<LatencyTail> LatencyTail::Create(const QueueModel& model, int c, double rate_per_s,
                                          const std::vector<ServiceLevel>& levels,
                                          double wait_factor) {
  if (c < 1 || c > model.max_servers() || static_cast<int>(levels.size()) < c) {
    return InvalidArgument("tail latency: configuration c = " + std::to_string(c) +
                           " needs service levels 1..c");
  }
  if (!std::isfinite(wait_factor) || wait_factor < 0) {
    return InvalidArgument("tail latency: wait factor must be finite and >= 0");
  }
  for (int n = 0; n < c; ++n) {
    const ServiceLevel& l = levels[static_cast<size_t>(n)];
    if (!std::isfinite(l.mean_ms) || l.mean_ms <= 0 || !std::isfinite(l.scv) || l.scv < 0) {
      return InvalidArgument("tail latency: service level " + std::to_string(n + 1) +
                             " needs a finite mean_ms > 0 and scv >= 0");
    }
  }
  const Prediction p = model.predict(c, rate_per_s);
  if (!p.stable) {
    return UnstableLoad("rho >= 1 at " + std::to_string(rate_per_s) +
                        " requests/s per unit, so no latency percentile exists");
  }
  LatencyTail t;
  t.levels_.assign(levels.begin(), levels.begin() + c);
  const std::vector<double> probs = model.state_probabilities(c, rate_per_s, c - 1);
  double below = 0;
  for (int n = 0; n < c; ++n) below += probs[static_cast<size_t>(n)];
  t.start_weight_.assign(probs.begin(), probs.begin() + c);
  t.p_wait_ = std::max(0.0, 1.0 - below);
  t.wait_ms_ = p.wait_ms * wait_factor;
  if (t.p_wait_ > 0 && t.wait_ms_ > 0) {
    // SCV of a residual service time of level c: E[R^2]/E[R]^2 - 1 for Gamma service.
    const double cs2 = t.levels_.back().scv;
    const double scv_r = 4.0 * (1.0 + 2.0 * cs2) / (3.0 * (1.0 + cs2)) - 1.0;
    const double scv_v =
        std::min(1.0, 1.0 - (1.0 - scv_r) * 3.0 / (c + 2.0) * (1.0 - p.utilization));
    t.v_shape_ = 1.0 / scv_v;
    t.v_scale_ms_ = t.wait_ms_ / t.p_wait_ * scv_v;
    // V + S_c as a shifted Gamma with the same first three cumulants (Gamma(k, s) has cumulants
    // k s, k s^2, 2 k s^3; cumulants of a sum add). Exact when S_c is deterministic or shares V's
    // scale, and a closed form: numerical convolution made the planner 100x slower.
    const double m = t.levels_.back().mean_ms;
    const double k1 = t.v_shape_ * t.v_scale_ms_ + m;
    const double k2 = t.v_shape_ * t.v_scale_ms_ * t.v_scale_ms_ + m * m * cs2;
    const double k3 = 2 * t.v_shape_ * std::pow(t.v_scale_ms_, 3) + 2 * std::pow(m, 3) * cs2 * cs2;
    t.q_scale_ms_ = k3 / (2 * k2);
    t.q_shape_ = k2 / (t.q_scale_ms_ * t.q_scale_ms_);
    t.shift_ms_ = k1 - t.q_shape_ * t.q_scale_ms_;
  } else {
    t.p_wait_ = 0;  // no queueing component: latency is the service time at start
    t.wait_ms_ = 0;
    // Renormalise the start weights (they sum to 1 - P_w).
    for (double& w : t.start_weight_) w /= below;
  }
  return t;
}

double LatencyTail::mean_latency_ms() const {
  double m = 0;
  for (size_t n = 0; n < levels_.size(); ++n) m += start_weight_[n] * levels_[n].mean_ms;
  return m + p_wait_ * levels_.back().mean_ms + wait_ms_;
}

double LatencyTail::queued_cdf(double x) const {
  if (x <= shift_ms_) return 0;
  return boost::math::gamma_p(q_shape_, (x - shift_ms_) / q_scale_ms_);
}

double LatencyTail::latency_cdf(double x) const {
  double f = 0;
  for (size_t n = 0; n < levels_.size(); ++n) f += start_weight_[n] * service_cdf(levels_[n], x);
  if (p_wait_ > 0) f += p_wait_ * queued_cdf(x);
  return std::min(1.0, f);
}

double LatencyTail::latency_quantile_ms(double q) const {
  if (!(q > 0 && q < 1)) return std::numeric_limits<double>::quiet_NaN();
  double hi = std::max(1e-9, 2 * mean_latency_ms());
  for (int it = 0; it < 200 && latency_cdf(hi) < q; ++it) hi *= 2;
  // The smallest x with F(x) >= q; F may jump (deterministic service), so bisect.
  auto g = [&](double x) { return latency_cdf(x) - q; };
  if (g(0.0) >= 0) return 0;
  if (g(hi) < 0) return hi;  // beyond 2^200 means: the bracket's end (cannot happen in range)
  const auto r =
      boost::math::tools::bisect(g, 0.0, hi, boost::math::tools::eps_tolerance<double>(20));
  return r.second;
}

double LatencyTail::wait_quantile_ms(double q) const {
  if (!(q > 0 && q < 1)) return std::numeric_limits<double>::quiet_NaN();
  if (p_wait_ <= 1 - q || v_scale_ms_ <= 0) return 0;
  // P(wait > t) = P_w P(V > t) = 1 - q.
  return boost::math::gamma_q_inv(v_shape_, (1 - q) / p_wait_) * v_scale_ms_;
}

double split_arrival_scv(double arrival_scv, int units) {
  const double p = 1.0 / std::max(1, units);
  return p * arrival_scv + 1.0 - p;
}

double arrival_scv_wait_factor(double unit_arrival_scv, double service_scv) {
  return (unit_arrival_scv + service_scv) / (1.0 + service_scv);
}

double model_service_scv(QueueKind kind, double profiled_scv_c) {
  switch (kind) {
    case QueueKind::kMmInterf:
    case QueueKind::kMmc:
      return 1.0;
    case QueueKind::kMdc:
    case QueueKind::kMdcExact:
    case QueueKind::kMdInterf:
    case QueueKind::kAllenCunneen:
    case QueueKind::kMgInterf:
      break;
  }
  return profiled_scv_c;
}

double service_scv_wait_factor(QueueKind kind, double profiled_scv_c) {
  double assumed = 0;
  switch (kind) {
    case QueueKind::kMmInterf:
    case QueueKind::kMmc:
      assumed = 1.0;
      break;
    case QueueKind::kAllenCunneen:
    case QueueKind::kMgInterf:  // already two-moment
      assumed = profiled_scv_c;
      break;
    case QueueKind::kMdc:
    case QueueKind::kMdcExact:
    case QueueKind::kMdInterf:
      break;
  }
  return (1.0 + profiled_scv_c) / (1.0 + assumed);
}

Prediction scale_wait(Prediction p, double factor) {
  if (!p.stable) return p;
  p.wait_ms *= factor;
  p.latency_ms = p.service_ms + p.wait_ms;
  return p;
}

}  // namespace serf
