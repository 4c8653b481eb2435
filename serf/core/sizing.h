#pragma once
// SLO sizing (paper section IV-E, Fig. 15) and capacity: how many nodes a load needs to meet a
// latency objective, and how much load N nodes sustain within it.

#include <vector>

#include "serf/core/planner.h"

namespace serf {

struct SizingOptions {
  QueueKind queue = kDefaultQueue;
  int max_batch = 1;  // B: also consider batches b in (1, B] that the profile holds
  const Objective* objective = nullptr;  // nullptr: mean latency
};

// Feasible: the fewest nodes and the best configuration on them. Infeasible: the best reachable
// with max_nodes (the Choice is stable if any configuration is stable there).
struct SizingResult : Choice {
  double rate_per_s = 0;  // cluster-wide arrival rate asked about
  double slo_ms = 0;
  bool feasible = false;
  int nodes = 0;
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

// The Choice's prediction is at rate_per_s.
struct CapacityResult : Choice {
  double rate_per_s = 0;  // the highest cluster arrival rate within the SLO
  double slo_ms = 0;
  int nodes = 0;
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
