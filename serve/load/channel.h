#pragma once
// How the load client talks to a server: a channel sends request `id` the moment it is asked to
// (or as soon as a connection is free) and reports each request's end. The runner (load_client.h)
// owns the schedule and the clock; a channel owns sockets or calls. One thread drives a channel:
// send() and poll() are never called at once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace serf::serve::load {

using Clock = std::chrono::steady_clock;

// A request's end beside the HTTP status codes (gRPC codes are mapped to the HTTP status KServe
// pairs them with: OK 200, INVALID_ARGUMENT 400, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, ...).
inline constexpr int kStatusError = -1;    // no answer: connection refused or reset, a bad response
inline constexpr int kStatusTimeout = -2;  // no answer within the client's timeout

struct Completion {
  uint64_t id = 0;
  int status = 0;          // HTTP status, kStatusError or kStatusTimeout
  Clock::time_point sent;  // when its first byte left (or the call started)
  Clock::time_point done;  // when its answer was read whole (or it failed)
  std::string_view body;   // the answer's body (HTTP; valid during the callback only)
  std::string_view error;  // what went wrong (errors, timeouts, non-2xx gRPC messages)
};

using CompletionFn = std::function<void(const Completion&)>;

class LoadChannel {
 public:
  virtual ~LoadChannel() = default;
  // Sends request `id` now, or as soon as a connection is free (its `sent` says when).
  virtual void send(uint64_t id) = 0;
  // Waits until `until` or until requests end, calling `done` for each that ended.
  virtual void poll(Clock::time_point until, const CompletionFn& done) = 0;
  // Requests asked for and not ended (waiting for a connection included).
  virtual size_t in_flight() const = 0;
  // Requests waiting for a free connection (sent later than asked).
  virtual size_t waiting() const = 0;
  // Connections open now.
  virtual size_t connections() const = 0;
};

}  // namespace serf::serve::load
