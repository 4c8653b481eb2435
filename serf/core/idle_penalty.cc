#include "serf/core/idle_penalty.h"

#include <algorithm>
#include <cmath>

namespace serf {

double idle_delta_ms(const std::vector<IdlePoint>& points, double gap_ms) {
  if (points.empty()) return 0.0;
  if (gap_ms <= points.front().gap_ms) return points.front().delta_ms;
  if (gap_ms >= points.back().gap_ms) return points.back().delta_ms;
  auto hi = std::upper_bound(points.begin(), points.end(), gap_ms,
                             [](double g, const IdlePoint& p) { return g < p.gap_ms; });
  auto lo = hi - 1;
  const double w = std::log(gap_ms / lo->gap_ms) / std::log(hi->gap_ms / lo->gap_ms);
  return lo->delta_ms + w * (hi->delta_ms - lo->delta_ms);
}

double idle_penalty_mean_ms(const std::vector<IdlePoint>& points, double slot_rate_per_s) {
  if (points.empty() || !(slot_rate_per_s > 0)) return 0.0;
  // Midpoint rule over the exponential's quantiles: G_q = -ln(1 - q) / rate, q = (j + 1/2) / n.
  constexpr int kNodes = 32;
  const double mean_gap_ms = 1000.0 / slot_rate_per_s;
  double sum = 0;
  for (int j = 0; j < kNodes; ++j) {
    const double q = (j + 0.5) / kNodes;
    sum += idle_delta_ms(points, -std::log1p(-q) * mean_gap_ms);
  }
  return std::max(0.0, sum / kNodes);
}

}  // namespace serf
