#pragma once
// The controller's request inbox: front-end threads push requests, the controller's thread takes
// them all at once. The controller sleeps on it between events, so a new request wakes it at once
// instead of waiting out a poll interval.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "serve/request.h"

namespace serf::serve {

class RequestInbox {
 public:
  // False when the inbox is closed (the server is stopping): the caller answers the request itself
  // (it is left unmoved, its callback still the caller's).
  bool push(InferRequest&& request);
  // Moves every waiting request to the end of `out`, in arrival order; returns how many.
  size_t take_all(std::vector<InferRequest>* out);
  // Sleeps until a request is pushed, wake() is called, or `timeout_s` passed.
  void wait(double timeout_s);
  // Ends a wait() now (a stop was asked from another thread).
  void wake();
  // Refuses every later push; returns the requests still waiting, for the caller to answer.
  std::vector<InferRequest> close();
  // Accepts pushes again (a new run of the same controller).
  void reopen();
  bool closed() const;
  size_t size() const;
  // Pushes refused because the inbox was closed (received and rejected at the door).
  uint64_t refused() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<InferRequest> waiting_;
  bool closed_ = false;
  bool woken_ = false;
  uint64_t refused_ = 0;
};

}  // namespace serf::serve
