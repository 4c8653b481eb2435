#include "serf/core/recalibration.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>

namespace serf {

namespace {

// Sum of log ratios and their count, to average in log space (a geometric mean).
struct LogMean {
  double sum = 0;
  int n = 0;
  void add(double log_ratio) {
    sum += log_ratio;
    ++n;
  }
  double factor() const { return n > 0 ? std::exp(sum / n) : 1.0; }
};

}  // namespace

StatusOr<Recalibration> recalibrate(const Profile& profile,
                                    const std::vector<TupleObservation>& observations) {
  Recalibration out;
  out.profile = profile;
  out.profile.reindex();
  std::map<std::pair<int, int>, LogMean> by_kt;
  std::map<int, LogMean> by_k;
  LogMean all;
  std::map<size_t, double> observed_ms;  // index into tuples -> observed mean
  for (const TupleObservation& o : observations) {
    if (!std::isfinite(o.mean_ms) || !(o.mean_ms >= kMinServiceMs) || o.mean_ms > kMaxServiceMs) {
      return InvalidArgument("observed mean of tuple " + to_string(o.tuple) + " is " +
                             std::to_string(o.mean_ms) + " ms: must be finite and in [" +
                             std::to_string(kMinServiceMs) + ", " + std::to_string(kMaxServiceMs) +
                             "] ms");
    }
    const TupleStats* s = out.profile.find(o.tuple);
    if (s == nullptr) {
      return InvalidArgument("observed tuple " + to_string(o.tuple) +
                             " is not in the profile; only profiled tuples can be recalibrated");
    }
    const size_t index = static_cast<size_t>(s - out.profile.tuples.data());
    if (!observed_ms.emplace(index, o.mean_ms).second) {
      return InvalidArgument("tuple " + to_string(o.tuple) + " is observed twice");
    }
    const double log_ratio = std::log(o.mean_ms / s->mean_ms);
    by_kt[{o.tuple.inter, o.tuple.intra}].add(log_ratio);
    by_k[o.tuple.inter].add(log_ratio);
    all.add(log_ratio);
  }
  out.drift = all.factor();
  for (size_t k = 0; k < out.profile.tuples.size(); ++k) {
    TupleStats& s = out.profile.tuples[k];
    auto seen = observed_ms.find(k);
    if (seen != observed_ms.end()) {
      s.mean_ms = seen->second;
      ++out.observed;
      continue;
    }
    double factor = all.factor();
    auto kt = by_kt.find({s.tuple.inter, s.tuple.intra});
    auto kk = by_k.find(s.tuple.inter);
    if (kt != by_kt.end()) {
      factor = kt->second.factor();
    } else if (kk != by_k.end()) {
      factor = kk->second.factor();
    }
    if (factor != 1.0) {
      s.mean_ms *= factor;
      ++out.scaled;
    }
  }
  // A neighbour's drift can carry a tuple out of range; say so rather than plan with it.
  SERF_RETURN_IF_ERROR(out.profile.validate());
  return out;
}

}  // namespace serf
