#pragma once
// What `serf profile` prints on standard output: the tuple table, a refresh's old/new table, the
// exhaustive baseline's best configuration per rate and its precision verdicts. The profiler
// owns these reports; the CLI only calls them (ARCHITECTURE.md: no report formatting there).

#include "profiler/profile_refresh.h"
#include "profiler/tuple_profiler.h"
#include "serf/core/profile.h"

namespace serf::profiler {

// One row per tuple: mean_ms (the slot's service time), node_ms (the nodes' share), scv,
// samples, wall_s, and with `passes` the passes kept of those run; then the total wall time.
void print_tuple_table(const Profile& profile, bool passes, double total_s);

// A refresh: each re-measured tuple's old and new mean and their ratio, then the summary.
void print_refresh_table(const Profile& old, const Profile& measured, const Profile& fresh,
                         const RefreshSummary& summary);

// The exhaustive baseline's best configuration at each rate.
void print_best_per_rate(const ExhaustiveReport& report);

// One line per point: VALID, or INVALID and why (the LoadGen manner), and the count VALID.
void print_verdicts(const ExhaustiveReport& report, const PrecisionTarget& target);

}  // namespace serf::profiler
