#include "serf/cli/tail_flags.h"

#include <cmath>
#include <cstdio>

namespace serf::cli {

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
}

StatusOr<std::unique_ptr<LatencyObjective>> TailFlags::make(const Profile& profile,
                                                            int nodes) const {
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
  if (o.percentile == 0 && o.arrival_scv == 1.0) return std::unique_ptr<LatencyObjective>();
  return LatencyObjective::Create(profile, o);
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
