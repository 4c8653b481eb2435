#pragma once
// Fake nodes whose requests take a time the test chooses, for the controller's timing cases: one
// unit; each request sent is answered once its cost has passed (several may run at once).
// WakingTransport: a slot that pays a known wake-up when it has been idle (the open-loop
// penalties the idle probe measures, tests/profiler, and self-calibration takes off its
// observations, tests/serve/calibration_test.cc).

#include <chrono>
#include <optional>
#include <vector>

#include "serve/controller.h"

namespace serf::serve {

class TimedTransport : public Transport {
 public:
  int nodes() const override { return 1; }
  Status configure(const Configuration&) override { return Status::Ok(); }
  Status send_run(int, const RunAction& a, const std::vector<float>&) override {
    const auto now = clock::now();
    running_.push_back({a, now, cost_s(now)});
    return Status::Ok();
  }
  StatusOr<std::optional<RunResult>> poll_result() override {
    const auto now = clock::now();
    for (size_t k = 0; k < running_.size(); ++k) {
      if (seconds(now - running_[k].at) < running_[k].cost_s) continue;
      RunResult r;
      r.request_id = running_[k].action.request_id;
      r.slot = running_[k].action.slot;
      r.service_ms = running_[k].cost_s * 1e3;
      running_.erase(running_.begin() + static_cast<long>(k));
      last_done_ = now;
      return std::optional<RunResult>(r);
    }
    return std::optional<RunResult>();
  }
  Status probe(int, double) override { return Status::Ok(); }
  Status shutdown() override { return Status::Ok(); }

 protected:
  using clock = std::chrono::steady_clock;
  static double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }
  // What the request sent at `now` costs (s).
  virtual double cost_s(clock::time_point now) = 0;
  std::optional<clock::time_point> last_done_;  // the last answer, if any

 private:
  struct Running {
    RunAction action;
    clock::time_point at;
    double cost_s;
  };
  std::vector<Running> running_;
};

// One slot at a time; a request costs service_s, plus wake_s when its slot was idle for more than
// idle_after_s since its last answer (or never ran), and busy_s when it is the next one sent after
// such a woken request (the ones after run at full speed, as a closed loop's do): the two
// penalties the probe is for.
class WakingTransport : public TimedTransport {
 public:
  WakingTransport(double service_s, double wake_s, double idle_after_s, double busy_s)
      : service_s_(service_s), wake_s_(wake_s), idle_after_s_(idle_after_s), busy_s_(busy_s) {}

 protected:
  double cost_s(clock::time_point now) override {
    const bool woken = !last_done_ || seconds(now - *last_done_) > idle_after_s_;
    // The request sent right after a woken one (by order, not by time: a loaded host delays the
    // controller's dispatch, and the fake's penalties must not depend on it).
    const bool after_wake = !woken && last_woken_;
    last_woken_ = woken;
    return service_s_ + (woken ? wake_s_ : after_wake ? busy_s_ : 0);
  }

 private:
  double service_s_, wake_s_, idle_after_s_, busy_s_;
  bool last_woken_ = false;  // the last request sent paid the wake-up
};

}  // namespace serf::serve
