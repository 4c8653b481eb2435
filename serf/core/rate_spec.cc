#include "serf/core/rate_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "serf/core/statistics.h"

namespace serf {

namespace {

constexpr size_t kMaxLevels = 1000000;

StatusOr<double> parse_number(const std::string& text, const std::string& spec) {
  // All of it, in decimal: strtod took " 5" and "0x10".
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    return InvalidArgument("'" + spec + "': '" + text +
                           "' is not a number (use a,b,c or start:stop:step, in requests/s)");
  }
  if (!std::isfinite(v) || v <= 0) {
    return InvalidArgument("'" + spec + "': rate '" + text + "' must be finite and > 0 requests/s");
  }
  // A subnormal rate split over the units is 0 per unit: the planner called 5e-324/s unstable.
  if (v < std::numeric_limits<double>::min()) {
    return InvalidArgument("'" + spec + "': rate '" + text + "' must be at least " +
                           format_g(std::numeric_limits<double>::min()) + " requests/s");
  }
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return parts;
}

}  // namespace

StatusOr<std::vector<double>> parse_rate_spec(const std::string& spec) {
  std::vector<double> rates;
  if (spec.find(':') != std::string::npos) {
    const auto parts = split(spec, ':');
    if (parts.size() != 3) {
      return InvalidArgument("'" + spec +
                             "': a range is start:stop:step (inclusive), in requests/s");
    }
    SERF_ASSIGN_OR_RETURN(const double start, parse_number(parts[0], spec));
    SERF_ASSIGN_OR_RETURN(const double stop, parse_number(parts[1], spec));
    SERF_ASSIGN_OR_RETURN(const double step, parse_number(parts[2], spec));
    if (stop < start) return InvalidArgument("'" + spec + "': stop is below start");
    // A small tolerance so that a stop on the grid is kept despite rounding of the step.
    const double span = (stop - start) / step;
    if (span + 1 > static_cast<double>(kMaxLevels)) {
      return InvalidArgument("'" + spec + "': more than 1,000,000 load levels; use a larger step");
    }
    const size_t n = static_cast<size_t>(std::floor(span + 1e-9)) + 1;
    rates.reserve(n);
    for (size_t k = 0; k < n; ++k) rates.push_back(start + static_cast<double>(k) * step);
    if (std::fabs(rates.back() - stop) <= 1e-9 * step) rates.back() = stop;
    return rates;
  }
  for (const std::string& part : split(spec, ',')) {
    SERF_ASSIGN_OR_RETURN(const double v, parse_number(part, spec));
    rates.push_back(v);
    if (rates.size() > kMaxLevels)
      return InvalidArgument("'" + spec + "': more than 1,000,000 rates");
  }
  std::sort(rates.begin(), rates.end());
  for (size_t k = 1; k < rates.size(); ++k) {
    if (rates[k] == rates[k - 1]) {
      return InvalidArgument("'" + spec + "': rate " + format_g(rates[k]) + " is given twice");
    }
  }
  return rates;
}

}  // namespace serf
