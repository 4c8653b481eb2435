#include "serf/core/service_level.h"

#include <algorithm>
#include <cmath>

namespace serf {

StatusOr<std::vector<ServiceLevel>> service_levels(const Profile& profile,
                                                   const Configuration& config) {
  SERF_ASSIGN_OR_RETURN(auto tuples, profile.tuples_for(config));
  std::vector<ServiceLevel> levels;
  levels.reserve(tuples.size());
  for (const TupleStats* t : tuples) levels.push_back({t->mean_ms, t->scv});
  return levels;
}

StatusOr<ServiceTable> ServiceTable::Create(int c, int b, std::vector<ServiceLevel> levels) {
  if (c < 1 || b < 1 || b > kMaxBatch) {
    return InvalidArgument(
        "a service table needs c >= 1 and 1 <= b <= " + std::to_string(kMaxBatch) +
        " (got c = " + std::to_string(c) + ", b = " + std::to_string(b) + ")");
  }
  if (levels.size() != static_cast<size_t>(c) * static_cast<size_t>(b)) {
    return InvalidArgument("a service table of c = " + std::to_string(c) +
                           ", b = " + std::to_string(b) + " needs c * b levels");
  }
  for (size_t k = 0; k < levels.size(); ++k) {
    const ServiceLevel& l = levels[k];
    if (!std::isfinite(l.mean_ms) || l.mean_ms <= 0 || !std::isfinite(l.scv) || l.scv < 0) {
      return InvalidArgument("service level (i=" + std::to_string(k / b + 1) +
                             ", n=" + std::to_string(k % b + 1) +
                             "): mean_ms must be finite and > 0, scv finite and >= 0");
    }
  }
  ServiceTable t;
  t.c_ = c;
  t.b_ = b;
  t.levels_ = std::move(levels);
  return t;
}

StatusOr<ServiceTable> ServiceTable::Uniform(const std::vector<ServiceLevel>& levels, int b) {
  std::vector<ServiceLevel> all;
  if (b >= 1 && b <= kMaxBatch) all.reserve(levels.size() * static_cast<size_t>(b));
  for (const ServiceLevel& l : levels)
    all.insert(all.end(), static_cast<size_t>(std::max(b, 0)), l);
  return Create(static_cast<int>(levels.size()), b, std::move(all));
}

std::vector<ServiceLevel> ServiceTable::full_batches() const {
  std::vector<ServiceLevel> out;
  for (int i = 1; i <= c_; ++i) out.push_back(at(i, b_));
  return out;
}

std::vector<ServiceLevel> ServiceTable::single_requests() const {
  std::vector<ServiceLevel> out;
  for (int i = 1; i <= c_; ++i) out.push_back(at(i, 1));
  return out;
}

StatusOr<ServiceTable> service_table(const Profile& profile, const Configuration& config) {
  if (config.service < 1) return InvalidArgument("service parallelism c must be >= 1");
  if (config.batch < 1 || config.batch > kMaxBatch) {
    return InvalidArgument("batch size b must lie in [1, " + std::to_string(kMaxBatch) + "] (got " +
                           std::to_string(config.batch) + ")");
  }
  // The endpoints: batches of 1 and of b at every i (tuples_for names a missing one).
  Configuration single = config;
  single.batch = 1;
  SERF_RETURN_IF_ERROR(profile.tuples_for(single).status());
  SERF_RETURN_IF_ERROR(profile.tuples_for(config).status());
  const int b = config.batch;
  std::vector<ServiceLevel> levels(static_cast<size_t>(config.service) * static_cast<size_t>(b));
  for (int i = 1; i <= config.service; ++i) {
    // Profiled batch sizes at (i, K, T), ascending; 1 and b are among them.
    std::vector<const TupleStats*> known;
    for (int n = 1; n <= b; ++n) {
      if (const TupleStats* s = profile.find({i, config.inter, config.intra, n}))
        known.push_back(s);
    }
    size_t hi = 0;
    for (int n = 1; n <= b; ++n) {
      while (known[hi]->tuple.batch < n) ++hi;
      const TupleStats& above = *known[hi];
      ServiceLevel& l = levels[static_cast<size_t>(i - 1) * b + static_cast<size_t>(n - 1)];
      if (above.tuple.batch == n) {
        l = {above.mean_ms, above.scv};
        continue;
      }
      const TupleStats& below = *known[hi - 1];
      const double w = static_cast<double>(n - below.tuple.batch) /
                       static_cast<double>(above.tuple.batch - below.tuple.batch);
      const double mean = (1 - w) * below.mean_ms + w * above.mean_ms;
      const double sd =
          (1 - w) * below.mean_ms * std::sqrt(below.scv) + w * above.mean_ms * std::sqrt(above.scv);
      l = {mean, (sd / mean) * (sd / mean)};
    }
  }
  return ServiceTable::Create(config.service, b, std::move(levels));
}

}  // namespace serf
