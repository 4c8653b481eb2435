#include "serf/core/profile.h"

#include <cmath>
#include <sstream>

namespace serf {

std::string to_string(const ParallelismTuple& t) {
  std::ostringstream os;
  os << "(i=" << t.service << ", K=" << t.inter << ", T=" << t.intra << ")";
  return os.str();
}

std::string to_string(const Configuration& c) {
  std::ostringstream os;
  os << "(c=" << c.service << ", K=" << c.inter << ", T=" << c.intra << ")";
  return os.str();
}

uint64_t Profile::key(const ParallelismTuple& t) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(t.service)) << 42) ^
         (static_cast<uint64_t>(static_cast<uint32_t>(t.inter)) << 21) ^
         static_cast<uint64_t>(static_cast<uint32_t>(t.intra));
}

void Profile::reindex() {
  index_.clear();
  index_.reserve(tuples.size());
  for (size_t k = 0; k < tuples.size(); ++k) index_.emplace(key(tuples[k].tuple), k);
}

const TupleStats* Profile::find(const ParallelismTuple& t) const {
  if (index_.size() == tuples.size() && !tuples.empty()) {
    auto it = index_.find(key(t));
    if (it == index_.end() || !(tuples[it->second].tuple == t)) return nullptr;
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
    const ParallelismTuple t{i, c.inter, c.intra};
    const TupleStats* s = find(t);
    if (s == nullptr) {
      return NotFound("profile has no tuple " + to_string(t) + " needed by configuration " +
                      to_string(c) + "; profile it or choose another configuration");
    }
    out.push_back(s);
  }
  return out;
}

Status Profile::validate() const {
  if (hardware.nodes < 1) return InvalidArgument("hardware.nodes must be >= 1");
  if (hardware.cores_per_node < 1) return InvalidArgument("hardware.cores_per_node must be >= 1");
  for (size_t k = 0; k < tuples.size(); ++k) {
    const TupleStats& s = tuples[k];
    const std::string where = "tuples[" + std::to_string(k) + "]";
    if (s.tuple.service < 1 || s.tuple.inter < 1 || s.tuple.intra < 1) {
      return InvalidArgument(where + ": service, inter and intra must be >= 1");
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
  }
  std::unordered_map<uint64_t, size_t> seen;
  seen.reserve(tuples.size());
  for (size_t k = 0; k < tuples.size(); ++k) {
    if (!seen.emplace(key(tuples[k].tuple), k).second) {
      return InvalidArgument("tuples[" + std::to_string(k) + "]: duplicate tuple " +
                             to_string(tuples[k].tuple));
    }
  }
  return Status::Ok();
}

}  // namespace serf
