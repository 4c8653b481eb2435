#include "profiler/idle_probe.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "serf/core/statistics.h"

namespace serf::profiler {

namespace {

// A burst is two waves of i requests arriving together: the first wakes every slot, the second
// queues behind it and runs back to back. Bursts are spaced by the two waves' expected time with
// a little room, then the gap: a burst that runs long finds the next one early, which is
// measured as a shorter gap (or left out).
constexpr int kWaves = 2;
double room_ms(double closed_ms) { return kWaves * 1.25 * closed_ms + 0.15; }

// The bursts' arrival times (s from the run's start) and the gap each was meant to follow, the
// gaps visited in a rotating order so that a slow minute of the host is spread over all of them.
void schedule(const IdleProbeOptions& o, int burst, double closed_ms, int bursts_per_gap,
              std::vector<double>* arrival_s, std::vector<int>* gap_index) {
  double t_ms = 0;
  const int gaps = static_cast<int>(o.gaps_ms.size());
  for (int r = 0; r < bursts_per_gap; ++r) {
    for (int j = 0; j < gaps; ++j) {
      const int g = (j + r) % gaps;
      t_ms += room_ms(closed_ms) + o.gaps_ms[static_cast<size_t>(g)];
      for (int k = 0; k < kWaves * burst; ++k) {
        arrival_s->push_back(t_ms / 1e3);
        gap_index->push_back(g);
      }
    }
  }
}

// Pool adjacent violators: one field of the points made non-decreasing in the gap (weighted by
// samples). A longer sleep never wakes faster; a few requests per gap are noisy, and a dip
// between two gaps is that noise, not the machine.
void make_monotone(std::vector<IdlePoint>* pts, double IdlePoint::*field) {
  struct Block {
    double sum = 0;
    int n = 0;
    size_t count = 0;
  };
  std::vector<Block> blocks;
  for (const IdlePoint& p : *pts) {
    blocks.push_back({p.*field * p.samples, p.samples, 1});
    while (blocks.size() > 1) {
      Block& b = blocks.back();
      Block& a = blocks[blocks.size() - 2];
      if (a.sum / a.n <= b.sum / b.n) break;
      a.sum += b.sum;
      a.n += b.n;
      a.count += b.count;
      blocks.pop_back();
    }
  }
  size_t k = 0;
  for (const Block& b : blocks) {
    for (size_t j = 0; j < b.count; ++j) (*pts)[k++].*field = b.sum / b.n;
  }
}

// What the bursts of one gap showed: the idle gaps they saw, the first wave's latencies and the
// second wave's service times, each less the closed-loop mean (ms).
struct GapSamples {
  std::vector<double> gaps, deltas, busy;
};

// The probe's records (in arrival order: one generator, no clients) sorted into its gaps. A
// burst's idle gap runs from the last answer before it to its arrival; a burst that found a
// request still running, or lost one, is left out. Within a burst, the i dispatched first are
// the wave that woke the slots, the rest the wave that queued behind it.
std::vector<GapSamples> sort_bursts(const std::deque<serve::RequestRecord>& recs, size_t first,
                                    const std::vector<double>& arrival_s,
                                    const std::vector<int>& gap_index, size_t gap_count, int i,
                                    double closed_ms) {
  std::vector<GapSamples> out(gap_count);
  double last_done_s = -1;
  for (size_t k = 0; k < arrival_s.size();) {
    std::vector<const serve::RequestRecord*> burst;
    bool whole = true;
    double done_s = last_done_s;
    size_t end = k;
    for (; end < arrival_s.size() && arrival_s[end] == arrival_s[k]; ++end) {
      const serve::RequestRecord& r = recs[first + end];
      whole = whole && r.answered;
      done_s = std::max(done_s, r.done_s);
      burst.push_back(&r);
    }
    const double gap_ms = (burst.front()->arrival_s - last_done_s) * 1e3;
    if (whole && last_done_s >= 0 && gap_ms > 0) {
      GapSamples& g = out[static_cast<size_t>(gap_index[k])];
      g.gaps.push_back(gap_ms);
      std::stable_sort(burst.begin(), burst.end(),
                       [](const auto* a, const auto* b) { return a->dispatch_s < b->dispatch_s; });
      for (size_t m = 0; m < burst.size(); ++m) {
        const serve::RequestRecord& r = *burst[m];
        if (static_cast<int>(m) < i) {
          g.deltas.push_back(r.latency_ms() - closed_ms);
        } else {
          g.busy.push_back((r.done_s - r.dispatch_s) * 1e3 - closed_ms);
        }
      }
    }
    last_done_s = done_s;
    k = end;
  }
  return out;
}

}  // namespace

double significant_mean(const std::vector<double>& deltas) {
  if (deltas.size() < 2) return 0;
  const auto n = static_cast<double>(deltas.size());
  const double m = mean(deltas);
  const double se = std::sqrt(variance(deltas) / (n - 1));  // variance() divides by n
  return m > 2 * se ? m : 0.0;
}

int idle_probe_bursts(const IdleProbeOptions& o, int service, double closed_ms, double scv) {
  if (o.gaps_ms.empty() || !(closed_ms > 0) || service < 1) return 0;
  double round_ms = 0;
  for (double g : o.gaps_ms) round_ms += room_ms(closed_ms) + g;
  // One round of all the gaps over the budget (requests of ~75 ms and more): not probed.
  if (round_ms > o.budget_s * 1e3) return 0;
  const int bursts = std::clamp(static_cast<int>(std::lround(o.budget_s * 1e3 / round_ms)),
                                o.min_bursts, o.max_bursts);
  // Two standard errors of one gap's mean over its bursts x i requests, the requests' spread
  // taken from the closed loop (the open loop's is no smaller): above the resolution, the probe
  // would report noise, so the tuple is left unprobed.
  const double sd_ms = closed_ms * std::sqrt(std::max(0.0, scv));
  const double two_se_ms = 2 * sd_ms / std::sqrt(static_cast<double>(bursts) * service);
  return two_se_ms > o.resolution_ms ? 0 : bursts;
}

StatusOr<std::vector<IdlePoint>> probe_idle_penalty(serve::Controller& controller,
                                                    const ParallelismTuple& tuple, double closed_ms,
                                                    double scv, const IdleProbeOptions& o) {
  if (tuple.batch != 1) return std::vector<IdlePoint>{};
  const int bursts = idle_probe_bursts(o, tuple.service, closed_ms, scv);
  if (bursts == 0) return std::vector<IdlePoint>{};
  const Configuration config{tuple.service, tuple.inter, tuple.intra, 1};
  SERF_RETURN_IF_ERROR(controller.configure(config));
  std::vector<double> arrival_s;
  std::vector<int> gap_index;
  schedule(o, tuple.service, closed_ms, bursts, &arrival_s, &gap_index);
  const size_t first = controller.records().size();
  SERF_RETURN_IF_ERROR(controller.run_open_loop(arrival_s, nullptr));
  const auto& recs = controller.records();
  if (recs.size() - first != arrival_s.size()) {
    return Internal("idle probe of " + to_string(tuple) + ": " +
                    std::to_string(recs.size() - first) + " records for " +
                    std::to_string(arrival_s.size()) + " arrivals");
  }
  const std::vector<GapSamples> seen =
      sort_bursts(recs, first, arrival_s, gap_index, o.gaps_ms.size(), tuple.service, closed_ms);
  std::vector<IdlePoint> out;
  for (const GapSamples& g : seen) {
    if (g.deltas.size() < 3) continue;  // too few for a standard error
    IdlePoint p{median(g.gaps), significant_mean(g.deltas), static_cast<int>(g.deltas.size()),
                significant_mean(g.busy)};
    // Medians of neighbouring gaps may cross when a burst ran long: keep the gaps increasing.
    if (!out.empty() && !(p.gap_ms > out.back().gap_ms)) continue;
    out.push_back(p);
  }
  make_monotone(&out, &IdlePoint::delta_ms);
  make_monotone(&out, &IdlePoint::busy_ms);
  return out;
}

}  // namespace serf::profiler
