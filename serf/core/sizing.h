#pragma once
// SLO sizing (paper section IV-E, Fig. 15) and capacity: how many nodes a load needs to meet a
// latency objective, and how much load N nodes sustain within it.

#include <vector>

#include "serf/core/planner.h"

namespace serf {

struct SizingOptions {
  QueueKind queue = QueueKind::kMdInterf;
  const Objective* objective = nullptr;  // nullptr: mean latency
};

struct SizingResult {
  double rate_per_s = 0;  // cluster-wide arrival rate asked about
  double slo_ms = 0;
  bool feasible = false;
  // Feasible: the fewest nodes and the best configuration on them.
  // Infeasible: the best reachable with max_nodes (if any configuration is stable there).
  int nodes = 0;
  bool stable = false;
  Configuration config;
  int units = 0;
  double unit_rate_per_s = 0;
  double score_ms = 0;
  Prediction prediction;
};

// The fewest nodes 1..max_nodes for which some configuration's score (mean latency) is <= slo_ms at
// the cluster rate. Infeasible (exit 3) when none; the message gives the best latency reachable.
StatusOr<SizingResult> size_for_slo(const Profile& profile, double rate_per_s, double slo_ms,
                                    int max_nodes, const SizingOptions& options = {});
// The same over a list of rates (paper Fig. 15); infeasible rates are rows with feasible = false.
StatusOr<std::vector<SizingResult>> size_for_rates(const Profile& profile,
                                                   const std::vector<double>& rates_per_s,
                                                   double slo_ms, int max_nodes,
                                                   const SizingOptions& options = {});

struct CapacityResult {
  double rate_per_s = 0;  // the highest cluster arrival rate within the SLO
  double slo_ms = 0;
  int nodes = 0;
  Configuration config;
  int units = 0;
  double unit_rate_per_s = 0;
  double score_ms = 0;
  Prediction prediction;  // at rate_per_s
};

// The highest cluster arrival rate `nodes` sustain with some configuration's score <= slo_ms.
// Infeasible when no configuration meets the SLO even at vanishing load.
StatusOr<CapacityResult> capacity(const Profile& profile, double slo_ms, int nodes,
                                  const SizingOptions& options = {});

// The highest unit arrival rate at which configuration c of `family` scores <= slo_ms (found with
// Boost.Math's TOMS 748 root finder; the score must grow with the rate); 0 when it never does.
double unit_capacity_per_s(const ConfigurationFamily& family, int c, double slo_ms,
                           const Objective& objective);

}  // namespace serf
