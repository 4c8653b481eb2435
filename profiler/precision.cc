#include "profiler/precision.h"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <cmath>
#include <cstdio>

#include "profiler/validation.h"
#include "serf/core/statistics.h"

namespace serf::profiler {

namespace {

constexpr size_t kMserBatch = 5;

std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// 1-based order statistics bounding the q-quantile with 95 % confidence; hi > n: unbounded.
// K, the number of observations at or below the true quantile, is Binomial(n, q): X_(hi) lies
// above the quantile when K < hi, X_(lo) below it when K >= lo.
void order_statistic_bounds(size_t n, double q, size_t* lo, size_t* hi) {
  using boost::math::binomial_distribution;
  const binomial_distribution<double> k(static_cast<double>(n), q);
  // The quantile functions land near the answer; the loops make the rounding exact.
  const auto cdf = [&](size_t x) { return boost::math::cdf(k, static_cast<double>(x)); };
  size_t h = static_cast<size_t>(std::max(0.0, boost::math::quantile(k, 0.975)));
  h = std::min(h, n);
  while (h > 0 && cdf(h - 1) >= 0.975) --h;
  while (h < n && cdf(h) < 0.975) ++h;
  *hi = h + 1;  // the smallest h with P(K <= h) >= 0.975
  size_t l = static_cast<size_t>(std::max(0.0, boost::math::quantile(k, 0.025)));
  l = std::min(l, n);
  while (l > 0 && cdf(l - 1) > 0.025) --l;
  while (l < n && cdf(l) <= 0.025) ++l;  // the largest l with P(K < l) <= 0.025
  *lo = std::max<size_t>(l, 1);          // P(K < l) <= 0.025
}

}  // namespace

WarmupCut mser5_cut(const std::vector<double>& values) {
  WarmupCut cut;
  const size_t m = values.size() / kMserBatch;
  if (m < 4) return cut;
  std::vector<double> z(m);
  for (size_t j = 0; j < m; ++j) {
    double s = 0;
    for (size_t k = 0; k < kMserBatch; ++k) s += values[j * kMserBatch + k];
    z[j] = s / kMserBatch;
  }
  // Suffix sums of z and z^2 give every d's statistic in O(m).
  std::vector<double> s1(m + 1, 0), s2(m + 1, 0);
  for (size_t j = m; j-- > 0;) {
    s1[j] = s1[j + 1] + z[j];
    s2[j] = s2[j + 1] + z[j] * z[j];
  }
  size_t best = 0;
  double best_stat = INFINITY;
  // The last quarter is not searched: a statistic over a few batches is small by chance there
  // (MSER's end effect), and a cut that late means the run is too short anyway.
  for (size_t d = 0; d < m - m / 4; ++d) {
    const double n = static_cast<double>(m - d);
    const double mean = s1[d] / n;
    const double ss = std::max(0.0, s2[d] - n * mean * mean);
    const double stat = ss / (n * n);
    if (stat < best_stat) {
      best_stat = stat;
      best = d;
    }
  }
  cut.settled = best <= m / 2;
  cut.requests = std::min(best, m / 2) * kMserBatch;
  return cut;
}

int min_requests_for_percentile(double percentile) {
  const double q = percentile / 100;
  if (!(q > 0 && q < 1)) return 1;
  return static_cast<int>(std::ceil(std::log(0.025) / std::log(q)));
}

int min_valid_requests(const PrecisionTarget& target) {
  return std::max(target.min_requests, min_requests_for_percentile(target.percentile));
}

std::string PointVerdict::reason_text() const {
  if (valid) return "VALID";
  std::string s;
  for (const std::string& r : reasons) s += (s.empty() ? "" : "; ") + r;
  return s;
}

PointVerdict judge_point(const std::vector<double>& latency_ms, double duration_s,
                         const PrecisionTarget& target, size_t not_answered) {
  PointVerdict v;
  v.duration_s = duration_s;
  const WarmupCut cut = mser5_cut(latency_ms);
  v.warmup = cut.requests;
  std::vector<double> kept(latency_ms.begin() + static_cast<std::ptrdiff_t>(cut.requests),
                           latency_ms.end());
  v.measured = kept.size();
  if (!kept.empty()) {
    v.mean_ms = mean(kept);
    v.ci95_ms = batch_means_ci95(kept);
    if (v.ci95_ms >= 0 && v.mean_ms > 0) v.ci95_rel = v.ci95_ms / v.mean_ms;
    std::vector<double> sorted = kept;
    std::sort(sorted.begin(), sorted.end());
    const double q = target.percentile / 100;
    v.percentile_ms = quantile_sorted(sorted, q);
    size_t lo = 0, hi = 0;
    order_statistic_bounds(sorted.size(), q, &lo, &hi);
    if (hi <= sorted.size()) {
      v.percentile_bounded = true;
      v.percentile_lo_ms = sorted[lo - 1];
      v.percentile_hi_ms = sorted[hi - 1];
    }
  }
  if (not_answered > 0)
    v.reasons.push_back(std::to_string(not_answered) + " request(s) not answered");
  if (duration_s < target.min_duration_s) {
    v.reasons.push_back("ran " + fmt("%.1f", duration_s) + " s < min duration " +
                        fmt("%g", target.min_duration_s) + " s");
  }
  if (v.measured < static_cast<size_t>(target.min_requests)) {
    v.reasons.push_back(std::to_string(v.measured) + " requests after the warm-up < min " +
                        std::to_string(target.min_requests));
  }
  if (!cut.settled) {
    v.reasons.push_back("no steady state: the MSER-5 warm-up cut lies past half the run");
  }
  if (v.ci95_rel < 0) {
    v.reasons.push_back("too few requests for a confidence interval");
  } else if (v.ci95_rel > target.precision) {
    v.reasons.push_back("95% CI half-width " + fmt("%.1f", 100 * v.ci95_rel) + "% > target " +
                        fmt("%g", 100 * target.precision) + "%");
  }
  if (!v.percentile_bounded) {
    v.reasons.push_back("p" + fmt("%g", target.percentile) + " unbounded: needs >= " +
                        std::to_string(min_requests_for_percentile(target.percentile)) +
                        " requests after the warm-up");
  }
  v.valid = v.reasons.empty();
  return v;
}

}  // namespace serf::profiler
