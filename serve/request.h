#pragma once
// One inference request as the controller sees it, whoever sent it (a client of a front end or the
// built-in generator), and the answer it gets back. Plain data and a callback: no protocol here.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serf/core/planner.h"
#include "serve/messages.h"

namespace serf::serve {

using SteadyTime = std::chrono::steady_clock::time_point;

// The longest request timeout, in microseconds (31.7 years): the steady clock counts nanoseconds in
// 64 bits (292 years), so a longer one would overflow the deadline.
inline constexpr double kMaxTimeoutUs = 1e15;

// How a request ended. Every request the controller receives ends in exactly one of these, so
// received = answered + rejected + timed out + failed.
enum class Outcome {
  kAnswered,  // the nodes computed it
  kRejected,  // not admitted: its unit's queue was full, or the server was stopping (503)
  kTimedOut,  // still queued when its deadline passed (504), or its client went away meanwhile
              // (or before its input arrived whole: InferRequest::ended)
  kFailed,    // admitted but not answered: a node reported an error, or the run ended on a fault
};
const char* outcome_name(Outcome outcome);  // "answered", "rejected", "timed_out", "failed"

struct InferAnswer {
  Outcome outcome = Outcome::kFailed;
  std::string reason;               // why it was not answered (empty when answered)
  std::vector<float> output;        // the request's output tensor as the unit leader sent it
  std::vector<LayerTiming> layers;  // per-layer times on the unit leader (real nodes)
  double queue_s = 0;               // arrival to dispatch
  double compute_s = 0;             // dispatch to answer (the slot's occupancy)
  double total_s = 0;               // arrival to answer
  Configuration config;             // the configuration that served it (answered only)
};

// Called once per request by the controller's thread: keep it short (hand the answer over to the
// thread that waits for it).
using Completion = std::function<void(InferAnswer&&)>;

struct InferRequest {
  // FP32 input of the model's input shape. Shared, so the generator sends one tensor many times.
  std::shared_ptr<const std::vector<float>> input;
  SteadyTime arrival{};                // latency counts from here (a generated request: scheduled)
  std::optional<SteadyTime> deadline;  // still queued then: answered kTimedOut
  Completion done;                     // empty: nobody waits (generated load)
  // Asked on the controller's thread while the request is queued (never after `done`): true when
  // its client went away (a gRPC call cancelled or past its deadline, an HTTP connection closed).
  // It is then dropped before dispatch, not computed, and ends kTimedOut. Empty: never.
  std::function<bool()> cancelled;
  // Not empty: the request ended before its input arrived whole (a gRPC call whose message never
  // came: its connection closed, or its client cancelled), for this reason. It is counted
  // received and timed out, and never queued.
  std::string ended;
};

}  // namespace serf::serve
