#pragma once
// The largest cluster any command or file may name: one rule for the flags (--nodes,
// --cores-per-node, --intra) and the files (a profile's, table's or measurement's hardware).

#include <string>

#include "serf/core/configuration.h"
#include "serf/core/status.h"

namespace serf {

// N nodes (--nodes, a profile's hardware.nodes) and F cores per node (--cores-per-node; so also
// the most threads T of a request). Beyond, a simulation's units or a tuple enumeration would not
// fit in memory or time (a profile of 2^31 - 1 nodes made simulate allocate as many units).
inline constexpr int kMaxNodes = 1000000;
inline constexpr int kMaxCoresPerNode = 1024;
// N in [1, kMaxNodes] and F in [1, kMaxCoresPerNode]: InvalidArgument naming the field under
// `where` ("hardware": "hardware.nodes 2147483647 must lie in [1, 1000000]"; "": "nodes ...").
Status validate(const ClusterShape& shape, const std::string& where);

}  // namespace serf
