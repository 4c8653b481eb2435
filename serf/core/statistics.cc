#include "serf/core/statistics.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <charconv>
#include <cstdio>

namespace serf {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double h = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return quantile_sorted(values, q);
}

double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double x : values) sum += x;
  return sum / static_cast<double>(values.size());
}

double mean_within_mad(const std::vector<double>& values, double z) {
  if (values.empty()) return 0;
  const double m = median(values);
  std::vector<double> deviation;
  deviation.reserve(values.size());
  for (double x : values) deviation.push_back(std::fabs(x - m));
  const double limit = z * 1.4826 * median(deviation);
  double sum = 0;
  size_t kept = 0;
  for (double x : values) {
    if (std::fabs(x - m) > limit) continue;
    sum += x;
    ++kept;
  }
  return sum / static_cast<double>(kept);
}

double variance(const std::vector<double>& values) {
  if (values.empty()) return 0;
  const double m = mean(values);
  double sum = 0;
  for (double x : values) sum += (x - m) * (x - m);
  return sum / static_cast<double>(values.size());
}

double scv(const std::vector<double>& values) {
  const double m = mean(values);
  return m > 0 ? variance(values) / (m * m) : 0;
}

double ci95_half_width(const std::vector<double>& means) {
  const size_t n = means.size();
  if (n < 2) return -1;
  const double sample_var = variance(means) * static_cast<double>(n) / static_cast<double>(n - 1);
  const boost::math::students_t t(static_cast<double>(n - 1));
  return boost::math::quantile(boost::math::complement(t, 0.025)) *
         std::sqrt(sample_var / static_cast<double>(n));
}

double batch_means_ci95(const std::vector<double>& values, int batches) {
  if (batches < 2 || values.size() < 2 * static_cast<size_t>(batches)) return -1;
  const size_t per = values.size() / static_cast<size_t>(batches);
  std::vector<double> means;
  means.reserve(static_cast<size_t>(batches));
  for (int b = 0; b < batches; ++b) {
    const size_t from = static_cast<size_t>(b) * per;
    const size_t to = b + 1 == batches ? values.size() : from + per;
    double sum = 0;
    for (size_t k = from; k < to; ++k) sum += values[k];
    means.push_back(sum / static_cast<double>(to - from));
  }
  return ci95_half_width(means);
}

std::string format_number(const char* printf_format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, x);
  return buf;
}

std::string format_g(double x) { return format_number("%g", x); }

std::string format_sig4(double x) { return format_number("%.4g", x); }

std::string format_shortest(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::string format_ms(double ms) { return format_number("%.1f", ms) + " ms"; }

std::string format_rate(double per_s) {
  return per_s >= 1000 ? format_number("%.0f", per_s) : format_number("%.4g", per_s);
}

std::string format_rate_text(double per_s) { return format_rate(per_s) + " requests/s"; }

std::string format_percent(double fraction) { return format_number("%.1f%%", 100 * fraction); }

std::string format_count(int64_t n) {
  const uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  const std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace serf
