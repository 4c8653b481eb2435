#pragma once
// Measurements that know their precision: a point of an exhaustive run is measured until the 95 %
// CI half-width of its mean latency is within a target, with a minimum duration and count, a
// warm-up cut found from the data (MSER-5), and a bounded percentile (early stopping in the manner
// of MLPerf LoadGen's server scenario). Each point is VALID or INVALID with the reasons. Pure
// computation (no I/O), tested without a cluster.

#include <cstddef>
#include <string>
#include <vector>

namespace serf::profiler {

// MSER-5 (White 1997; Franklin and White 2008): the series is cut into batches of 5, and the
// truncation d (in batches) minimizing the marginal standard error of the remaining batch means,
// sum_{j >= d} (z_j - zbar_d)^2 / (m - d)^2, is the warm-up. d is searched over the first three
// quarters and only the first half is admissible: a minimum past it means the run has not left
// its transient (settled false).
struct WarmupCut {
  size_t requests = 0;  // observations to drop (5 d)
  bool settled = true;  // false: the minimum lies in the second half; the run is too short
};
WarmupCut mser5_cut(const std::vector<double>& values);

// What a point must reach to be VALID.
struct PrecisionTarget {
  double precision = 0.03;     // the mean latency's 95 % CI half-width / mean, at most
  double min_duration_s = 10;  // of the measured run (arrival of the first to the last answer)
  int min_requests = 100;      // measured, after the warm-up cut
  double percentile = 99;      // must be bounded by an order-statistic 95 % CI (early stopping)
};

// The fewest requests for which the distribution-free 95 % CI of the `percentile` has an upper
// order statistic (1 - (p/100)^n >= 0.975): 368 for the p99.
int min_requests_for_percentile(double percentile);

// The answers after the warm-up a point needs before it can be VALID: max(min_requests, the
// percentile's), whatever its CI (368 with the defaults).
int min_valid_requests(const PrecisionTarget& target);

struct PointVerdict {
  bool valid = false;
  std::vector<std::string> reasons;  // why not VALID; empty when VALID
  size_t warmup = 0;                 // requests cut by MSER-5
  size_t measured = 0;               // requests after the cut
  double mean_ms = 0;
  double ci95_ms = -1;  // batch means (10 batches); < 0: too few
  double ci95_rel = -1;
  double duration_s = 0;
  double percentile_ms = 0;  // of the measured requests (quantile type 7)
  bool percentile_bounded = false;
  double percentile_lo_ms = 0, percentile_hi_ms = 0;  // its 95 % order-statistic CI
  std::string reason_text() const;                    // "VALID" or the reasons joined by "; "
};

// Judges a point from its latencies in arrival order (warm-up included), how long it ran and how
// many requests did not end in an answer (failed, rejected, timed out: each makes it INVALID).
PointVerdict judge_point(const std::vector<double>& latency_ms, double duration_s,
                         const PrecisionTarget& target, size_t not_answered = 0);

}  // namespace serf::profiler
