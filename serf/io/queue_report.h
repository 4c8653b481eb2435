#pragma once
// What the queue commands (predict, plan, size, capacity) and `serf simulate` print: one JSON
// writer and one text writer per result kind, so the same thing has the same name everywhere
// (a configuration is the flat fields "service", "inter", "intra"; a cluster-wide rate is
// "rate_per_s"; a unit's is "unit_rate_per_s").

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serf/core/planner.h"
#include "serf/core/sizing.h"
#include "serf/core/tail_objective.h"
#include "serf/sim/simulator.h"

namespace serf::io {

// What an objective beyond the paper's mean (a percentile, bursty arrivals) adds to a report.
struct ObjectiveLabel {
  bool active = false;                // false: the paper's mean under Poisson arrivals
  std::string name = "mean";          // "p99", "mean (arrival SCV 4)" (as written in tables)
  std::string what = "mean latency";  // "p99 latency (arrival SCV 4)", for text lines
  double percentile = 0;              // 0: the mean
  double arrival_scv = 1;
  int64_t simulations = 0;  // evaluations the simulator made where the approximation is poor
  std::string note;         // "" or a line saying so
};

// {"service": c, "inter": K, "intra": T, "batch": b}: merged into every result that names a
// configuration (as in serf-table/1 entries).
nlohmann::json configuration_json(const Configuration& c);

// predict
nlohmann::json predict_json(const ConfigurationPrediction& r, const ObjectiveLabel& objective);
std::string predict_text(const ConfigurationPrediction& r, const ObjectiveLabel& objective,
                         bool illustrative);

// plan: the load ranges of the table with their best configuration, and the files written.
std::string plan_text(const ConfigurationTable& table, const std::vector<std::string>& written,
                      const ObjectiveLabel& objective);
// The number of unstable load levels of a table and the line that says so ("" when none).
std::string plan_unstable_message(const ConfigurationTable& table);

// size
nlohmann::json sizing_json(const SizingResult& r);
nlohmann::json sizing_rows_json(const std::vector<SizingResult>& rows, double slo_ms, int max_nodes,
                                QueueKind queue);
std::string sizing_text(const SizingResult& r, QueueKind queue, const ObjectiveLabel& objective,
                        bool illustrative);
std::string sizing_rows_text(const std::vector<SizingResult>& rows, double slo_ms, int max_nodes,
                             QueueKind queue, const ObjectiveLabel& objective, bool illustrative);

// capacity
nlohmann::json capacity_json(const CapacityResult& r, QueueKind queue,
                             const ObjectiveLabel& objective);
std::string capacity_text(const CapacityResult& r, QueueKind queue, const ObjectiveLabel& objective,
                          bool illustrative);

// simulate: the options the run had and its result (nullptr: the load was unstable, no result).
struct SimulationReport {
  Configuration config;
  int nodes = 0;
  std::string semantics, arrivals;
  const sim::SimulationOptions* options = nullptr;
  const sim::SimulationResult* result = nullptr;
};
nlohmann::json simulation_json(const SimulationReport& r);
std::string simulation_text(const SimulationReport& r);

// "note: this profile is illustrative, not measured ..." or "".
std::string illustrative_note(bool illustrative);

}  // namespace serf::io
