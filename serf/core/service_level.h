#pragma once
// Service statistics of one unit while exactly i batches run (the profile's tuples (i, K, T, b)):
// the common input of the simulator, the batch queue model and the tail-latency approximation.

#include <vector>

#include "serf/core/profile.h"
#include "serf/core/status.h"

namespace serf {

struct ServiceLevel {
  double mean_ms = 0;  // mean service time (of one batch) while i run
  double scv = 0;      // its squared coefficient of variation
};

// The levels of configuration (c, K, T, b) with full batches: tuples (1..c, K, T, b), index i-1
// (with b = 1, the paper's tuples (1..c, K, T)). NotFound names a missing one. The caller has
// checked the configuration against its cluster (validate(), configuration.h).
StatusOr<std::vector<ServiceLevel>> service_levels(const Profile& profile,
                                                   const Configuration& config);

// The service of configuration (c, K, T, b) for every batch a slot can take: at(i, n) is a batch of
// n = 1..b requests while i = 1..c batches run (itself included).
//
// How a batch of n < b requests is served (the rule the planner, the simulator and the runtime's
// emulation share): a batch of n runs as a batch of n (no padding). When the profile holds tuple
// (i, K, T, n) it is used as measured; otherwise its mean and standard deviation are interpolated
// linearly in n between the nearest batch sizes profiled below and above n at the same (i, K, T).
// Linear because a batch's time is close to affine in n (the weights are read once per batch, the
// arithmetic grows with n: the roofline bound max(weight bytes / bandwidth, n x FLOPs / peak) is
// piecewise linear). So configuration (c, K, T, b) needs tuples (1..c, K, T, 1) and
// (1..c, K, T, b); profiling more batch sizes in between only sharpens it.
class ServiceTable {
 public:
  // levels[(i - 1) * b + (n - 1)] for i = 1..c, n = 1..b.
  static StatusOr<ServiceTable> Create(int c, int b, std::vector<ServiceLevel> levels);
  // Levels that do not depend on the batch size: at(i, n) = levels[i - 1] for every n.
  static StatusOr<ServiceTable> Uniform(const std::vector<ServiceLevel>& levels, int b);

  int service() const { return c_; }
  int batch() const { return b_; }
  const ServiceLevel& at(int i, int n) const {
    return levels_[static_cast<size_t>(i - 1) * static_cast<size_t>(b_) +
                   static_cast<size_t>(n - 1)];
  }
  // at(i, b) for i = 1..c.
  std::vector<ServiceLevel> full_batches() const;
  // at(i, 1) for i = 1..c.
  std::vector<ServiceLevel> single_requests() const;

 private:
  ServiceTable() = default;
  int c_ = 0, b_ = 0;
  std::vector<ServiceLevel> levels_;
};

StatusOr<ServiceTable> service_table(const Profile& profile, const Configuration& config);

}  // namespace serf
