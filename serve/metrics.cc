#include "serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "serf/core/statistics.h"

namespace serf::serve {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void family(const std::string& name, const char* type, const std::string& help, std::string* out) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(const std::string& name, double value, std::string* out,
            const std::string& labels = "") {
  *out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + number(value) + "\n";
}

void gauge(const std::string& name, const std::string& help, double value, std::string* out) {
  family(name, "gauge", help, out);
  sample(name, value, out);
}

// Bounds in seconds: 100 us to 10 s for requests, 5 us to 50 ms for the front end.
const std::vector<double> kRequestBounds = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
                                            0.05, 0.1,    0.25, 0.5,  1,      2.5,  5,    10};
// Requests per batch a slot served (b is at most kMaxBatch; the planner searches 1..32).
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128};
const std::vector<double> kFrontendBounds = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                             5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.05};

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::write(const std::string& name, const std::string& help, std::string* out) const {
  family(name, "histogram", help, out);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    sample(name + "_bucket", static_cast<double>(cumulative), out, "le=\"" + number(le) + "\"");
  }
  sample(name + "_sum", sum_, out);
  sample(name + "_count", static_cast<double>(count_), out);
}

LatencyPredictor::LatencyPredictor(std::shared_ptr<const Profile> profile,
                                   std::shared_ptr<const ConfigurationTable> table, int nodes,
                                   QueueKind queue)
    : profile_(std::move(profile)), table_(std::move(table)), nodes_(nodes), queue_(queue) {
  if (!profile_) return;
  LatencyObjectiveOptions o;
  o.percentile = 99;
  o.nodes = nodes_;
  auto objective = LatencyObjective::Create(*profile_, o);
  if (objective.ok()) p99_ = std::move(objective).value();
}

std::optional<double> LatencyPredictor::p99_ms(const Configuration& config,
                                               double rate_per_s) const {
  if (!(rate_per_s > 0) || config.inter < 1 || !profile_ || !p99_) return std::nullopt;
  auto p =
      predict_configuration(*profile_, config, nodes_, rate_per_s, queue_, p99_.get(), nullptr);
  if (!p.ok() || !p->scored || !std::isfinite(p->score_ms)) return std::nullopt;
  return p->score_ms;
}

std::optional<double> LatencyPredictor::mean_ms(const Configuration& config,
                                                double rate_per_s) const {
  if (!(rate_per_s > 0) || config.inter < 1) return std::nullopt;
  if (profile_) {
    auto model = model_for(*profile_, config, nodes_, queue_);
    const int units = units_for(nodes_, config.inter);
    if (!model.ok() || units < 1) return std::nullopt;
    const Prediction p = model->predict(config.service, rate_per_s / units);
    return p.stable ? std::optional<double>(p.latency_ms) : std::nullopt;
  }
  if (table_) {
    ConfigurationTable::Lookup hit = table_->lookup(rate_per_s);
    if (hit.entry == nullptr || hit.beyond_table || !hit.entry->stable ||
        !(hit.entry->config == config)) {
      return std::nullopt;
    }
    return hit.entry->prediction.latency_ms;
  }
  return std::nullopt;
}

ServeMetrics::ServeMetrics(LatencyPredictor predictor, double window_s)
    : predictor_(std::move(predictor)),
      window_s_(std::max(window_s, 1.0)),
      start_(std::chrono::steady_clock::now()),
      request_s_(kRequestBounds),
      queue_s_(kRequestBounds),
      compute_s_(kRequestBounds),
      frontend_s_(kFrontendBounds),
      batch_size_(kBatchBounds),
      seconds_(static_cast<size_t>(std::max(std::ceil(window_s_), double{kHistoryS})) + 1) {}

double ServeMetrics::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

ServeMetrics::Second& ServeMetrics::bucket(double at_s) {
  const auto at = static_cast<int64_t>(at_s);
  Second& b = seconds_[static_cast<size_t>(at) % seconds_.size()];
  if (b.at != at) b = Second{at};
  return b;
}

void ServeMetrics::record(const RequestRecord& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++outcomes_[r.outcome];
  // Once per batch a slot computed (its first row), whether or not it was answered.
  if (r.dispatch_s > 0 && r.batch_row == 0) batch_size_.observe(r.batch);
  note_generation(r);
  Second& b = bucket(now_s());
  ++b.ended;
  if (!r.answered) {
    failed_latency_sum_s_ += std::max(r.done_s - r.arrival_s, 0.0);
    return;
  }
  const double total = r.done_s - r.arrival_s;
  request_s_.observe(total);
  queue_s_.observe(r.dispatch_s - r.arrival_s);
  compute_s_.observe(r.done_s - r.dispatch_s);
  ++b.answered;
  b.latency_sum_s += total;
  const std::pair<double, double> sample{now_s(), total};
  if (latencies_.size() < kLatencySamples) {
    latencies_.push_back(sample);
  } else {
    latencies_[latency_next_] = sample;
  }
  latency_next_ = (latency_next_ + 1) % kLatencySamples;
  last_answer_epoch_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch())
          .count();
}

