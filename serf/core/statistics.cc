#include "serf/core/statistics.h"

#include <charconv>
#include <cstdio>

namespace serf {

std::string format_number(const char* printf_format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, x);
  return buf;
}

std::string format_g(double x) { return format_number("%g", x); }

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
