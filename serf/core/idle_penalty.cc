#include "serf/core/idle_penalty.h"

#include <algorithm>
#include <cmath>

namespace serf {

namespace {

using Field = double IdlePoint::*;

// A field of the points at gap g: linear in log g between them, constant beyond them.
double interpolate(const std::vector<IdlePoint>& points, double gap_ms, Field field) {
  if (points.empty()) return 0.0;
  if (gap_ms <= points.front().gap_ms) return points.front().*field;
  if (gap_ms >= points.back().gap_ms) return points.back().*field;
  auto hi = std::upper_bound(points.begin(), points.end(), gap_ms,
                             [](double g, const IdlePoint& p) { return g < p.gap_ms; });
  auto lo = hi - 1;
  const double w = std::log(gap_ms / lo->gap_ms) / std::log(hi->gap_ms / lo->gap_ms);
  return (*lo).*field + w * ((*hi).*field - (*lo).*field);
}

// The field's mean over G exponential with rate `slot_rate_per_s`: the midpoint rule over the
// exponential's quantiles, G_q = -ln(1 - q) / rate, q = (j + 1/2) / n.
double exponential_mean(const std::vector<IdlePoint>& points, double slot_rate_per_s, Field field) {
  if (points.empty() || !(slot_rate_per_s > 0)) return 0.0;
  constexpr int kNodes = 32;
  const double mean_gap_ms = 1000.0 / slot_rate_per_s;
  double sum = 0;
  for (int j = 0; j < kNodes; ++j) {
    const double q = (j + 0.5) / kNodes;
    sum += interpolate(points, -std::log1p(-q) * mean_gap_ms, field);
  }
  return std::max(0.0, sum / kNodes);
}

}  // namespace

double idle_delta_ms(const std::vector<IdlePoint>& points, double gap_ms) {
  return interpolate(points, gap_ms, &IdlePoint::delta_ms);
}

double busy_delta_ms(const std::vector<IdlePoint>& points, double gap_ms) {
  return interpolate(points, gap_ms, &IdlePoint::busy_ms);
}

double idle_penalty_mean_ms(const std::vector<IdlePoint>& points, double slot_rate_per_s) {
  return exponential_mean(points, slot_rate_per_s, &IdlePoint::delta_ms);
}

double busy_penalty_mean_ms(const std::vector<IdlePoint>& points, double slot_rate_per_s) {
  return exponential_mean(points, slot_rate_per_s, &IdlePoint::busy_ms);
}

}  // namespace serf
