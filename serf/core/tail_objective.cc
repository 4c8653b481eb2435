#include "serf/core/tail_objective.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "serf/core/statistics.h"

namespace serf {
namespace {

bool oblivious(QueueKind k) {
  return k == QueueKind::kMdc || k == QueueKind::kMmc || k == QueueKind::kAllenCunneen ||
         k == QueueKind::kMdcExact;
}

}  // namespace

StatusOr<std::unique_ptr<LatencyObjective>> LatencyObjective::Create(
    const Profile& profile, const LatencyObjectiveOptions& options) {
  if (!std::isfinite(options.percentile) || options.percentile >= 100 ||
      (options.percentile != 0 && !(options.percentile >= kMinPercentile))) {
    return InvalidArgument("percentile must be in [" + format_g(kMinPercentile) +
                           ", 100), e.g. 99 (got " + format_g(options.percentile) + ")");
  }
  if (!std::isfinite(options.arrival_scv) || options.arrival_scv < 0) {
    return InvalidArgument("arrival SCV must be finite and >= 0 (1 is Poisson; got " +
                           std::to_string(options.arrival_scv) + ")");
  }
  if (options.nodes < 0) return InvalidArgument("nodes must be >= 0");
  return std::unique_ptr<LatencyObjective>(new LatencyObjective(profile, options));
}

std::string percentile_name(double percentile) { return "p" + format_number("%.15g", percentile); }

std::string LatencyObjective::name() const {
  std::string out = options_.percentile > 0 ? percentile_name(options_.percentile) : "mean";
  if (options_.arrival_scv != 1.0) out += " (arrival SCV " + format_g(options_.arrival_scv) + ")";
  return out;
}

double LatencyObjective::unit_arrival_scv(const ConfigurationFamily& family) const {
  if (options_.arrival_scv == 1.0) return 1.0;
  if (options_.nodes > 0) {
    return split_arrival_scv(options_.arrival_scv, units_for(options_.nodes, family.inter));
  }
  return std::max(options_.arrival_scv, 1.0);
}

std::vector<ServiceLevel> LatencyObjective::levels(const ConfigurationFamily& family, int c) const {
  std::vector<ServiceLevel> out;
  out.reserve(static_cast<size_t>(c));
  const bool first_only = oblivious(family.model.kind());
  for (int i = 1; i <= c; ++i) {
    const TupleStats* t = profile_.find({first_only ? 1 : i, family.inter, family.intra});
    // The family was built from this profile, so the tuple exists; keep a finite fallback anyway.
    out.push_back(t != nullptr ? ServiceLevel{t->mean_ms, t->scv} : ServiceLevel{1.0, 0.0});
  }
  return out;
}

double LatencyObjective::wait_factor(const ConfigurationFamily& family, int c) const {
  if (options_.arrival_scv == 1.0) return 1.0;
  const bool first_only = oblivious(family.model.kind());
  const TupleStats* t = profile_.find({first_only ? 1 : c, family.inter, family.intra});
  const double cs2 = model_service_scv(family.model.kind(), t != nullptr ? t->scv : 0.0);
  return arrival_scv_wait_factor(unit_arrival_scv(family), cs2);
}

double LatencyObjective::tail_wait_factor(const ConfigurationFamily& family, int c) const {
  const bool first_only = oblivious(family.model.kind());
  const TupleStats* t = profile_.find({first_only ? 1 : c, family.inter, family.intra});
  return wait_factor(family, c) *
         service_scv_wait_factor(family.model.kind(), t != nullptr ? t->scv : 0.0);
}

Prediction LatencyObjective::corrected(const ConfigurationFamily& family, int c,
                                       const Prediction& p) const {
  return scale_wait(p, wait_factor(family, c));
}

double LatencyObjective::score_ms(const ConfigurationFamily& family, int c, double unit_rate_per_s,
                                  const Prediction& prediction) const {
  if (!prediction.stable) return std::numeric_limits<double>::infinity();
  // Batches: only the mean under Poisson arrivals is modelled (the commands refuse the rest).
  if (family.batch > 1) {
    return options_.percentile == 0 && options_.arrival_scv == 1.0
               ? prediction.latency_ms
               : std::numeric_limits<double>::infinity();
  }
  if (options_.percentile == 0) return scale_wait(prediction, wait_factor(family, c)).latency_ms;
  auto tail = LatencyTail::Create(family.model, c, unit_rate_per_s, levels(family, c),
                                  tail_wait_factor(family, c));
  if (!tail.ok()) return std::numeric_limits<double>::infinity();
  return tail->latency_quantile_ms(options_.percentile / 100.0);
}

double LatencyObjective::lower_bound_ms(const ConfigurationFamily& family, int c) const {
  // Mean: never below the fastest service time (the paper objective's bound). A percentile has
  // no such simple bound below the median, so no pruning.
  return options_.percentile == 0 ? family.min_latency_ms(c) : 0.0;
}

StatusOr<ConfigurationPrediction> predict_configuration(const Profile& profile,
                                                        const Configuration& config, int nodes,
                                                        double rate_per_s, QueueKind queue,
                                                        const LatencyObjective* analytic,
                                                        const Objective* score) {
  if (!(std::isfinite(rate_per_s) && rate_per_s > 0)) {
    return InvalidArgument("rate must be finite and > 0 requests/s (got " +
                           std::to_string(rate_per_s) + ")");
  }
  SERF_ASSIGN_OR_RETURN(ConfigurationFamily family, family_for(profile, config, nodes, queue));
  ConfigurationPrediction r;
  r.config = config;
  r.queue = queue;
  r.nodes = nodes;
  r.units = units_for(nodes, config.inter);
  r.rate_per_s = rate_per_s;
  r.unit_rate_per_s = rate_per_s / r.units;
  r.unit_capacity_per_s = family.max_rate_per_s(config.service);
  r.prediction = family.predict(config.service, r.unit_rate_per_s);
  if (analytic != nullptr && r.prediction.stable) {
    r.scored = true;
    r.score_ms = (score != nullptr ? score : analytic)
                     ->score_ms(family, config.service, r.unit_rate_per_s, r.prediction);
    r.prediction = analytic->corrected(family, config.service, r.prediction);
  }
  return r;
}

}  // namespace serf
