#include "profiler/cost.h"

#include <algorithm>
#include <cmath>

#include "serf/core/configuration.h"
#include "serf/core/service_level.h"
#include "serf/core/statistics.h"
#include "serf/sim/simulator.h"

namespace serf::profiler {

CalibrationCost calibration_cost(const Profile& profile, int points, double exhaustive_wall_s,
                                 const ModelValidation& first_model) {
  CalibrationCost c;
  c.tuples = static_cast<int>(profile.tuples.size());
  for (const TupleStats& t : profile.tuples) c.profile_wall_s += t.wall_s;
  c.points = points;
  c.exhaustive_wall_s = exhaustive_wall_s;
  if (c.profile_wall_s > 0 && c.exhaustive_wall_s > 0)
    c.ratio = c.exhaustive_wall_s / c.profile_wall_s;
  for (const RateComparison& rc : first_model.rates) {
    if (!rc.planner_stable) continue;
    ++c.rates;
    if (rc.match) ++c.same_best;
    if (rc.within_ci) ++c.same_best_within_ci;
  }
  return c;
}

namespace {

enum class PointKind { kByPrecision, kFloored, kUnstable };

// How long one point must run: the simulated queue's CI at probe_requests scaled to the target
// (a batch-means half-width shrinks like 1/sqrt(n)), at least the request floor a VALID point
// needs, plus the warm-up, at least the minimum duration.
StatusOr<double> point_seconds(const Profile& profile, const Configuration& config, double rate,
                               const ExhaustiveCostOptions& o, PointKind* kind) {
  *kind = PointKind::kByPrecision;
  SERF_ASSIGN_OR_RETURN(std::vector<ServiceLevel> levels, service_levels(profile, config));
  sim::SimulationOptions s;
  s.levels = std::move(levels);
  s.units = units_for(o.nodes, config.inter);
  s.semantics = sim::ServiceSemantics::kShared;
  s.rate_per_s = rate;
  s.requests = o.probe_requests;
  auto r = sim::simulate(s);
  const PrecisionTarget& t = o.target;
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kInfeasible) return r.status();
    *kind = PointKind::kUnstable;  // an exhaustive run learns that in its minimum duration
    return o.switch_s + t.min_duration_s;
  }
  const double rel = r->latency_ci95_ms / r->latency_ms;
  const double by_ci =
      static_cast<double>(o.probe_requests) * (rel / t.precision) * (rel / t.precision);
  const double floor_requests = std::max(1, min_valid_requests(t));
  const double run_s = std::max(by_ci, floor_requests) * (1 + o.warmup_fraction) / rate;
  if (by_ci < floor_requests || run_s < t.min_duration_s) *kind = PointKind::kFloored;
  return o.switch_s + std::max(t.min_duration_s, run_s);
}

// The tuple profile at the exhaustive points' precision: one after another, and side by side as
// serf profile --side-by-side runs it (see ExhaustiveCost).
void tuple_profile_cost(const Profile& profile, const ExhaustiveCostOptions& o,
                        ExhaustiveCost* cost) {
  for (const TupleStats& t : profile.tuples) {
    if (t.tuple.inter > o.nodes) continue;
    const double z = 1.96 / o.target.precision;
    const int64_t n = std::max<int64_t>(
        o.tuple_min_samples, static_cast<int64_t>(std::ceil(z * z * std::max(0.0, t.scv))));
    const double per_sample_s = t.mean_ms / 1e3 / t.tuple.service;  // closed loop, i running
    cost->tuple_samples += n;
    cost->tuple_profile_s += static_cast<double>(o.tuple_warmup + n) * per_sample_s;
    cost->tuple_profile_as_profiled_s += (o.tuple_warmup + t.samples) * per_sample_s;
    const int64_t units = std::max(1, o.nodes / t.tuple.inter);
    const int64_t per_unit = (n + units - 1) / units;
    cost->tuple_profile_side_by_side_s +=
        static_cast<double>(o.tuple_warmup + per_unit) * per_sample_s;
  }
}

}  // namespace

