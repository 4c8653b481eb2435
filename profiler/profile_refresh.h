#pragma once
// serf profile --refresh (issue 17): a profile brought up to date offline. The tuples whose drift
// a serving run saw (its self-calibration's recalibrations) are measured again on the real nodes;
// every other tuple is scaled by its neighbours' drift, the rule online self-calibration uses
// (serf/core recalibrate). docs/calibration.md, "Refreshing a profile".

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serf/core/profile.h"

namespace serf::profiler {

// The tuples a serving run (serf serve --out, "serf-run/1") recalibrated, each once, in the order
// first seen. InvalidArgument naming `source`: another format, another model than `profile`'s,
// no "recalibrations" (the run did not self-calibrate), a malformed entry, or a tuple `profile`
// lacks. An empty list: the run saw no drift.
StatusOr<std::vector<ParallelismTuple>> drifted_tuples(const nlohmann::json& run,
                                                       const std::string& source,
                                                       const Profile& profile);

// The tuples of `profile` with K in `inter` and b in `batches` (an empty list: any), in its order.
std::vector<ParallelismTuple> select_tuples(const Profile& profile, const std::vector<int>& inter,
                                            const std::vector<int>& batches);

struct RefreshSummary {
  int remeasured = 0;
  int scaled = 0;      // kept tuples whose mean moved (factor != 1)
  double drift = 1.0;  // geometric mean of new / old over the re-measured tuples
};

// The refreshed profile: the tuples of `measured` take their new statistics and `refreshed_at` =
// `at_utc`; every other tuple of `old` is kept, its mean scaled by the drift the re-measured
// tuples show on its neighbours (recalibrate's rule: same (K, T), else same K, else all), its
// node_ms by the same factor and its drift_scale multiplied by it. The note says what was
// refreshed, when and why (`why`).
StatusOr<Profile> merge_refresh(const Profile& old, const Profile& measured,
                                const std::string& at_utc, const std::string& why,
                                RefreshSummary* summary);

}  // namespace serf::profiler
