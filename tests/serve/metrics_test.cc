// The metrics: Prometheus histograms, the predicted mean latency from a profile or a table, the
// observed rolling mean, and Triton's statistics.
#include "serve/metrics.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace serf;
using namespace serf::serve;

namespace {

RequestRecord answered(double arrival_s, double dispatch_s, double done_s) {
  RequestRecord r;
  r.arrival_s = arrival_s;
  r.dispatch_s = dispatch_s;
  r.done_s = done_s;
  r.answered = true;
  r.outcome = Outcome::kAnswered;
  return r;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

// A table of one entry: (1, 1, 1) at 100 requests/s, 12.5 ms.
std::shared_ptr<ConfigurationTable> one_entry_table() {
  auto table = std::make_shared<ConfigurationTable>();
  TableEntry e;
  e.rate_per_s = 100;
  e.stable = true;
  e.config = {1, 1, 1};
  e.prediction.latency_ms = 12.5;
  table->entries.push_back(e);
  return table;
}

}  // namespace

TEST_CASE("histograms are cumulative with +Inf, sum and count", "[serve][metrics]") {
  Histogram h({0.01, 0.1});
  for (double v : {0.005, 0.01, 0.05, 3.0}) h.observe(v);
  std::string out = "\n";
  h.write("x_seconds", "help text", &out);
  REQUIRE(has_line(out, "# TYPE x_seconds histogram"));
  REQUIRE(has_line(out, "x_seconds_bucket{le=\"0.01\"} 2"));
  REQUIRE(has_line(out, "x_seconds_bucket{le=\"0.1\"} 3"));
  REQUIRE(has_line(out, "x_seconds_bucket{le=\"+Inf\"} 4"));
  REQUIRE(has_line(out, "x_seconds_sum 3.065"));
  REQUIRE(has_line(out, "x_seconds_count 4"));
}

TEST_CASE("the predicted mean latency comes from the profile's queue model, or the table",
          "[serve][metrics]") {
  auto profile = std::make_shared<Profile>();
  profile->model = "m";
  profile->hardware = {4, 2};
  profile->tuples.push_back({{1, 1, 1}, 10.0, 0.0, 5, 0});
  profile->tuples.push_back({{2, 1, 1}, 14.0, 0.0, 5, 0});
  profile->reindex();
  LatencyPredictor from_profile(profile, nullptr, 4, QueueKind::kMdInterf);
  // (2, 1, 1) on 4 nodes: 4 units, a cluster rate of 200/s is 50/s per unit.
  auto model = model_for(*profile, {2, 1, 1}, 4, QueueKind::kMdInterf);
  REQUIRE(model.ok());
  const double want = model->predict(2, 50.0).latency_ms;
  REQUIRE(from_profile.mean_ms({2, 1, 1}, 200.0).value() == Approx(want));
  REQUIRE(want > 10.0);
  REQUIRE(!from_profile.mean_ms({2, 1, 1}, 1e6));   // unstable: no number
  REQUIRE(!from_profile.mean_ms({1, 2, 1}, 10.0));  // no tuple (1, 2, 1)
  auto table = one_entry_table();
  LatencyPredictor from_table(nullptr, table, 4, QueueKind::kMdInterf);
  REQUIRE(from_table.mean_ms({1, 1, 1}, 60.0).value() == 12.5);
  REQUIRE(!from_table.mean_ms({2, 1, 1}, 60.0));  // the table's entry names another one
  REQUIRE(!LatencyPredictor().mean_ms({1, 1, 1}, 60.0));
}

TEST_CASE("the predicted p99 is the planner's tail approximation", "[serve][metrics]") {
  // M/M/1 (one node, c = 1, exponential service: SCV 1, mmc): the sojourn time is exponential
  // with rate mu - lambda, so at 10 ms a request and 50/s the p99 is ln(100) / 50 s = 92.1 ms.
  auto profile = std::make_shared<Profile>();
  profile->model = "m";
  profile->hardware = {1, 1};
  profile->tuples.push_back({{1, 1, 1}, 10.0, 1.0, 5, 0});
  profile->reindex();
  LatencyPredictor mm1(profile, nullptr, 1, QueueKind::kMmc);
  REQUIRE(mm1.mean_ms({1, 1, 1}, 50.0).value() == Approx(20.0).epsilon(1e-6));
  REQUIRE(mm1.p99_ms({1, 1, 1}, 50.0).value() == Approx(1e3 * std::log(100.0) / 50).epsilon(0.05));
  REQUIRE(!mm1.p99_ms({1, 1, 1}, 100.0));  // rho = 1: no finite p99
  REQUIRE(!mm1.p99_ms({2, 1, 1}, 10.0));   // no tuple (2, 1, 1)
  // The paper's model: above the mean, rising with the rate.
  LatencyPredictor md(profile, nullptr, 1, QueueKind::kMdInterf);
  const double low = md.p99_ms({1, 1, 1}, 20.0).value();
  REQUIRE(low > md.mean_ms({1, 1, 1}, 20.0).value());
  REQUIRE(md.p99_ms({1, 1, 1}, 80.0).value() > low);
  // A table alone predicts the mean of its entry, not a percentile.
  auto table = one_entry_table();
  REQUIRE(!LatencyPredictor(nullptr, table, 1, QueueKind::kMdInterf).p99_ms({1, 1, 1}, 60.0));
}

TEST_CASE("the text has every family; outcomes, window mean and statistics add up",
          "[serve][metrics]") {
  ServeMetrics m;
  m.record(answered(0.0, 0.001, 0.011));
  m.record(answered(0.0, 0.002, 0.032));
  RequestRecord rejected;
  rejected.outcome = Outcome::kRejected;
  m.record(rejected);
  m.count_invalid("grpc");
  m.observe_frontend(40e-6);
  LiveStatus live;
  live.ready = true;
  live.config = {2, 1, 1};
  live.units = 4;
  live.queued = 3;
  live.switches = 1;
  const std::string text = "\n" + m.prometheus_text(live);
  REQUIRE(has_line(text, "serf_requests_total{outcome=\"answered\"} 2"));
  REQUIRE(has_line(text, "serf_requests_total{outcome=\"rejected\"} 1"));
  REQUIRE(has_line(text, "serf_requests_total{outcome=\"timed_out\"} 0"));
  REQUIRE(has_line(text, "serf_invalid_requests_total{protocol=\"grpc\"} 1"));
  REQUIRE(has_line(text, "serf_queue_depth 3"));
  REQUIRE(
      has_line(text, "serf_configuration{service=\"2\",inter=\"1\",intra=\"1\",batch=\"1\"} 1"));
  REQUIRE(has_line(text, "serf_configuration_switches_total 1"));
  REQUIRE(has_line(text, "serf_request_duration_seconds_count 2"));
  REQUIRE(has_line(text, "serf_frontend_duration_seconds_count 1"));
  REQUIRE(has_line(text, "serf_observed_mean_latency_seconds 0.0215"));
  REQUIRE(has_line(text, "serf_predicted_mean_latency_seconds NaN"));  // nothing to predict from
  REQUIRE(has_line(text, "serf_predicted_p99_latency_seconds NaN"));
  // serf::quantile of {11, 32} ms at 0.99: 11 + 0.99 (32 - 11) = 31.79 ms (nearest rank said 32).
  REQUIRE(has_line(text, "serf_observed_p99_latency_seconds 0.03179"));
  REQUIRE(has_line(text, "serf_ready 1"));
  REQUIRE(m.window_mean_s().value() == Approx(0.0215));
  ModelInfo model;
  model.name = "m";
  nlohmann::json stats = m.triton_stats(model)["model_stats"][0];
  REQUIRE(stats["inference_count"] == 2);
  REQUIRE(stats["inference_stats"]["success"]["ns"] == 43000000);
  REQUIRE(stats["inference_stats"]["queue"]["ns"] == 3000000);
  REQUIRE(stats["inference_stats"]["compute_infer"]["ns"] == 40000000);
  REQUIRE(stats["inference_stats"]["fail"]["count"] == 1);
}