void ServeMetrics::count_invalid(const std::string& protocol) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++invalid_[protocol];
}

void ServeMetrics::count_refused_connection() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++refused_connections_;
}

void ServeMetrics::count_read_timeout(const std::string& part) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++read_timeouts_[part];
}

void ServeMetrics::count_silent_connection() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++silent_connections_;
}

void ServeMetrics::count_grpc_cut_call() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++grpc_cut_calls_;
}

void ServeMetrics::observe_frontend(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  frontend_s_.observe(seconds);
}

double ServeMetrics::window_span_s() const { return std::min(window_s_, std::max(now_s(), 1e-3)); }

void ServeMetrics::totals(uint64_t* ended, uint64_t* answered, double* latency_sum_s) const {
  const double now = now_s();
  *ended = *answered = 0;
  *latency_sum_s = 0;
  for (const Second& b : seconds_) {
    if (b.at < 0 || static_cast<double>(b.at) <= now - window_s_ - 1) continue;
    *ended += b.ended;
    *answered += b.answered;
    *latency_sum_s += b.latency_sum_s;
  }
}

double ServeMetrics::window_rate_per_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t ended = 0, answered = 0;
  double sum = 0;
  totals(&ended, &answered, &sum);
  return static_cast<double>(ended) / window_span_s();
}

std::optional<double> ServeMetrics::window_mean_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t ended = 0, answered = 0;
  double sum = 0;
  totals(&ended, &answered, &sum);
  if (answered == 0) return std::nullopt;
  return sum / static_cast<double>(answered);
}

void ServeMetrics::set_switch_gate(std::shared_ptr<const SwitchGate> gate) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch_gate_ = std::move(gate);
}

void ServeMetrics::set_predictor(LatencyPredictor predictor) {
  std::lock_guard<std::mutex> lock(mutex_);
  predictor_ = std::move(predictor);
}

void ServeMetrics::count_recalibration(const Recalibration& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++recalibrations_;
  keep_recent(&recalibration_log_, r);
}

void ServeMetrics::note_generation(const RequestRecord& r) {
  // The controller's switch log is its own thread's; a request dispatched in a newer generation
  // in another configuration shows the switch (at its dispatch, on the controller's clock).
  if (r.dispatch_s <= 0 || r.generation <= last_generation_) return;
  if (last_generation_ >= 0 && r.config != last_config_) {
    SwitchRecord s;
    s.at_s = r.dispatch_s;
    s.from = last_config_;
    s.to = r.config;
    keep_recent(&switches_, s);
  }
  last_generation_ = r.generation;
  last_config_ = r.config;
}

std::optional<double> ServeMetrics::window_p99_s(size_t* answers) const {
  const double now = now_s();
  std::vector<double> window;
  for (const auto& [at, latency] : latencies_) {
    if (at > now - window_s_) window.push_back(latency);
  }
  *answers = window.size();
  if (window.empty()) return std::nullopt;
  return quantile(std::move(window), 0.99);  // the one definition (serf/core/statistics.h)
}

StatusSnapshot ServeMetrics::snapshot(const LiveStatus& live) const {
  StatusSnapshot s;
  s.live = live;
  s.rate_per_s = window_rate_per_s();
  const std::optional<double> mean_s = window_mean_s();
  if (mean_s) s.observed_mean_ms = *mean_s * 1e3;
  LatencyPredictor predictor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    predictor = predictor_;
  }
  s.predicted_mean_ms = predictor.mean_ms(live.config, s.rate_per_s);
  s.predicted_p99_ms = predictor.p99_ms(live.config, s.rate_per_s);
  std::lock_guard<std::mutex> lock(mutex_);
  auto count = [&](Outcome o) {
    auto it = outcomes_.find(o);
    return it == outcomes_.end() ? uint64_t{0} : it->second;
  };
  s.answered = count(Outcome::kAnswered);
  s.rejected = count(Outcome::kRejected);
  s.timed_out = count(Outcome::kTimedOut);
  s.failed = count(Outcome::kFailed);
  s.received = s.answered + s.rejected + s.timed_out + s.failed;
  s.window_s = window_s_;
  size_t answers = 0;
  const std::optional<double> p99_s = window_p99_s(&answers);
  s.window_answered = answers;
  if (p99_s) s.observed_p99_ms = *p99_s * 1e3;
  const double now = now_s();
  s.switches = switches_;
  s.recalibrations_total = recalibrations_;
  s.recalibrations = recalibration_log_;
  s.bin_s = kHistoryBinS;
  const auto current = static_cast<int64_t>(now);
  for (int64_t first = current - kHistoryS + 1; first <= current; first += kHistoryBinS) {
    uint64_t ended = 0, answered = 0;
    double sum = 0;
    for (const Second& b : seconds_) {
      if (b.at < first || b.at >= first + kHistoryBinS) continue;
      ended += b.ended;
      answered += b.answered;
      sum += b.latency_sum_s;
    }
    StatusSnapshot::Bin bin;
    bin.rate_per_s = static_cast<double>(ended) / kHistoryBinS;
    if (answered > 0) bin.mean_ms = sum / static_cast<double>(answered) * 1e3;
    s.history.push_back(bin);
  }
  return s;
}

