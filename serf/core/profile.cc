#include "serf/core/profile.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "serf/core/cluster_limits.h"

namespace serf {

size_t Profile::TupleHash::operator()(const ParallelismTuple& t) const {
  uint64_t h = static_cast<uint32_t>(t.service);
  for (int v : {t.inter, t.intra, t.batch})
    h = h * 0x9E3779B97F4A7C15ULL + static_cast<uint32_t>(v);
  return std::hash<uint64_t>()(h);
}

void Profile::reindex() {
  index_.clear();
  index_.reserve(tuples.size());
  for (size_t k = 0; k < tuples.size(); ++k) index_.emplace(tuples[k].tuple, k);
}

const TupleStats* Profile::find(const ParallelismTuple& t) const {
  if (index_.size() == tuples.size() && !tuples.empty()) {
    auto it = index_.find(t);
    if (it == index_.end()) return nullptr;
    return &tuples[it->second];
  }
  for (const TupleStats& s : tuples) {
    if (s.tuple == t) return &s;
  }
  return nullptr;
}

StatusOr<std::vector<const TupleStats*>> Profile::tuples_for(const Configuration& c) const {
  std::vector<const TupleStats*> out;
  out.reserve(static_cast<size_t>(c.service > 0 ? c.service : 0));
  for (int i = 1; i <= c.service; ++i) {
    const ParallelismTuple t{i, c.inter, c.intra, c.batch};
    const TupleStats* s = find(t);
    if (s == nullptr) {
      return NotFound("profile has no tuple " + to_string(t) + " needed by configuration " +
                      to_string(c) + "; profile it or choose another configuration");
    }
    out.push_back(s);
  }
  return out;
}

std::vector<int> Profile::batch_sizes(int inter, int intra) const {
  std::vector<int> out;
  for (const TupleStats& s : tuples) {
    if (s.tuple.service == 1 && s.tuple.inter == inter && s.tuple.intra == intra) {
      out.push_back(s.tuple.batch);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status Profile::validate() const {
  SERF_RETURN_IF_ERROR(serf::validate(hardware, "hardware"));
  for (size_t k = 0; k < tuples.size(); ++k) {
    const TupleStats& s = tuples[k];
    const std::string where = "tuples[" + std::to_string(k) + "]";
    if (s.tuple.service < 1 || s.tuple.inter < 1 || s.tuple.intra < 1) {
      return InvalidArgument(where + ": service, inter and intra must be >= 1");
    }
    if (s.tuple.batch < 1 || s.tuple.batch > kMaxBatch) {
      return InvalidArgument(where + ".batch must lie in [1, " + std::to_string(kMaxBatch) +
                             "] requests (got " + std::to_string(s.tuple.batch) + ")");
    }
    // 1 ns to 11 days, and an SCV far beyond any measured one: outside, the numbers downstream
    // (percentile roots, emulated sleeps, simulations) lose their meaning.
    if (!(s.mean_ms >= kMinServiceMs && s.mean_ms <= kMaxServiceMs)) {
      return InvalidArgument(where + ".mean_ms must lie in [1e-6, 1e9] ms");
    }
    if (!(s.scv >= 0 && s.scv <= kMaxServiceScv)) {
      return InvalidArgument(where + ".scv must lie in [0, 1e4]");
    }
    if (s.samples < 0) return InvalidArgument(where + ".samples must be >= 0");
    // A tuple the hardware cannot run (K > N, i*T > F) was not measured on it: every command
    // that reads the profile would plan, predict or emulate with it.
    const Status fits = serf::validate(s.tuple, hardware);
    if (!fits.ok()) {
      return InvalidArgument(where + ": " + fits.message() +
                             " (the profile's hardware: " + std::to_string(hardware.nodes) +
                             " nodes x " + std::to_string(hardware.cores_per_node) + " cores)");
    }
  }
  std::unordered_map<ParallelismTuple, size_t, TupleHash> seen;
  seen.reserve(tuples.size());
  for (size_t k = 0; k < tuples.size(); ++k) {
    if (!seen.emplace(tuples[k].tuple, k).second) {
      return InvalidArgument("tuples[" + std::to_string(k) + "]: duplicate tuple " +
                             to_string(tuples[k].tuple));
    }
  }
  return Status::Ok();
}

}  // namespace serf
