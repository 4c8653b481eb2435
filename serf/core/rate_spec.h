#pragma once
// Load levels on the command line: "a,b,c" (a list) or "start:stop:step" (inclusive range).

#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf {

// Rates in requests/s, ascending, each finite and > 0. A range includes `stop` when it lies on the
// grid up to rounding (0:1:0.1 style steps are safe); a list is sorted and must hold no repeats.
// At most 1,000,000 levels.
StatusOr<std::vector<double>> parse_rate_spec(const std::string& spec);

}  // namespace serf
