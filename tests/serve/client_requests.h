#pragma once
// A client's side of the controller in the serve tests: a request pushed to the inbox, its answer
// in a future.
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "serve/controller.h"

namespace serf::serve::testing {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A client request with `input` (and a deadline `timeout_s` after its arrival); its answer lands
// in the returned future. An inbox that refuses it (stopped) answers kRejected at once.
inline std::future<InferAnswer> submit(Controller& c, std::vector<float> input,
                                       std::optional<double> timeout_s = std::nullopt) {
  using Clock = std::chrono::steady_clock;
  auto promise = std::make_shared<std::promise<InferAnswer>>();
  InferRequest r;
  r.input = std::make_shared<const std::vector<float>>(std::move(input));
  r.arrival = Clock::now();
  if (timeout_s) {
    r.deadline = r.arrival + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(*timeout_s));
  }
  r.done = [promise](InferAnswer&& a) { promise->set_value(std::move(a)); };
  auto f = promise->get_future();
  if (!c.inbox().push(std::move(r))) {
    std::promise<InferAnswer> refused;
    InferAnswer a;
    a.outcome = Outcome::kRejected;
    refused.set_value(a);
    return refused.get_future();
  }
  return f;
}

}  // namespace serf::serve::testing
