#pragma once
// Service statistics of one unit while exactly i requests run (the profile's tuple (i, K, T)):
// the common input of the simulator and the tail-latency approximation.

#include <vector>

#include "serf/core/profile.h"
#include "serf/core/status.h"

namespace serf {

struct ServiceLevel {
  double mean_ms = 0;  // mean service time while i run
  double scv = 0;      // its squared coefficient of variation
};

// The levels of configuration (c, K, T): tuples (1..c, K, T), index i-1. NotFound names a missing
// one.
StatusOr<std::vector<ServiceLevel>> service_levels(const Profile& profile,
                                                   const Configuration& config);

}  // namespace serf
