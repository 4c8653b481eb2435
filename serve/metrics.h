#pragma once
// What an operator scrapes: counters by outcome, histograms of request, queue, compute and
// front-end seconds, queue depth, the running configuration, switches, the arrival rate, and the
// queue model's predicted mean latency at the observed rate next to the observed rolling mean
// (Prometheus text exposition format), and Triton's statistics extension (JSON).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serf/core/planner.h"
#include "serf/core/profile.h"
#include "serf/core/tail_objective.h"
#include "serve/calibration.h"
#include "serve/controller.h"
#include "serve/model_info.h"
#include "serve/switch_cost.h"

namespace serf::serve {

// Cumulative histogram with fixed upper bounds (seconds, or requests per batch), as Prometheus
// exposes it.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The family's # HELP, # TYPE, _bucket{le=...}, _sum and _count lines.
  void write(const std::string& name, const std::string& help, std::string* out) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; the last is +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

// The model's mean latency of a configuration at a cluster arrival rate: from the profile's
// tuples through the queue model when there is a profile, else from the table entry the rate
// falls in when that entry names the configuration. The p99 is the planner's tail approximation
// (serf/core/tail_latency.h, Poisson arrivals, the profiled service SCV), so it needs a profile.
class LatencyPredictor {
 public:
  LatencyPredictor() = default;
  LatencyPredictor(std::shared_ptr<const Profile> profile,
                   std::shared_ptr<const ConfigurationTable> table, int nodes, QueueKind queue);
  // nullopt: no prediction (nothing to predict from, or unstable at that rate).
  std::optional<double> mean_ms(const Configuration& config, double rate_per_s) const;
  std::optional<double> p99_ms(const Configuration& config, double rate_per_s) const;

 private:
  std::shared_ptr<const Profile> profile_;
  std::shared_ptr<const LatencyObjective> p99_;  // reads *profile_
  std::shared_ptr<const ConfigurationTable> table_;
  int nodes_ = 0;
  QueueKind queue_ = kDefaultQueue;
};

// One consistent reading of the metrics for the status page (GET /).
struct StatusSnapshot {
  LiveStatus live;
  std::string model;
  uint64_t received = 0, answered = 0, rejected = 0, timed_out = 0, failed = 0;  // since start
  double window_s = 0;
  double rate_per_s = 0;  // requests ended per second over the window (as /metrics)
  uint64_t window_answered = 0;
  std::optional<double> observed_mean_ms, observed_p99_ms, predicted_mean_ms, predicted_p99_ms;
  std::vector<SwitchRecord> switches;  // the most recent, oldest first (drain times unknown: 0)
  uint64_t recalibrations_total = 0;
  std::vector<Recalibration> recalibrations;  // the most recent, oldest first
  struct Bin {
    double rate_per_s = 0;
    std::optional<double> mean_ms;
  };
  double bin_s = 0;
  std::vector<Bin> history;  // the last minutes in bins of bin_s, oldest first
};

class ServeMetrics {
 public:
  static constexpr size_t kRecentEvents = 10;  // switches and recalibrations on the page
  static constexpr int kHistoryS = 300;        // the page's sparkline span
  static constexpr int kHistoryBinS = 5;
  static constexpr size_t kLatencySamples = 1 << 15;  // the window's p99 rests on at most these

  // `window_s`: the span of the observed rolling mean and of the rate it is predicted at.
  explicit ServeMetrics(LatencyPredictor predictor = {}, double window_s = 30);
  // Every request as it ends (the controller's answer hook).
  void record(const RequestRecord& r);
  void count_invalid(const std::string& protocol);  // "http", "grpc": 400 / INVALID_ARGUMENT
  void count_refused_connection();                  // too many connections
  // An HTTP request not whole within --read-timeout (408), by the part that was late: "head"
  // (request line and headers) or "body"; a connection closed for sending nothing.
  void count_read_timeout(const std::string& part);
  void count_silent_connection();
  // A gRPC ModelInfer call that ended before its message came whole (its connection closed at
  // --grpc-max-connection-age plus --read-timeout, or its client cancelled).
  void count_grpc_cut_call();
  // The gate that declines switches costing more than they gain (serf_switches_declined_total,
  // serf_switch_cost_seconds); none: both read 0 and NaN.
  void set_switch_gate(std::shared_ptr<const SwitchGate> gate);
  // Self-calibration: the predictions follow the recalibrated profile; one more recalibration.
  void set_predictor(LatencyPredictor predictor);
  void count_recalibration(const Recalibration& r);
  // The front end's own time for one answered request (receive to hand-over, answer to send).
  void observe_frontend(double seconds);

  std::string prometheus_text(const LiveStatus& live) const;
  nlohmann::json triton_stats(const ModelInfo& model) const;
  // Over the window: requests ended per second and the mean latency of the answered ones (s).
  double window_rate_per_s() const;
  std::optional<double> window_mean_s() const;
  // What GET / shows; `live` is the controller's status read by the caller.
  StatusSnapshot snapshot(const LiveStatus& live) const;

 private:
  struct Second {
    int64_t at = -1;  // whole seconds since start
    uint64_t ended = 0, answered = 0;
    double latency_sum_s = 0;
  };
  double now_s() const;
  Second& bucket(double at_s);
  double window_span_s() const;
  void totals(uint64_t* ended, uint64_t* answered, double* latency_sum_s) const;
  // The p99 (serf::quantile) of the answers over the window and how many there were; under mutex_.
  std::optional<double> window_p99_s(size_t* answers) const;
  void write_configuration(const LiveStatus& live, std::string* out) const;
  // prometheus_text's parts, under mutex_: the counters, the histograms, and the window's
  // observed latency beside the model's prediction at the window's rate.
  struct Prediction {
    double rate_per_s = 0;
    std::optional<double> observed_mean_s, observed_p99_s, predicted_mean_ms, predicted_p99_ms;
  };
  void write_counters(std::string* out) const;
  void write_histograms(std::string* out) const;
  void write_latency_gauges(const Prediction& p, std::string* out) const;
  void note_generation(const RequestRecord& r);
  template <typename T>
  static void keep_recent(std::vector<T>* log, const T& event) {
    log->push_back(event);
    if (log->size() > kRecentEvents) log->erase(log->begin());
  }

  LatencyPredictor predictor_;
  std::shared_ptr<const SwitchGate> switch_gate_;
  double window_s_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::map<Outcome, uint64_t> outcomes_;
  std::map<std::string, uint64_t> invalid_;
  uint64_t refused_connections_ = 0;
  std::map<std::string, uint64_t> read_timeouts_;  // by part: "head", "body"
  uint64_t silent_connections_ = 0;
  uint64_t grpc_cut_calls_ = 0;
  uint64_t recalibrations_ = 0;
  Histogram request_s_, queue_s_, compute_s_, frontend_s_;
  Histogram batch_size_;             // once per batch served: its requests
  double failed_latency_sum_s_ = 0;  // time to the end of requests not answered
  double last_answer_epoch_ms_ = 0;
  std::vector<Second> seconds_;  // ring over the window (and the page's history, if longer)
  // Answered requests' (end time, latency) for the window's p99; a ring, newest at latency_next_.
  std::vector<std::pair<double, double>> latencies_;
  size_t latency_next_ = 0;
  // Switches seen from the answers (a new generation in another configuration).
  int last_generation_ = -1;
  Configuration last_config_;
  std::vector<SwitchRecord> switches_;
  std::vector<Recalibration> recalibration_log_;
};

}  // namespace serf::serve
