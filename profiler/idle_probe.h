#pragma once
// The idle-arrival probe (serf/core/idle_penalty.h): after a tuple's closed-loop service time is
// known, requests are sent open loop, each after the tuple's slots have been idle for a set gap,
// through the same arrival path as a served load (scheduled arrival times, the controller's wait).
// Tuple (i, K, T) is probed in configuration (i, K, T) with bursts of i requests, so every slot
// wakes after the gap. Its penalty at each gap: the mean latency less the closed-loop mean.

#include <vector>

#include "serf/core/profile.h"
#include "serve/controller.h"

namespace serf::profiler {

struct IdleProbeOptions {
  // Idle gaps probed, ms, increasing: a wake-up's cost grows with the time asleep (poll sleeps,
  // the OpenMP team's spin-then-sleep, an idle virtual CPU), so a few gaps a decade apart.
  std::vector<double> gaps_ms = {0.1, 0.3, 1, 3, 10};
  // Time the probe of one tuple may take, about (seconds): bursts per gap are fitted into it,
  // between min_bursts and max_bursts each.
  double budget_s = 0.4;
  int min_bursts = 3;
  int max_bursts = 16;
};

// The probe of one tuple of batch 1 whose closed-loop mean is `closed_ms`: one IdlePoint per gap
// (its gap the median idle time the requests actually saw; bursts that found a slot busy are left
// out), the deltas made non-decreasing in the gap. Reconfigures the controller to (i, K, T).
StatusOr<std::vector<IdlePoint>> probe_idle_penalty(serve::Controller& controller,
                                                    const ParallelismTuple& tuple, double closed_ms,
                                                    const IdleProbeOptions& options = {});

}  // namespace serf::profiler
