// Dynamic batching in the dispatcher (issue 16): a free slot takes up to b waiting requests, each
// answer is its own row, --max-batch-delay-us waits for a batch to fill; the emulation's batch
// service times; serf_batch_size. Fake transport (no MPI).
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "client_requests.h"
#include "fake_transport.h"
#include "serve/controller.h"
#include "serve/metrics.h"
#include "serving_thread.h"

using namespace serf;
using namespace serf::serve;
using namespace serf::serve::testing;  // Serving, submit, seconds_since
using Clock = std::chrono::steady_clock;

TEST_CASE("a free slot takes up to b waiting requests and each answer is its own row",
          "[mpi][controller][batch]") {
  FakeTransport t(1, 20e-3);
  Controller c(t, {});
  REQUIRE(c.configure({1, 1, 1, 4}).ok());
  // Ten requests wait before the loop runs: the one slot serves them as batches of 4, 4, 2.
  std::vector<std::future<InferAnswer>> f;
  for (int i = 0; i < 10; ++i) f.push_back(submit(c, {float(i), float(100 + i)}));
  Serving serving(c);
  for (int i = 0; i < 10; ++i) {
    InferAnswer a = f[static_cast<size_t>(i)].get();
    REQUIRE(a.outcome == Outcome::kAnswered);
    REQUIRE(a.output == std::vector<float>{float(i) + 1, float(101 + i)});
    REQUIRE(a.config == Configuration{1, 1, 1, 4});
  }
  REQUIRE(serving.stop().ok());
  REQUIRE(t.rows_sent == std::vector<int>{4, 4, 2});
  REQUIRE(t.answered.size() == 3);  // one result per batch
  for (const auto& [id, n] : t.answered) REQUIRE(n == 1);
  std::vector<int> rows, batch;
  for (const RequestRecord& r : c.records()) {
    REQUIRE(r.answered);
    REQUIRE(r.running == 1);
    rows.push_back(r.batch_row);
    batch.push_back(r.batch);
  }
  REQUIRE(rows == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1});
  REQUIRE(batch == std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4, 2, 2});
  REQUIRE(accounting_line(c.counts()) ==
          "received 10 = answered 10 + rejected 0 + timed out 0 + failed 0");
}

TEST_CASE("generated load faster than one slot serves forms batches, every request once",
          "[mpi][controller][batch]") {
  FakeTransport t(2, 4e-3);
  Controller c(t, {});
  REQUIRE(c.configure({2, 1, 1, 8}).ok());
  // 2 units x 2 slots x 250/s at batch 1; 3000/s only keeps up in batches.
  REQUIRE(c.run_open_loop(poisson_arrivals(3000, 600, 11), nullptr).ok());
  REQUIRE(c.records().size() == 600);
  int largest = 0, rows = 0;
  for (int n : t.rows_sent) {
    REQUIRE(n >= 1);
    REQUIRE(n <= 8);
    largest = std::max(largest, n);
    rows += n;
  }
  REQUIRE(rows == 600);
  REQUIRE(largest > 1);
  REQUIRE(t.answered.size() == t.rows_sent.size());
  for (const RequestRecord& r : c.records()) {
    REQUIRE(r.answered);
    REQUIRE(r.running <= 2);
  }
}

TEST_CASE("a max batch delay waits for a full batch, at most the delay",
          "[mpi][controller][batch]") {
  FakeTransport t(1, 5e-3);
  ControllerOptions o;
  o.max_batch_delay_s = 1.0;
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1, 4}).ok());
  Serving serving(c);
  // Two of four: they wait the whole delay, then go as one batch.
  const auto t0 = Clock::now();
  auto a = submit(c, {1});
  auto b = submit(c, {2});
  REQUIRE(a.get().output == std::vector<float>{2});
  REQUIRE(b.get().output == std::vector<float>{3});
  REQUIRE(seconds_since(t0) >= 1.0);
  // A full batch goes at once (well within the delay even on a loaded machine).
  const auto t1 = Clock::now();
  std::vector<std::future<InferAnswer>> f;
  for (int i = 0; i < 4; ++i) f.push_back(submit(c, {float(10 + i)}));
  for (int i = 0; i < 4; ++i) {
    REQUIRE(f[static_cast<size_t>(i)].get().output == std::vector<float>{11.0f + float(i)});
  }
  REQUIRE(seconds_since(t1) < 0.8);
  REQUIRE(serving.stop().ok());
  REQUIRE(t.rows_sent.size() >= 2);
  REQUIRE(t.rows_sent.front() == 2);
  REQUIRE(t.rows_sent.back() + t.rows_sent[t.rows_sent.size() - 2] >= 4);
}

TEST_CASE("emulated batches take the profile's batch times, interpolated in n",
          "[mpi][controller][batch]") {
  Profile p;
  p.model = "m";
  p.tuples.push_back({{1, 1, 1, 1}, 10.0, 0.0, 5, 0});
  p.tuples.push_back({{1, 1, 1, 4}, 16.0, 0.0, 5, 0});
  ServiceSampler s(p, false, 1);
  REQUIRE(s.sample_ms({1, 1, 1, 4}).value() == 16.0);
  REQUIRE(s.sample_ms({1, 1, 1, 2}).value() == Approx(12.0));
  REQUIRE(s.sample_ms({1, 1, 1, 3}).value() == Approx(14.0));
  REQUIRE(s.sample_ms({1, 1, 1, 8}).status().code() == StatusCode::kNotFound);
  REQUIRE(s.check({1, 1, 1, 4}).ok());
  REQUIRE(!s.check({1, 1, 1, 8}).ok());
  REQUIRE(!s.check({2, 1, 1, 4}).ok());
}

TEST_CASE("serf_batch_size counts each batch once by its size", "[serve][metrics][batch]") {
  ServeMetrics m;
  auto row = [](int batch, int batch_row) {
    RequestRecord r;
    r.arrival_s = 1.0;
    r.dispatch_s = 1.5;
    r.done_s = 2.0;
    r.answered = true;
    r.outcome = Outcome::kAnswered;
    r.batch = batch;
    r.batch_row = batch_row;
    return r;
  };
  for (int k = 0; k < 4; ++k) m.record(row(4, k));
  m.record(row(1, 0));
  const std::string text = "\n" + m.prometheus_text(LiveStatus{});
  auto has = [&](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  REQUIRE(has("# TYPE serf_batch_size histogram"));
  REQUIRE(has("serf_batch_size_bucket{le=\"1\"} 1"));
  REQUIRE(has("serf_batch_size_bucket{le=\"4\"} 2"));
  REQUIRE(has("serf_batch_size_count 2"));
  REQUIRE(has("serf_batch_size_sum 5"));
}

TEST_CASE("the closed loop keeps c full batches of b running (serf profile --batches)",
          "[mpi][controller][batch]") {
  FakeTransport t(1, 2e-3);
  Controller c(t, {});
  REQUIRE(c.configure({2, 1, 1, 4}).ok());
  std::vector<double> occupancy;
  auto samples = c.run_closed_loop(2, 10, &occupancy);
  REQUIRE(samples.ok());
  REQUIRE(samples->size() == 10);  // batches measured, not requests
  REQUIRE(occupancy.size() == 10);
  for (double ms : *samples) REQUIRE(ms == Approx(2.0));
  REQUIRE(!t.rows_sent.empty());
  for (int n : t.rows_sent) REQUIRE(n == 4);
  REQUIRE(t.max_running_seen[0] == 2);
  for (const RequestRecord& r : c.records()) {
    REQUIRE(r.answered);
    REQUIRE(r.batch == 4);
  }
}
