#include "serf/sim/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace serf::sim {
namespace {

constexpr int kSub = 1 << LatencyHistogram::kMantissaBits;
constexpr int kExponents = LatencyHistogram::kMaxExponent - LatencyHistogram::kMinExponent;
constexpr size_t kBuckets = 1 + static_cast<size_t>(kExponents) * kSub;  // bucket 0: zero

}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(kBuckets, 0) {}

size_t LatencyHistogram::index(double v) {
  if (!(v >= std::ldexp(1.0, kMinExponent))) return 0;  // zero, tiny (and NaN, never produced)
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  if (exponent >= kMaxExponent) return kBuckets - 1;
  const uint64_t mantissa = (bits >> (52 - kMantissaBits)) & (kSub - 1);
  return 1 + static_cast<size_t>(exponent - kMinExponent) * kSub + mantissa;
}

double LatencyHistogram::quantile(double q) const {
  if (total_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double h = q * static_cast<double>(total_ - 1);
  const auto lo = static_cast<uint64_t>(std::floor(h));
  const double below = order_statistic(lo);
  if (lo + 1 >= total_) return below;
  return below + (h - static_cast<double>(lo)) * (order_statistic(lo + 1) - below);
}

double LatencyHistogram::order_statistic(uint64_t rank) const {
  uint64_t seen = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen > rank) {
      if (b == 0) return 0;
      const size_t k = b - 1;
      const int exponent = static_cast<int>(k / kSub) + kMinExponent;
      const double mantissa = static_cast<double>(k % kSub) + 0.5;  // the bucket's midpoint
      return std::ldexp(1.0 + mantissa / kSub, exponent);
    }
  }
  return 0;
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (size_t b = 0; b < counts_.size(); ++b) counts_[b] += other.counts_[b];
  total_ += other.total_;
}

}  // namespace serf::sim
