#pragma once
// `serf load`: an open-loop load generator for a KServe v2 server. Each request is sent at its
// scheduled time from the project's arrival processes (serf/core/arrivals.h), never waiting for an
// earlier answer; its latency counts from the scheduled time, so a server (or a client) that falls
// behind cannot hide the queueing it causes (no coordinated omission), and the client's own
// lateness (sent - scheduled) is measured beside it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "serf/core/arrivals.h"
#include "serf/core/status.h"
#include "serve/load/channel.h"

namespace serf::serve::load {

enum class Protocol { kHttp, kGrpc };

// A rate that changes over time: `rate_per_s` from `from_s` on (the first from 0 s).
struct LoadStep {
  double from_s = 0;
  double rate_per_s = 0;
};

struct LoadOptions {
  std::string url;  // http://HOST:PORT (gRPC: HOST:PORT)
  std::string model;
  std::vector<LoadStep> load;  // ascending from 0 s; the last step lasts until the end
  ArrivalKind arrivals = ArrivalKind::kPoisson;
  double arrival_scv = 1.0;
  int64_t requests = 0;   // > 0: send this many
  double duration_s = 0;  // > 0: send those scheduled before this time (both: whichever first)
  std::string input;      // safetensors file with tensor "input"; empty: the seeded input
  Protocol protocol = Protocol::kHttp;
  bool binary = false;       // HTTP: Triton's binary tensor extension (gRPC: raw_input_contents)
  int connections = 64;      // HTTP: open at once; gRPC: channels the calls are spread over
  double timeout_s = 30;     // a request without an answer this long after it was sent times out
  uint64_t seed = 1;         // arrivals and the seeded input
  double ready_wait_s = 10;  // how long to wait for the model to be ready before the run
};

// One request of a run. Times in seconds from the run's start (time 0 of the schedule).
struct LoadRecord {
  double scheduled_s = 0;
  double sent_s = -1;  // -1: not sent (the run was stopped first)
  double done_s = -1;  // -1: not ended
  int status = 0;      // HTTP status, kStatusError, kStatusTimeout; 0: not ended
  double latency_ms() const { return (done_s - scheduled_s) * 1e3; }
  double lateness_ms() const { return (sent_s - scheduled_s) * 1e3; }
};

// What the server said about the model (KServe v2 model metadata).
struct ServedModel {
  std::string name, platform;
  std::string input, input_datatype;
  std::vector<int64_t> input_shape;  // as sent: the server's shape, -1 replaced
  std::string output;
};

struct LoadRun {
  LoadOptions options;
  ServedModel model;
  std::vector<LoadRecord> records;          // by request id
  std::map<int, std::string> first_errors;  // status (non-200) -> the first answer's message
  double end_s = 0;                         // the last request ended
  bool interrupted = false;                 // stopped early (SIGINT or the stop rule)
  std::string stop_reason;
};

// What the runner reports while it runs (every `every_s`), over the requests that ended since the
// last report and over the whole run so far.
struct LoadProgress {
  double now_s = 0;
  uint64_t sent = 0, ended = 0, answered = 0, in_flight = 0, waiting = 0, connections = 0;
  uint64_t window_ended = 0;
  double window_s = 0;
  double window_mean_ms = 0, window_p99_ms = 0, window_lateness_p99_ms = 0;
  std::map<int, uint64_t> counts;  // by status, so far
};

struct LoadHooks {
  double every_s = 0;  // 0: no progress reports
  std::function<void(const LoadProgress&)> progress;
  // Asked at every report: true stops sending (requests in flight still end). Issue 17's
  // precision rule (stop a point once its mean is precise enough) plugs in here.
  std::function<bool(const LoadRun& so_far, std::string* reason)> stop;
  const std::atomic<bool>* interrupted = nullptr;  // set by SIGINT: stop sending
};

// Checks the options (InvalidArgument naming the flag), reaches the server (an unreachable server,
// an unknown model or one not ready within ready_wait_s is InvalidArgument naming --url/--model),
// then runs the schedule.
StatusOr<LoadRun> run_load(const LoadOptions& options, const LoadHooks& hooks);

// The open loop itself, over any channel (tests drive it with their own); checks the options.
StatusOr<LoadRun> run_schedule(LoadChannel& channel, const LoadOptions& options,
                               const LoadHooks& hooks);

}  // namespace serf::serve::load
