#include "serf/sim/fallback_objective.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "serf/sim/simulator.h"

namespace serf::sim {

bool FallbackRegion::poor(double unit_arrival_scv, int c, double utilization,
                          bool percentile) const {
  if (unit_arrival_scv < min_unit_arrival_scv || unit_arrival_scv > max_unit_arrival_scv) {
    return true;
  }
  return percentile && utilization >= heavy_utilization;
}

double SimulationFallbackObjective::score_ms(const ConfigurationFamily& family, int c,
                                             double unit_rate_per_s,
                                             const Prediction& prediction) const {
  if (!prediction.stable) return std::numeric_limits<double>::infinity();
  if (family.batch > 1) return batch_score_ms(family, c, unit_rate_per_s, prediction);
  const double unit_scv = analytic_.unit_arrival_scv(family);
  const double percentile = analytic_.options().percentile;
  if (!region_.poor(unit_scv, c, prediction.utilization, percentile > 0)) {
    return analytic_.score_ms(family, c, unit_rate_per_s, prediction);
  }
  SimulationOptions o;
  o.levels = analytic_.levels(family, c);
  o.rate_per_s = unit_rate_per_s;
  o.arrival_kind = unit_scv == 1.0 ? ArrivalKind::kPoisson
                   : unit_scv == 0 ? ArrivalKind::kDeterministic
                                   : ArrivalKind::kGamma;
  o.arrival_scv = unit_scv;
  // Longer runs near saturation, where the queue's correlation time grows like 1/(1-rho)^2.
  const double rho = std::min(prediction.utilization, 0.999);
  o.requests = static_cast<int64_t>(std::clamp(20000.0 / (1.0 - rho), 50000.0, 400000.0));
  o.seed = seed_;
  o.percentile = percentile;
  ++simulations_;
  auto r = simulate(o);
  if (!r.ok()) return std::numeric_limits<double>::infinity();
  return percentile > 0 ? r->percentile_ms : r->latency_ms;
}

double SimulationFallbackObjective::batch_score_ms(const ConfigurationFamily& family, int c,
                                                   double unit_rate_per_s,
                                                   const Prediction& prediction) const {
  if (!region_.poor_batch(c, family.batch, prediction.utilization) ||
      static_cast<size_t>(c) > family.tables.size()) {
    return analytic_.score_ms(family, c, unit_rate_per_s, prediction);
  }
  SimulationOptions o;
  o.batching = family.tables[static_cast<size_t>(c - 1)];
  o.rate_per_s = unit_rate_per_s;
  // Longer runs near saturation and for bigger batches (the batch-study's precision, ~2%).
  const double rho = std::min(prediction.utilization, 0.999);
  o.requests = static_cast<int64_t>(std::clamp(
      20000.0 * std::sqrt(static_cast<double>(family.batch)) / (1.0 - rho), 50000.0, 800000.0));
  o.seed = seed_;
  ++simulations_;
  auto r = simulate(o);
  if (!r.ok()) return std::numeric_limits<double>::infinity();
  return r->latency_ms;
}

}  // namespace serf::sim
