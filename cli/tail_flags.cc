#include "cli/tail_flags.h"

#include <cmath>
#include <cstdio>

namespace serf::cli {

const Objective* TailObjective::get() const {
  if (fallback_ != nullptr) return fallback_.get();
  return analytic_.get();
}

std::string TailObjective::note() const {
  if (fallback_ == nullptr || fallback_->simulations() == 0) return "";
  return "note: " + std::to_string(fallback_->simulations()) +
         " evaluation(s) were simulated where the analytic approximation is known to be poor "
         "(docs/simulation.md; --tail-method model to skip)\n";
}

void TailFlags::add_objective(CLI::App* sub) {
  objective_opt = sub->add_option(
      "--objective", objective,
      "what the best configuration minimises: mean (the paper's mean latency, default) or a "
      "latency percentile pNN in ms, e.g. p99 (tail approximation, docs/simulation.md)");
}

void TailFlags::add_percentile(CLI::App* sub) {
  percentile_opt = sub->add_option(
      "--percentile", percentile,
      "hold the SLO on this latency percentile (percent, e.g. 99) instead of the mean "
      "(tail approximation, docs/simulation.md)");
}

void TailFlags::add_arrival_scv(CLI::App* sub) {
  sub->add_option("--arrival-scv", arrival_scv,
                  "squared coefficient of variation of the inter-arrival gaps of the cluster-wide "
                  "stream (dimensionless; 1 Poisson, the default; > 1 bursty; Allen-Cunneen "
                  "correction of the wait)");
  sub->add_option("--tail-method", tail_method,
                  "auto: simulate configurations where the tail/bursty approximation is known to "
                  "be poor (docs/simulation.md); model: the analytic approximation only")
      ->capture_default_str();
}

StatusOr<TailObjective> TailFlags::make(const Profile& profile, int nodes) const {
  if (tail_method != "auto" && tail_method != "model") {
    return InvalidArgument("--tail-method must be auto or model (got '" + tail_method + "')");
  }
  LatencyObjectiveOptions o;
  o.arrival_scv = arrival_scv;
  o.nodes = nodes;
  if (!std::isfinite(arrival_scv) || arrival_scv < 0) {
    return InvalidArgument("--arrival-scv must be finite and >= 0 (1 is Poisson)");
  }
  if (objective_opt != nullptr && objective != "mean") {
    char* end = nullptr;
    const double p = objective.size() > 1 && objective[0] == 'p'
                         ? std::strtod(objective.c_str() + 1, &end)
                         : std::nan("");
    if (end == nullptr || *end != '\0' || !(p > 0 && p < 100)) {
      return InvalidArgument("--objective must be mean or pNN with 0 < NN < 100, e.g. p99 (got '" +
                             objective + "')");
    }
    o.percentile = p;
  }
  if (percentile_opt != nullptr && percentile_opt->count() > 0) {
    if (!(percentile > 0 && percentile < 100)) {
      return InvalidArgument("--percentile must be in (0, 100) percent, e.g. 99");
    }
    o.percentile = percentile;
  }
  TailObjective out;
  if (o.percentile == 0 && o.arrival_scv == 1.0) return out;
  SERF_ASSIGN_OR_RETURN(out.analytic_, LatencyObjective::Create(profile, o));
  if (tail_method == "auto") {
    out.fallback_ = std::make_unique<sim::SimulationFallbackObjective>(*out.analytic_);
  }
  return out;
}

std::string TailFlags::what() const {
  std::string out = "mean latency";
  char buf[64];
  double p = 0;
  if (percentile_opt != nullptr && percentile_opt->count() > 0) p = percentile;
  if (objective_opt != nullptr && objective.size() > 1 && objective[0] == 'p') {
    p = std::strtod(objective.c_str() + 1, nullptr);
  }
  if (p > 0) {
    std::snprintf(buf, sizeof buf, "p%g latency", p);
    out = buf;
  }
  if (arrival_scv != 1.0) {
    std::snprintf(buf, sizeof buf, " (arrival SCV %g)", arrival_scv);
    out += buf;
  }
  return out;
}

}  // namespace serf::cli
