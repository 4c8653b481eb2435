#pragma once
// serve() on its own thread, as rank 0's main thread runs it while front ends take requests.
#include <thread>
#include <utility>

#include "serve/controller.h"

namespace serf::serve::testing {

class Serving {
 public:
  explicit Serving(Controller& c, SchedulerHook hook = nullptr) : c_(c), hook_(std::move(hook)) {
    thread_ = std::thread([this] { status_ = c_.serve(hook_); });
  }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
  Status stop() {
    c_.request_stop();
    thread_.join();
    return status_;
  }
  ~Serving() {  // a test that already failed: its serving status no longer matters
    if (thread_.joinable()) static_cast<void>(stop());
  }

 private:
  Controller& c_;
  SchedulerHook hook_;
  Status status_;
  std::thread thread_;
};

}  // namespace serf::serve::testing