// The running configuration, its units, and the switches made and declined (mutex_ held).
void ServeMetrics::write_configuration(const LiveStatus& live, std::string* out_text) const {
  std::string& out = *out_text;
  family("serf_configuration", "gauge",
         "The running configuration (c batches at once per unit, K nodes per batch, T threads "
         "per node, b requests per batch at most; b = 1 without batching), as labels; the value "
         "is 1.",
         &out);
  sample("serf_configuration", 1, &out,
         "service=\"" + std::to_string(live.config.service) + "\",inter=\"" +
             std::to_string(live.config.inter) + "\",intra=\"" + std::to_string(live.config.intra) +
             "\",batch=\"" + std::to_string(live.config.batch) + "\"");
  gauge("serf_serving_units", "Serving units of K nodes (floor(N / K)).", live.units, &out);
  family("serf_configuration_switches_total", "counter", "Configuration switches.", &out);
  sample("serf_configuration_switches_total", static_cast<double>(live.switches), &out);
  family("serf_switches_declined_total", "counter",
         "Switches the table named and the switch gate declined, because the latency they would "
         "save over their expected dwell was less than the wait the switch adds (once per wish).",
         &out);
  sample("serf_switches_declined_total",
         switch_gate_ ? static_cast<double>(switch_gate_->declined()) : 0.0, &out);
  const double switch_cost_s = switch_gate_ ? switch_gate_->last_cost_s() : 0.0;
  gauge("serf_switch_cost_seconds",
        "The switch gate's last estimate of a switch's cost (drain plus reconfigure, from the "
        "measured switches; NaN: none weighed yet).",
        switch_cost_s > 0 ? switch_cost_s : NAN, &out);
}

void ServeMetrics::write_counters(std::string* out) const {
  family("serf_requests_total", "counter",
         "Requests that ended, by outcome (received = answered + rejected + timed_out + failed).",
         out);
  for (Outcome o : {Outcome::kAnswered, Outcome::kRejected, Outcome::kTimedOut, Outcome::kFailed}) {
    auto it = outcomes_.find(o);
    sample("serf_requests_total", it == outcomes_.end() ? 0.0 : static_cast<double>(it->second),
           out, std::string("outcome=\"") + outcome_name(o) + "\"");
  }
  family("serf_invalid_requests_total", "counter",
         "Requests refused as malformed (HTTP 400/413, gRPC INVALID_ARGUMENT), by protocol.", out);
  for (const char* p : {"http", "grpc"}) {
    auto it = invalid_.find(p);
    sample("serf_invalid_requests_total",
           it == invalid_.end() ? 0.0 : static_cast<double>(it->second), out,
           std::string("protocol=\"") + p + "\"");
  }
  family("serf_refused_connections_total", "counter",
         "HTTP connections answered 503 because --http-connections were open already.", out);
  sample("serf_refused_connections_total", static_cast<double>(refused_connections_), out);
  family("serf_http_read_timeouts_total", "counter",
         "HTTP requests not whole within --read-timeout (answered 408, connection closed), by "
         "the part that was late: head (request line and headers) or body.",
         out);
  for (const char* part : {"head", "body"}) {
    auto it = read_timeouts_.find(part);
    sample("serf_http_read_timeouts_total",
           it == read_timeouts_.end() ? 0.0 : static_cast<double>(it->second), out,
           std::string("part=\"") + part + "\"");
  }
  family("serf_http_silent_connections_total", "counter",
         "HTTP connections closed because they sent nothing within the keep-alive time.", out);
  sample("serf_http_silent_connections_total", static_cast<double>(silent_connections_), out);
  family("serf_grpc_cut_calls_total", "counter",
         "gRPC ModelInfer calls that ended before their message came whole: the connection "
         "closed (--grpc-max-connection-age, then --read-timeout) or the client cancelled. Each is "
         "counted received and timed_out too.",
         out);
  sample("serf_grpc_cut_calls_total", static_cast<double>(grpc_cut_calls_), out);
  family("serf_recalibrations_total", "counter",
         "Tuples whose observed service time drifted beyond the profile's and were recalibrated "
         "(serf serve --recalibrate on).",
         out);
  sample("serf_recalibrations_total", static_cast<double>(recalibrations_), out);
}

