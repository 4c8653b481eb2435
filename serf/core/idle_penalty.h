#pragma once
// The idle-arrival penalty: what a request pays beyond the closed-loop service time when it
// arrives to a slot that has been idle (docs/calibration.md "Idle arrivals").
//
// The tuple profile measures service back to back (closed loop): each slot gets its next request
// the moment it answers, so its cores, OpenMP team and the controller's poll are all hot. An
// open-loop arrival that finds its slot idle for a gap g pays more: the controller wakes late for
// the arrival, the idle slot's poll sleeps, a sleeping OpenMP team and an idle virtual CPU wake.
// Measured on 1 node x 2 cores for cifar10 (0.4 ms a request): +0.06 ms after a 0.1 ms gap, up to
// +0.2 ms (T = 1) and +0.35 ms (T = 2) after 10 ms; 15-40 % of a request, so a sub-millisecond
// model's latency is underpredicted by as much unless the model knows it.
//
// The profiler measures delta(g) per tuple at a few gaps (IdlePoint). The model term: an arrival
// that finds a free slot (probability 1 - P_wait, PASTA) pays E[delta(G)], G the slot's idle time,
// taken as exponential with the slot's share of the arrivals, lambda / c (exact for c = 1: the
// idle period of an M/G/1 queue is exponential). delta is interpolated linearly in log g between
// the measured gaps and held constant beyond them.

#include <vector>

namespace serf {

struct IdlePoint {
  double gap_ms = 0;    // the idle time before the arrival (median of the probe's requests)
  double delta_ms = 0;  // mean latency of those requests less the closed-loop service time, >= 0
  int samples = 0;      // requests the mean is over
  // The request queued behind the woken one (it arrived with it, so it found its slot busy):
  // its mean service time (dispatch to answer) less the closed-loop service time, >= 0. An
  // open-loop server's back-to-back requests need not run as fast as the closed loop's, whose
  // slots never rest (session 30's cifar10 traces: 3-20 % slower). 0 in profiles before it.
  double busy_ms = 0;
};

// delta at gap g (ms): linear in log g between points (sorted by gap_ms), constant beyond them.
double idle_delta_ms(const std::vector<IdlePoint>& points, double gap_ms);
// busy_ms at gap g, interpolated the same way.
double busy_delta_ms(const std::vector<IdlePoint>& points, double gap_ms);

// E[delta(G)] for G exponential with rate `slot_rate_per_s` (requests/s), >= 0; 0 without points.
double idle_penalty_mean_ms(const std::vector<IdlePoint>& points, double slot_rate_per_s);
// E[busy_ms(G)], G as above: what a request that finds its slot busy pays, the gap being the one
// before its slot's busy period began.
double busy_penalty_mean_ms(const std::vector<IdlePoint>& points, double slot_rate_per_s);

}  // namespace serf
