#pragma once
// The simulator as the planner's fallback: where the analytic tail/bursty approximation is known
// to be poor (the region measured by the model-vs-simulator study, docs/simulation.md), a
// configuration is scored by simulating it instead. Elsewhere the analytic objective answers.

#include <cstdint>
#include <string>

#include "serf/core/tail_objective.h"

namespace serf::sim {

// Where the study found the approximation's error large (see docs/simulation.md for the numbers).
struct FallbackRegion {
  // A unit arrival SCV outside [min, max]: the Allen-Cunneen wait and the PASTA service term
  // both drift (bursty arrivals see more requests running than the time average).
  double min_unit_arrival_scv = 0.5;
  double max_unit_arrival_scv = 1.5;
  // Near saturation a percentile's error reaches 10-15% (Poisson, every c); below it stays
  // within 10% (study: p90 of |error| 6%).
  double heavy_utilization = 0.9;
  // Batches (b > 1) on c > 1 slots: the batch model's mean drifts low as the utilization (of the
  // full-batch capacity) grows (docs/queueing.md, the batching study); exact for c = 1.
  double batch_utilization = 0.7;

  bool poor(double unit_arrival_scv, int c, double utilization, bool percentile) const;
  bool poor_batch(int c, int b, double utilization) const {
    return b > 1 && c > 1 && utilization >= batch_utilization;
  }
};

class SimulationFallbackObjective : public Objective {
 public:
  // `analytic` must outlive this objective. Each fallback simulates one unit (c slots) with
  // Gamma arrivals of the unit's arrival SCV at the unit's rate, `seed` fixed so that the score is
  // a deterministic function of the rate (the sizing root finder needs that).
  explicit SimulationFallbackObjective(const LatencyObjective& analytic, FallbackRegion region = {},
                                       uint64_t seed = 1)
      : analytic_(analytic), region_(region), seed_(seed) {}

  std::string name() const override { return analytic_.name(); }
  double score_ms(const ConfigurationFamily& family, int c, double unit_rate_per_s,
                  const Prediction& prediction) const override;
  double lower_bound_ms(const ConfigurationFamily& family, int c) const override {
    return analytic_.lower_bound_ms(family, c);
  }
  // A tenth of the simulations' own precision (their runs are sized for about 1-2 %).
  double rate_tolerance() const override { return 1e-3; }
  // Simulations run so far (for reports).
  int64_t simulations() const { return simulations_; }

 private:
  double batch_score_ms(const ConfigurationFamily& family, int c, double unit_rate_per_s,
                        const Prediction& prediction) const;

  const LatencyObjective& analytic_;
  FallbackRegion region_;
  uint64_t seed_;
  mutable int64_t simulations_ = 0;  // the planner is single-threaded
};

}  // namespace serf::sim
