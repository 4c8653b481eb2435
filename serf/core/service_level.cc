#include "serf/core/service_level.h"

namespace serf {

StatusOr<std::vector<ServiceLevel>> service_levels(const Profile& profile,
                                                   const Configuration& config) {
  if (config.service < 1) return InvalidArgument("service parallelism c must be >= 1");
  SERF_ASSIGN_OR_RETURN(auto tuples, profile.tuples_for(config));
  std::vector<ServiceLevel> levels;
  levels.reserve(tuples.size());
  for (const TupleStats* t : tuples) levels.push_back({t->mean_ms, t->scv});
  return levels;
}

}  // namespace serf