void ServeMetrics::write_histograms(std::string* out) const {
  request_s_.write("serf_request_duration_seconds",
                   "Arrival to answer of answered requests (queue plus compute).", out);
  queue_s_.write("serf_queue_duration_seconds",
                 "Arrival to dispatch to a unit of answered requests.", out);
  compute_s_.write("serf_compute_duration_seconds",
                   "Dispatch to answer of answered requests (a slot's occupancy).", out);
  batch_size_.write("serf_batch_size",
                    "Requests per batch a slot served (b' <= the configuration's b; 1 without "
                    "batching).",
                    out);
  frontend_s_.write("serf_frontend_duration_seconds",
                    "The front end's own time per answered request: parsing and hand-over, "
                    "encoding and sending.",
                    out);
}

void ServeMetrics::write_latency_gauges(const Prediction& p, std::string* out) const {
  const std::string window = std::to_string(static_cast<int>(window_s_)) + " s";
  gauge("serf_window_rate_per_second",
        "Requests that ended per second over the last " + window + ".", p.rate_per_s, out);
  gauge("serf_observed_mean_latency_seconds",
        "Mean latency of the requests answered over the last " + window + ".",
        p.observed_mean_s.value_or(NAN), out);
  gauge("serf_predicted_mean_latency_seconds",
        "The queue model's mean latency for the running configuration at the rate of the last " +
            window + " (NaN: no prediction, or unstable at that rate).",
        p.predicted_mean_ms ? *p.predicted_mean_ms / 1e3 : NAN, out);
  gauge("serf_observed_p99_latency_seconds",
        "99th percentile (interpolated, numpy's default) of the latencies answered over the last " +
            window + " (at most the last " + std::to_string(kLatencySamples) + " answers).",
        p.observed_p99_s.value_or(NAN), out);
  gauge("serf_predicted_p99_latency_seconds",
        "The planner's tail approximation of the 99th percentile latency for the running "
        "configuration at the rate of the last " +
            window + " (NaN: no profile, or unstable at that rate).",
        p.predicted_p99_ms ? *p.predicted_p99_ms / 1e3 : NAN, out);
}

std::string ServeMetrics::prometheus_text(const LiveStatus& live) const {
  Prediction p;
  p.rate_per_s = window_rate_per_s();
  p.observed_mean_s = window_mean_s();
  LatencyPredictor predictor;
  {
    std::lock_guard<std::mutex> lock(mutex_);  // self-calibration replaces it while serving
    predictor = predictor_;
  }
  p.predicted_mean_ms = predictor.mean_ms(live.config, p.rate_per_s);
  p.predicted_p99_ms = predictor.p99_ms(live.config, p.rate_per_s);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t answers = 0;
  p.observed_p99_s = window_p99_s(&answers);
  std::string out;
  write_counters(&out);
  write_histograms(&out);
  gauge("serf_queue_depth", "Requests waiting in the units' queues.",
        static_cast<double>(live.queued), &out);
  gauge("serf_requests_in_flight", "Requests dispatched to a unit and not answered yet.",
        static_cast<double>(live.in_flight), &out);
  write_configuration(live, &out);
  gauge("serf_arrival_rate_per_second",
        "Arrival rate the scheduler sees (its rate window), requests per second.", live.rate_per_s,
        &out);
  write_latency_gauges(p, &out);
  gauge("serf_ready", "1 when every node prepared the model and the server takes requests.",
        live.ready ? 1 : 0, &out);
  return out;
}

nlohmann::json ServeMetrics::triton_stats(const ModelInfo& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto duration = [](uint64_t count, double seconds) {
    return nlohmann::json{{"count", count},
                          {"ns", static_cast<uint64_t>(std::llround(seconds * 1e9))}};
  };
  uint64_t not_answered = 0;
  for (const auto& [o, n] : outcomes_) not_answered += o == Outcome::kAnswered ? 0 : n;
  const uint64_t answered = request_s_.count();
  nlohmann::json infer{{"success", duration(answered, request_s_.sum())},
                       {"fail", duration(not_answered, failed_latency_sum_s_)},
                       {"queue", duration(answered, queue_s_.sum())},
                       {"compute_input", duration(0, 0)},
                       {"compute_infer", duration(answered, compute_s_.sum())},
                       {"compute_output", duration(0, 0)}};
  nlohmann::json stats{{"name", model.name},
                       {"version", model.version},
                       {"last_inference", static_cast<uint64_t>(last_answer_epoch_ms_)},
                       {"inference_count", answered},
                       {"execution_count", answered},
                       {"inference_stats", infer},
                       {"batch_stats", nlohmann::json::array()}};
  return {{"model_stats", {stats}}};
}

}  // namespace serf::serve
