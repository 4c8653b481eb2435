#pragma once
// Files of the validation: exhaustive measurements in (serf-exhaustive/1, from `serf profile
// --exhaustive`), the report out (serf-validation/1 JSON and a CSV with one row per point and
// model).

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/validation.h"

namespace serf::profiler {

inline constexpr const char* kExhaustiveFormat = "serf-exhaustive/1";
inline constexpr const char* kValidationFormat = "serf-validation/1";

struct MeasuredSet {
  std::string model;
  bool has_hardware = false;  // files written before the field existed lack it
  Hardware hardware;
  std::vector<MeasuredPoint> points;
  double total_wall_s = -1;  // what the whole measurement cost (< 0: unknown)
};

// `source` names the document in errors (the file name).
StatusOr<MeasuredSet> measured_from_json(const nlohmann::json& doc, const std::string& source);
StatusOr<MeasuredSet> load_measured(const std::string& path);

struct ValidationInputs {
  std::string profile_path;
  std::vector<std::string> measured_paths;
  std::string model;
};

// A point's request trace ({"warmup", "arrival_ms", "unit", "latency_ms"}; times to 1 us).
nlohmann::json trace_json(const RequestTrace& trace);
// A point's fresh tuples ([{"service", "inter", "intra", "batch", "mean_ms", "scv", "samples"}]).
nlohmann::json fresh_tuples_json(const std::vector<TupleStats>& fresh);

nlohmann::json validation_json(const ValidationReport& report, const ValidationInputs& inputs);
std::string validation_csv(const ValidationReport& report);
// The report as text tables: the mean latency's relative errors per queue model (with the
// planner's picks), then the steady, rescaled, sample-path and p99 variants, the measurement's
// CI, and the points skipped as unstable.
void print_validation_tables(std::FILE* out, const ValidationReport& report);
// The measured points' verdicts: how many of `judged` were VALID, and each INVALID one, left out
// of the comparison or (`compared`, --include-invalid) in it.
void print_invalid_points(std::FILE* out, int judged, const std::vector<MeasuredPoint>& invalid,
                          bool compared);

}  // namespace serf::profiler
