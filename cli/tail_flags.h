#pragma once
// Flags of the queue commands that go beyond the paper's mean latency under Poisson arrivals:
// --objective (plan), --percentile (size, capacity), --arrival-scv (predict, plan, size, capacity).
// Kept apart from queue_commands.cc so that file only wires them in.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "serf/core/tail_objective.h"
#include "serf/sim/fallback_objective.h"

namespace serf::cli {

// The objective the flags ask for: the analytic one (operator->) and, with --tail-method auto,
// the simulator fallback around it (get(), what the planner and sizing use). Empty (false) for the
// paper's mean under Poisson arrivals.
class TailObjective {
 public:
  explicit operator bool() const { return analytic_ != nullptr; }
  const LatencyObjective* operator->() const { return analytic_.get(); }
  const Objective* get() const;
  // "" or a line saying how many configurations the simulator scored.
  std::string note() const;
  int64_t simulations() const { return fallback_ ? fallback_->simulations() : 0; }

 private:
  friend struct TailFlags;
  std::unique_ptr<LatencyObjective> analytic_;
  std::unique_ptr<sim::SimulationFallbackObjective> fallback_;
};

struct TailFlags {
  std::string objective = "mean";  // plan: mean | pNN (e.g. p99)
  double percentile = 0;           // size, capacity: 0 = mean
  double arrival_scv = 1;
  std::string tail_method = "auto";  // auto: simulate where the approximation is poor; model: never
  CLI::Option* objective_opt = nullptr;
  CLI::Option* percentile_opt = nullptr;

  void add_objective(CLI::App* sub);
  void add_percentile(CLI::App* sub);
  void add_arrival_scv(CLI::App* sub);  // also adds --tail-method

  // The objective to plan/size with, or nullptr for the paper's (mean, Poisson). `nodes` is the
  // fixed cluster size, 0 when sizing searches it.
  StatusOr<TailObjective> make(const Profile& profile, int nodes) const;
  // "mean latency" or "p99 latency", plus the arrival SCV when not Poisson: for output lines.
  std::string what() const;
};

}  // namespace serf::cli
