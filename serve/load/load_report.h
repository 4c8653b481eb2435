#pragma once
// What `serf load` says about a run: counts by status, the latency of the answered requests from
// their scheduled time and the client's lateness (quantiles of serf/core/statistics.h), the
// progress line, and the run's files (RUN.json with the summary and a per-second timeline,
// RUN.json.csv with one row per request).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "serf/core/status.h"
#include "serve/load/load_client.h"

namespace serf::serve::load {

struct LatencySummary {
  uint64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
};

struct LoadSummary {
  uint64_t scheduled = 0;  // requests the run asked for (sent or not)
  uint64_t sent = 0, ended = 0, answered = 0;
  std::map<int, uint64_t> counts;  // by status (200, 400, 503, 504, kStatusError, ...)
  double span_s = 0;               // of the schedule: the duration, or the last scheduled time
  double offered_per_s = 0;        // scheduled / span
  double throughput_per_s = 0;     // answered / the time the last request ended
  LatencySummary latency;          // answered requests, from their scheduled time
  LatencySummary lateness;         // sent requests: sent - scheduled
};

LoadSummary summarize(const LoadRun& run);

// "200", "503", "errors", "timeouts".
std::string status_name(int status);
// The lines `serf load` prints after a run.
std::string summary_text(const LoadRun& run, const LoadSummary& summary);
// The line printed while it runs.
std::string progress_text(const LoadProgress& p);

// The run as JSON: options, the served model, the summary, first error messages and a timeline
// of one-second bins by scheduled time (offered, answered, rejected, mean and p99 latency).
nlohmann::json run_json(const LoadRun& run, const LoadSummary& summary);
// Writes run_json (with the keys of `extra` added, e.g. the CLI's precision verdict) to `path`
// and the requests to `path`.csv.
Status write_run(const std::string& path, const LoadRun& run, const LoadSummary& summary,
                 const nlohmann::json& extra = nlohmann::json::object());

}  // namespace serf::serve::load
