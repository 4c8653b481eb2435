#pragma once
// The configuration reference table ("serf-table/1", ARCHITECTURE.md) as JSON, with CSV beside it.
// Unstable load levels have "stable": false and null configuration and latency.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serf/core/planner.h"

namespace serf::io {

inline constexpr const char* kTableFormat = "serf-table/1";

// {"stable", "latency_ms", "wait_ms", "service_ms", "utilization"}; numbers null when unstable.
nlohmann::json prediction_to_json(const Prediction& p);

nlohmann::json table_to_json(const ConfigurationTable& table);
// `source` names the document in errors. Reads entries (and "all" when present).
StatusOr<ConfigurationTable> table_from_json(const nlohmann::json& doc, const std::string& source);

// One row per load level:
// rate_per_s,stable,service,inter,intra,batch,units,unit_rate_per_s,latency_ms,...
std::string table_to_csv(const ConfigurationTable& table);
// Every configuration at every rate (long format), when the table kept them; "" otherwise.
std::string all_predictions_to_csv(const ConfigurationTable& table);

// The CSV paths written beside a table file: X.json -> X.csv (and X.all.csv with predictions).
std::string csv_path_for(const std::string& table_path, const std::string& suffix = ".csv");

// Writes the JSON and the CSV(s); returns the paths written.
StatusOr<std::vector<std::string>> save_table(const ConfigurationTable& table,
                                              const std::string& path);
StatusOr<ConfigurationTable> load_table(const std::string& path);

}  // namespace serf::io
