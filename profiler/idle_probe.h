#pragma once
// The idle-arrival probe (serf/core/idle_penalty.h): after a tuple's closed-loop service time is
// known, requests are sent open loop, each after the tuple's slots have been idle for a set gap,
// through the same arrival path as a served load (scheduled arrival times, the controller's wait).
// Tuple (i, K, T) is probed in configuration (i, K, T) with bursts of two waves of i requests
// arriving together: the first wakes every slot after the gap, the second queues behind it and
// runs back to back. At each gap: the first wave's mean latency less the closed-loop mean (the
// idle-arrival penalty, delta_ms) and the second wave's mean service time less it (busy_ms).

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
  double budget_s = 1.0;
  int min_bursts = 3;
  int max_bursts = 64;
  // The smallest penalty worth resolving (ms): a tuple whose requests are so noisy that two
  // standard errors of a gap's mean, over the requests the budget affords, exceed it is not
  // probed (a slow model: the probe could not tell its wake-up from its jitter, and the
  // wake-up is a negligible part of its request).
  double resolution_ms = 0.1;
};

// Whether a tuple of closed-loop mean `closed_ms` and squared coefficient of variation `scv`,
// run with `service` slots, is probed (the budget and resolution rules of IdleProbeOptions), and
// with how many bursts per gap (0: not probed).
int idle_probe_bursts(const IdleProbeOptions& options, int service, double closed_ms, double scv);

// A gap's penalty from its requests' deltas (latency less the closed-loop mean, ms): their mean
// when it lies more than two standard errors above 0, else 0 (a wake-up costs, it never saves; a
// mean within the noise of 0 is taken as none). The mean itself, not the mean less its noise:
// that estimate (session 30) was biased low by two standard errors at every gap, and cifar10's
// probe showed 0.08 ms where its serving traces showed 0.14-0.26 ms.
double significant_mean(const std::vector<double>& deltas);

// The probe of one tuple of batch 1 whose closed-loop mean is `closed_ms` (SCV `scv`): one
// IdlePoint per gap (its gap the median idle time the bursts actually saw; bursts that found a
// slot busy are left out), the deltas made non-decreasing in the gap; empty when
// idle_probe_bursts() says the tuple is not probed. Reconfigures the controller to (i, K, T).
StatusOr<std::vector<IdlePoint>> probe_idle_penalty(serve::Controller& controller,
                                                    const ParallelismTuple& tuple, double closed_ms,
                                                    double scv,
                                                    const IdleProbeOptions& options = {});

}  // namespace serf::profiler
