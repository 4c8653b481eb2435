#pragma once
// A streaming log-linear histogram for latency percentiles (HDR-histogram style).
// A value's bucket is its binary exponent and the top kMantissaBits bits of its mantissa, so every
// bucket spans a relative width of 2^-kMantissaBits and a quantile, reported as the bucket's
// midpoint, is within a relative error of 2^-(kMantissaBits+1) = 0.05% of the exact order
// statistic. Quantiles follow the project's one definition (serf/core/statistics.h, Hyndman-Fan
// type 7): interpolated between the two order statistics around (n - 1) q, each read as its
// bucket's midpoint, so within the same 0.05% of quantile() over the raw values. Values below
// 2^kMinExponent ms count as 0.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace serf::sim {

class LatencyHistogram {
 public:
  static constexpr int kMantissaBits = 10;
  static constexpr int kMinExponent = -24;  // 2^-24 ms, about 0.06 ns
  static constexpr int kMaxExponent = 40;   // 2^40 ms, about 35 years: larger values are clamped
  static constexpr double kRelativeError = 1.0 / (1 << (kMantissaBits + 1));

  LatencyHistogram();

  void add(double value_ms) {
    ++counts_[index(value_ms)];
    ++total_;
  }
  uint64_t count() const { return total_; }
  // The q-quantile (0 <= q <= 1, type 7), within kRelativeError; 0 when empty.
  double quantile(double q) const;
  void merge(const LatencyHistogram& other);

 private:
  static size_t index(double v);
  // The order statistic of 0-based rank `rank` (< count()), as its bucket's midpoint.
  double order_statistic(uint64_t rank) const;
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
};

}  // namespace serf::sim
