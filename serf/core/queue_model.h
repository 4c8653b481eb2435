#pragma once
// Queueing models of one serving unit (paper Eq. 1-12, ARCHITECTURE.md): the paper's M/D_interf/c
// and the baselines it is compared with. Pure computation, in log space or with rescaling, so
// results are finite and correct for c up to 10,000.
//
// A QueueModel holds everything that does not depend on the arrival rate for the service rates
// mu_1..mu_m of one (K, T) pair. It answers for any admission limit c <= m, and for all c = 1..m at
// once in O(m) (the birth-death sums of configuration c are prefix sums of those of c + 1).

#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf {

enum class QueueKind {
  kMdInterf,      // the paper: birth-death M/M_interf/c times Cosmetatos' M/D/c correction
  kMmInterf,      // birth-death M/M_interf/c (exponential service, interference-aware)
  kMdc,           // M/D/c (Cosmetatos), interference-oblivious: every server at mu_1
  kMmc,           // M/M/c (Erlang C), interference-oblivious
  kAllenCunneen,  // G/G/c Allen-Cunneen with mu_1 and the scv of tuple (1, K, T)
  kMdcExact,      // exact M/D/c with D = 1/mu_1 (roots of z^c = exp(a (z - 1)))
  kMgInterf,      // two-moment: md-interf and mm-interf waits interpolated by the service SCV
};

// The model every command uses when no --queue is given: mg-interf, the paper's birth-death chain
// with a wait that follows the profiled service SCV (docs/simulation.md: against the simulator, p95
// 2.8 % where md-interf's is 32 %). With an SCV of 0 it is md-interf, the paper's model, which
// stays one `--queue md-interf` away.
inline constexpr QueueKind kDefaultQueue = QueueKind::kMgInterf;

// "md-interf", "mm-interf", "mdc", "mmc", "allen-cunneen", "mdc-exact", "mg-interf".
const char* to_string(QueueKind kind);
std::vector<QueueKind> all_queue_kinds();  // every model, in the order above (validate --queue all)
StatusOr<QueueKind> parse_queue_kind(const std::string& name);
std::string queue_kind_names();  // "md-interf, mm-interf, ..." for help texts and errors

// The one rule for "unstable", used by every command: a unit at utilization rho = lambda / (c mu_c)
// >= 1 has no steady state (its queue grows without bound). Commands print what they can (with
// "stable": false and no latency) and then return UnstableLoad: exit 3, as every question without
// an answer (status.h).
inline bool stable_at(double utilization) { return utilization < 1.0; }
inline Status UnstableLoad(const std::string& detail) {
  return Infeasible("unstable load: " + detail);
}

// Mean behaviour of one unit at one arrival rate. When !stable (rho >= 1) the numbers are
// meaningless and must not be printed.
struct Prediction {
  bool stable = false;
  double latency_ms = 0;   // W = S + Wq (Eq. 12)
  double wait_ms = 0;      // Wq, time queued before service starts (Eq. 10)
  double service_ms = 0;   // S, mean service time seen by an arrival (Eq. 11)
  double utilization = 0;  // rho = lambda / (c mu_c)
  // P_wait: the probability that an arrival finds every slot busy (-1: the model does not say).
  double wait_probability = -1;
};

class QueueModel {
 public:
  // mean_ms[i-1] is the mean service time of tuple (i, K, T), i = 1..m; scv_1 is the squared
  // coefficient of variation of tuple (1, K, T) (used by Allen-Cunneen; mg-interf takes it for
  // every level).
  static StatusOr<QueueModel> Create(QueueKind kind, const std::vector<double>& mean_ms,
                                     double scv_1 = 0.0);
  // The same with every level's SCV: scv[i-1] of tuple (i, K, T) (mg-interf uses scv[c-1]).
  static StatusOr<QueueModel> Create(QueueKind kind, const std::vector<double>& mean_ms,
                                     const std::vector<double>& scv);

  QueueKind kind() const { return kind_; }
  int max_servers() const { return static_cast<int>(inv_mu_s_.size()); }

  // Prediction for admission limit c (1 <= c <= max_servers) at unit arrival rate lambda (req/s).
  Prediction predict(int c, double rate_per_s) const;
  // Predictions for every c = 1..max_servers at one rate; `out` holds max_servers() entries.
  void predict_all(double rate_per_s, Prediction* out) const;

  // The largest stable rate of configuration c: c * mu_c (c * mu_1 for oblivious models).
  double max_rate_per_s(int c) const;
  // A lower bound on latency_ms of configuration c at any rate (the fastest service time it uses).
  double min_latency_ms(int c) const;

  // Birth-death state probabilities p_0..p_{n_max} of configuration c (interference-aware models
  // and mmc/mdc); for tests and plots.
  std::vector<double> state_probabilities(int c, double rate_per_s, int n_max) const;

  // Testing hook: evaluate with the general log-space kernel even where the fast one is valid.
  void force_log_space(bool on) { force_log_ = on; }
  bool uses_fast_kernel() const { return fast_ok_ && !force_log_; }

 private:
  QueueModel() = default;
  template <typename Sink>
  void run_chain(int c_max, double rate_per_s, Sink&& sink) const;
  template <typename Sink>
  void run_chain_fast(int c_max, double lambda, Sink& sink) const;
  template <typename Sink>
  void run_chain_log(int c_max, double lambda, Sink& sink) const;
  Prediction finish(int c, double lambda, double s0, double s1, double t_c) const;
  Prediction predict_exact_mdc(int c, double lambda) const;
  static double two_moment_wait(double base, double rho, double cosmetatos, double scv);

  QueueKind kind_ = kDefaultQueue;
  bool oblivious_ = false;             // every server at mu_1
  std::vector<double> inv_mu_s_;       // 1/mu_i in seconds, i = 1..m (index i-1)
  std::vector<double> q_;              // 1/(i mu_i): the birth-death ratio is lambda * q_[i-1]
  std::vector<double> log_q_;          // log q_
  std::vector<double> cosmetatos_;     // f(c) = (c-1)(sqrt(4+5c)-2)/(16c), index c-1
  std::vector<double> min_service_s_;  // min_{i<=c} 1/mu_i, index c-1
  double scv_1_ = 0;
  std::vector<double> scv_;  // scv of tuple (i, K, T), index i-1
  bool fast_ok_ = true;      // the rescaled linear-space kernel is exact to double precision here
  bool force_log_ = false;
};

// Exact mean waiting time of M/D/c in units of the service time D, at utilization rho in (0, 1).
// Crommelin/Franx: Lq = (a^2 - c(c-1)) / (2(c-a)) + sum_k 1/(1-z_k) over the c-1 roots z_k != 1 of
// z^c = exp(a(z-1)) in the unit disk, a = c rho; Wq/D = Lq/a.
double exact_mdc_wait_over_d(int c, double rho);

}  // namespace serf
