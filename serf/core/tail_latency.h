#pragma once
// Beyond the paper's mean: an analytic approximation of one unit's latency distribution, and the
// Allen-Cunneen correction for bursty (non-Poisson) arrivals. Checked against the simulator in
// tests/sim and in docs/simulation.md, which also says where the approximation is poor.
//
// Latency = wait + service. An arrival that finds n-1 < c requests running starts at once and its
// service time is that of tuple n (Gamma with the tuple's mean and SCV; PASTA, probability p_{n-1}
// of the birth-death chain M/M_interf/c). One that finds all c slots busy (probability P_w) waits
// a time V and is then served at level c:
//   P(latency <= x) = sum_{n=1..c} p_{n-1} G_n(x) + P_w P(V + S_c <= x).
// V has mean W_q / P_w, so the mean wait equals the queue model's W_q (for md-interf the
// Cosmetatos-corrected Eq. 10: the deterministic-service correction) and the distribution's mean
// is the model's W. V is Gamma with SCV
//   scv_V = 1 - (1 - scv_R) * 3 / (c + 2) * (1 - rho),
// exponential (scv_V = 1) in heavy traffic, where the conditional wait of M/G/c is asymptotically
// exponential, and in light traffic the SCV of the minimum of c residual service times (scv_R is
// the SCV of one residual time; 1/3 for deterministic service, where the minimum of c residuals
// has SCV c/(c+2) exactly). V + S_c is taken as a shifted Gamma with the same first three
// cumulants. For M/M/c (exponential service, no interference) the wait distribution is exact.

#include <vector>

#include "serf/core/queue_model.h"
#include "serf/core/service_level.h"
#include "serf/core/status.h"

namespace serf {

class LatencyTail {
 public:
  // levels: tuples 1..c (at least c entries); `wait_factor` scales the model's W_q (bursty
  // arrivals, see arrival_scv_wait_factor). InvalidArgument for bad input, Infeasible when rho
  // >= 1.
  static StatusOr<LatencyTail> Create(const QueueModel& model, int c, double rate_per_s,
                                      const std::vector<ServiceLevel>& levels,
                                      double wait_factor = 1.0);

  double wait_probability() const { return p_wait_; }
  double mean_wait_ms() const { return wait_ms_; }
  double mean_latency_ms() const;
  // P(latency <= x_ms).
  double latency_cdf(double x_ms) const;
  // The q-quantile (0 < q < 1) of the latency, e.g. q = 0.99 for p99; within 1e-6 relative.
  double latency_quantile_ms(double q) const;
  // The q-quantile of the wait (0 when q <= 1 - P_w).
  double wait_quantile_ms(double q) const;

 private:
  LatencyTail() = default;
  double queued_cdf(double x_ms) const;  // P(V + S_c <= x)

  std::vector<double> start_weight_;  // p_{n-1}, n = 1..c
  std::vector<ServiceLevel> levels_;
  double p_wait_ = 0, wait_ms_ = 0;
  double v_shape_ = 1, v_scale_ms_ = 0;                 // V ~ Gamma(shape, scale), mean W_q / P_w
  double q_shape_ = 1, q_scale_ms_ = 1, shift_ms_ = 0;  // V + S_c ~ shift + Gamma(shape, scale)
};

// Bursty arrivals. A renewal stream with gap SCV ca2 split uniformly at random over `units` units
// gives each unit a renewal stream with gap SCV ca2/units + 1 - 1/units (thinning).
double split_arrival_scv(double arrival_scv, int units);

// Allen-Cunneen: W_q(G/G/c) ~ W_q(M/M/c) (ca2 + cs2) / 2. Relative to the same model with Poisson
// arrivals (ca2 = 1) the wait scales by (ca2 + cs2) / (1 + cs2), where cs2 is the service SCV the
// model assumes: 1 for the exponential models (mm-interf, mmc), the profiled SCV of tuple (c, K, T)
// for the others (0 for a deterministic service time, where the factor is ca2 itself).
double arrival_scv_wait_factor(double unit_arrival_scv, double service_scv);
// The service SCV `arrival_scv_wait_factor` needs for `kind` with the profiled SCV of tuple c.
double model_service_scv(QueueKind kind, double profiled_scv_c);
// The service-SCV correction the tail approximation adds: the model's W_q assumes service SCV
// `assumed` (0 for md-interf, mdc, mdc-exact; 1 for mm-interf, mmc; the profiled one for
// Allen-Cunneen and mg-interf) while the profile measured `profiled`: W_q scales by (1 +
// profiled)/(1 + assumed) (Allen-Cunneen again). Not applied to the mean objective, which stays the
// paper's.
double service_scv_wait_factor(QueueKind kind, double profiled_scv_c);
// The prediction with W_q scaled by `factor` (W = S + W_q).
Prediction scale_wait(Prediction p, double factor);

}  // namespace serf
