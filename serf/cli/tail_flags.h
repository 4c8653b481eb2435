#pragma once
// Flags of the queue commands that go beyond the paper's mean latency under Poisson arrivals:
// --objective (plan), --percentile (size, capacity), --arrival-scv (predict, plan, size, capacity).
// Kept apart from queue_commands.cc so that file only wires them in.

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "serf/core/tail_objective.h"

namespace serf::cli {

struct TailFlags {
  std::string objective = "mean";  // plan: mean | pNN (e.g. p99)
  double percentile = 0;           // size, capacity: 0 = mean
  double arrival_scv = 1;
  CLI::Option* objective_opt = nullptr;
  CLI::Option* percentile_opt = nullptr;

  void add_objective(CLI::App* sub);
  void add_percentile(CLI::App* sub);
  void add_arrival_scv(CLI::App* sub);

  // The objective to plan/size with, or nullptr for the paper's (mean, Poisson). `nodes` is the
  // fixed cluster size, 0 when sizing searches it.
  StatusOr<std::unique_ptr<LatencyObjective>> make(const Profile& profile, int nodes) const;
  // "mean latency" or "p99 latency", plus the arrival SCV when not Poisson: for output lines.
  std::string what() const;
};

}  // namespace serf::cli
