#pragma once
// Nodes without MPI for the controller's tests: each request is answered after a fixed time with
// an output derived from its own input (each value + 1), so a test sees whose answer it got (a
// batch's rows follow one another in its input, so in its output too).

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "serve/controller.h"

namespace serf::serve {

class FakeTransport : public Transport {
 public:
  explicit FakeTransport(int nodes, double service_s = 2e-3)
      : nodes_(nodes), service_s_(service_s) {}
  int nodes() const override { return nodes_; }
  Status configure(const Configuration& c) override {
    if (!running_.empty()) return Internal("configure with requests in flight");
    if (configure_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(configure_s));
    configs.push_back(c);
    return Status::Ok();
  }
  Status send_run(int unit, const RunAction& a, const std::vector<float>& input) override {
    if (unit < 0 || unit >= nodes_ / configs.back().inter) return Internal("bad unit");
    if (static_cast<size_t>(a.payload_floats) != input.size()) return Internal("payload size");
    for (const auto& r : running_) {
      if (r.unit == unit && r.action.slot == a.slot) return Internal("slot already busy");
    }
    if (hang_after >= 0 && sent >= hang_after) {
      ++sent;
      return Status::Ok();  // swallowed: never answered
    }
    ++sent;
    rows_sent.push_back(a.rows);
    max_running_seen[unit] = std::max(max_running_seen[unit], a.running);
    running_.push_back({unit, a, clock::now(), input});
    return Status::Ok();
  }
  StatusOr<std::optional<RunResult>> poll_result() override {
    for (size_t i = 0; i < running_.size(); ++i) {
      if (std::chrono::duration<double>(clock::now() - running_[i].at).count() >= service_s_) {
        RunResult r;
        r.request_id = running_[i].action.request_id;
        r.slot = running_[i].action.slot;
        r.service_ms = service_s_ * 1e3;
        output_ = running_[i].input;
        for (float& x : output_) x += 1.0f;
        r.payload_floats = static_cast<int32_t>(output_.size());
        if (fail_id == r.request_id) {
          r.ok = 0;
          r.set_message("fake failure");
        }
        answered[r.request_id]++;
        running_.erase(running_.begin() + static_cast<long>(i));
        return std::optional<RunResult>(r);
      }
    }
    return std::optional<RunResult>();
  }
  std::vector<float> take_output() override { return std::move(output_); }
  bool job_torn_down(double) override { return torn_down; }
  // A unit is alive unless `dead_unit` names it; a dead unit's probe waits its whole window.
  Status probe(int unit, double within_s) override {
    probes.push_back(unit);
    probe_windows_s.push_back(within_s);
    if (unit != dead_unit) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::duration<double>(within_s));
    return Unavailable("unit " + std::to_string(unit) + " is fake and silent");
  }
  std::string diagnose_terminated() override { return "node rank 9 died (fake)"; }
  Status shutdown() override { return Status::Ok(); }

  std::vector<Configuration> configs;
  double configure_s = 0;  // how long configure() takes (a switch that costs)
  Preparation preparation = Preparation::kUnknown;  // what the fake nodes say they did
  Preparation last_preparation() const override { return preparation; }
  std::map<int64_t, int> answered;
  std::map<int, int> max_running_seen;
  std::vector<int> rows_sent;  // each action's rows (requests in its batch), in order
  int hang_after = -1;
  int dead_unit = -1;  // probe() finds this unit silent
  std::vector<int> probes;
  std::vector<double> probe_windows_s;
  int sent = 0;
  int64_t fail_id = -1;    // this request's result reports an error
  bool torn_down = false;  // job_torn_down's answer

 private:
  using clock = std::chrono::steady_clock;
  struct Running {
    int unit;
    RunAction action;
    clock::time_point at;
    std::vector<float> input;
  };
  int nodes_;
  double service_s_;
  std::vector<Running> running_;
  std::vector<float> output_;
};

// Waits (at most 10 s) until `n` requests are queued or running, as the controller publishes it
// (every tick): a test's requests sent from other threads have arrived.
inline bool wait_received(const Controller& c, size_t n) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    const LiveStatus live = c.live();
    if (live.in_flight + live.queued >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Waits (at most 10 s) until the controller says it is not ready (a stop began).
inline bool wait_not_ready(const Controller& c) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (!c.live().ready) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// A front end's server `s` (its controller, its FakeTransport and stop()) took two requests: one
// answered, and one whose client went away while it was queued. Waits up to 5 s for the drop, stops
// the server, and checks that the second was counted as timed out (the client stopped waiting
// before dispatch, as a timeout) and never reached a node.
template <typename Server>
void check_dropped_before_dispatch(Server& s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.controller.live().counts.timed_out == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.stop();
  const OutcomeCounts n = s.controller.counts();
  REQUIRE(n.balanced());
  REQUIRE(n.received == 2);
  REQUIRE(n.answered == 1);
  REQUIRE(n.timed_out == 1);
  REQUIRE(s.transport.sent == 1);
}

}  // namespace serf::serve
