#include "profiler/idle_probe.h"

#include <algorithm>
#include <cmath>

#include "serf/core/statistics.h"

namespace serf::profiler {

namespace {

// Arrivals are spaced by the expected latency with a little room, then the gap: a burst that
// runs long finds the next one early, which is measured as a shorter gap (or left out).
double room_ms(double closed_ms) { return 1.25 * closed_ms + 0.15; }

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
      for (int k = 0; k < burst; ++k) {
        arrival_s->push_back(t_ms / 1e3);
        gap_index->push_back(g);
      }
    }
  }
}

// Pool adjacent violators: the deltas made non-decreasing in the gap (weighted by samples). A
// longer sleep never wakes faster; a few requests per gap are noisy, and a dip between two gaps
// is that noise, not the machine.
void make_monotone(std::vector<IdlePoint>* pts) {
  struct Block {
    double sum = 0;
    int n = 0;
    size_t count = 0;
  };
  std::vector<Block> blocks;
  for (const IdlePoint& p : *pts) {
    blocks.push_back({p.delta_ms * p.samples, p.samples, 1});
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
    for (size_t j = 0; j < b.count; ++j) (*pts)[k++].delta_ms = b.sum / b.n;
  }
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
  // One round of all the gaps over the budget (requests of ~150 ms and more): not probed.
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
  // Records are in arrival order here (one generator, no clients). A burst's idle gap: from the
  // last answer before it to its arrival; a burst that found a request still running is left out.
  std::vector<std::vector<double>> gaps(o.gaps_ms.size()), deltas(o.gaps_ms.size());
  double last_done_s = -1;
  for (size_t k = 0; k < arrival_s.size();) {
    size_t end = k;
    bool whole = true;
    double done_s = last_done_s;
    while (end < arrival_s.size() && arrival_s[end] == arrival_s[k]) {
      const serve::RequestRecord& r = recs[first + end];
      whole = whole && r.answered;
      done_s = std::max(done_s, r.done_s);
      ++end;
    }
    const serve::RequestRecord& lead = recs[first + k];
    const double gap_ms = (lead.arrival_s - last_done_s) * 1e3;
    if (whole && last_done_s >= 0 && gap_ms > 0) {
      const auto g = static_cast<size_t>(gap_index[k]);
      gaps[g].push_back(gap_ms);
      for (size_t m = k; m < end; ++m)
        deltas[g].push_back(recs[first + m].latency_ms() - closed_ms);
    }
    last_done_s = done_s;
    k = end;
  }
  std::vector<IdlePoint> out;
  for (size_t g = 0; g < gaps.size(); ++g) {
    if (deltas[g].size() < 3) continue;  // too few for a standard error
    IdlePoint p{median(gaps[g]), significant_mean(deltas[g]), static_cast<int>(deltas[g].size())};
    // Medians of neighbouring gaps may cross when a burst ran long: keep the gaps increasing.
    if (!out.empty() && !(p.gap_ms > out.back().gap_ms)) continue;
    out.push_back(p);
  }
  make_monotone(&out);
  return out;
}

}  // namespace serf::profiler