StatusOr<ExhaustiveCost> project_exhaustive_cost(const Profile& profile,
                                                 const ExhaustiveCostOptions& o) {
  if (o.rates_per_s.empty()) return InvalidArgument("no load levels to project");
  if (!(o.target.precision > 0)) return InvalidArgument("precision must be > 0");
  ExhaustiveCost cost;
  const int cores = profile.hardware.cores_per_node;
  std::vector<double> seconds;
  for (int k : o.inter) {
    if (k < 1 || k > o.nodes) continue;
    for (int t = 1; t <= cores; ++t) {
      for (int c = 1; c * t <= cores; ++c) {
        const Configuration config{c, k, t};
        if (!service_levels(profile, config).ok()) continue;  // not profiled: not counted
        ++cost.configurations;
        for (double rate : o.rates_per_s) {
          PointKind kind = PointKind::kByPrecision;
          SERF_ASSIGN_OR_RETURN(double s, point_seconds(profile, config, rate, o, &kind));
          if (kind == PointKind::kUnstable) ++cost.unstable;
          if (kind == PointKind::kFloored) ++cost.floored;
          seconds.push_back(s);
          cost.exhaustive_s += s;
        }
      }
    }
  }
  if (seconds.empty()) return NotFound("no configuration of the profile fits the cluster");
  cost.levels = static_cast<int>(o.rates_per_s.size());
  cost.points = static_cast<int>(seconds.size());
  std::sort(seconds.begin(), seconds.end());
  cost.longest_point_s = seconds.back();
  cost.median_point_s = quantile_sorted(seconds, 0.5);
  const size_t tenth = std::max<size_t>(1, seconds.size() / 10);
  double top = 0;
  for (size_t k = seconds.size() - tenth; k < seconds.size(); ++k) top += seconds[k];
  cost.longest_tenth_share = top / cost.exhaustive_s;
  tuple_profile_cost(profile, o, &cost);
  if (cost.tuple_profile_s > 0) cost.ratio = cost.exhaustive_s / cost.tuple_profile_s;
  if (cost.tuple_profile_side_by_side_s > 0)
    cost.ratio_side_by_side = cost.exhaustive_s / cost.tuple_profile_side_by_side_s;
  return cost;
}

void print_calibration_cost(std::FILE* out, const CalibrationCost& c, QueueKind first_queue) {
  std::fprintf(out, "calibration cost (the paper's Table II):\n");
  std::fprintf(out, "  tuple profile            %10.1f s  (%d tuples)\n", c.profile_wall_s,
               c.tuples);
  std::fprintf(out, "  exhaustive measurement   %10.1f s  (%d points)\n", c.exhaustive_wall_s,
               c.points);
  if (c.ratio > 0) {
    std::fprintf(out, "  ratio                    %10.1fx\n", c.ratio);
  } else {
    std::fprintf(out,
                 "  ratio                    unknown (a file does not record its wall time)\n");
  }
  std::fprintf(
      out, "  same best configuration  %d/%d rates exactly, %d/%d within the measured CI (%s)\n",
      c.same_best, c.rates, c.same_best_within_ci, c.rates, to_string(first_queue));
}

nlohmann::json calibration_cost_json(const CalibrationCost& c, QueueKind first_queue) {
  return {{"tuples", c.tuples},
          {"profile_wall_s", c.profile_wall_s},
          {"exhaustive_points", c.points},
          {"exhaustive_wall_s", c.exhaustive_wall_s},
          {"ratio", c.ratio > 0 ? nlohmann::json(c.ratio) : nlohmann::json(nullptr)},
          {"queue", to_string(first_queue)},
          {"rates_compared", c.rates},
          {"same_best", c.same_best},
          {"same_best_within_ci", c.same_best_within_ci}};
}

}  // namespace serf::profiler
