// The controller as a service: the request inbox, per-request payloads, admission (bounded queue,
// deadlines), the stop that drains, and client arrivals seen by the scheduler; fake transport.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "client_requests.h"
#include "fake_transport.h"
#include "serve/controller.h"
#include "serving_thread.h"

using namespace serf;
using namespace serf::serve;
using namespace serf::serve::testing;  // Serving, submit, seconds_since
using Clock = std::chrono::steady_clock;

TEST_CASE("the inbox hands requests over in order and wakes a waiter at once", "[serve]") {
  RequestInbox inbox;
  std::thread pusher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int i = 0; i < 3; ++i) {
      InferRequest r;
      r.input = std::make_shared<const std::vector<float>>(std::vector<float>{float(i)});
      const bool pushed = inbox.push(std::move(r));  // outside REQUIRE: it loops, r is moved once
      REQUIRE(pushed);
    }
  });
  const auto t0 = Clock::now();
  inbox.wait(5.0);
  REQUIRE(seconds_since(t0) < 2.0);  // woken by the push, not the 5 s timeout
  pusher.join();
  std::vector<InferRequest> taken;
  REQUIRE(inbox.take_all(&taken) == 3);
  for (int i = 0; i < 3; ++i) REQUIRE((*taken[static_cast<size_t>(i)].input)[0] == float(i));
  REQUIRE(inbox.size() == 0);
  // wake() ends a wait with nothing pushed.
  std::thread waker([&] { inbox.wake(); });
  const auto t1 = Clock::now();
  inbox.wait(5.0);
  waker.join();
  REQUIRE(seconds_since(t1) < 2.0);
  // Closing hands back what waits and refuses (and counts) later pushes.
  REQUIRE(inbox.push(InferRequest{}));
  REQUIRE(inbox.close().size() == 1);
  REQUIRE(!inbox.push(InferRequest{}));
  REQUIRE(!inbox.push(InferRequest{}));
  REQUIRE(inbox.refused() == 2);
  REQUIRE(inbox.closed());
}

TEST_CASE("each client request is answered with the output of its own input", "[serve]") {
  FakeTransport t(2, 1e-3);
  Controller c(t, {});
  REQUIRE(c.configure({2, 1, 1}).ok());
  Serving serving(c);
  std::vector<std::future<InferAnswer>> answers;
  std::vector<std::thread> clients;
  clients.reserve(4);
  std::mutex m;
  for (int k = 0; k < 4; ++k) {
    clients.emplace_back([&, k] {
      for (int i = 0; i < 25; ++i) {
        auto f = submit(c, {float(k), float(i), float(k * 100 + i)});
        std::lock_guard<std::mutex> lock(m);
        answers.push_back(std::move(f));
      }
    });
  }
  for (auto& th : clients) th.join();
  std::set<std::pair<int, int>> seen;
  for (auto& f : answers) {
    InferAnswer a = f.get();
    REQUIRE(a.outcome == Outcome::kAnswered);
    REQUIRE(a.output.size() == 3);
    const int k = static_cast<int>(a.output[0]) - 1, i = static_cast<int>(a.output[1]) - 1;
    REQUIRE(a.output[2] == float(k * 100 + i) + 1.0f);
    seen.insert({k, i});
    REQUIRE(a.compute_s >= 1e-3);
    REQUIRE(a.total_s >= a.compute_s);
    REQUIRE(a.config == Configuration{2, 1, 1});
  }
  REQUIRE(seen.size() == 100);  // every request got its own answer
  REQUIRE(serving.stop().ok());
  const OutcomeCounts n = c.counts();
  REQUIRE(n.received == 100);
  REQUIRE(n.answered == 100);
  REQUIRE(n.balanced());
  REQUIRE(accounting_line(n) ==
          "received 100 = answered 100 + rejected 0 + timed out 0 + failed 0");
}

TEST_CASE("a full queue rejects at once with a reason; a request queued past its timeout ends 504",
          "[serve]") {
  // A 1 s service, so "at once" is told apart from "after the service" with room for a loaded
  // machine's stalls (a 100 ms service with an 80 ms bound failed once beside a full run: 0.4 s).
  FakeTransport t(1, 1.0);
  ControllerOptions o;
  o.max_queue = 2;
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  // Pushed before the loop runs: one takes the free slot, two wait, three are rejected.
  std::vector<std::future<InferAnswer>> f;
  f.reserve(6);
  for (int i = 0; i < 6; ++i) f.push_back(submit(c, {float(i)}));
  const auto t0 = Clock::now();
  Serving serving(c);
  for (int i = 3; i < 6; ++i) {
    InferAnswer a = f[static_cast<size_t>(i)].get();
    REQUIRE(a.outcome == Outcome::kRejected);
    REQUIRE(a.reason.find("the queue of unit 0 is full (2 requests waiting") != std::string::npos);
  }
  REQUIRE(seconds_since(t0) < 0.8);  // before the first request's 1 s service ended
  for (int i = 0; i < 3; ++i)
    REQUIRE(f[static_cast<size_t>(i)].get().outcome == Outcome::kAnswered);
  // Behind a 1 s request, a 10 ms timeout passes in the queue.
  auto first = submit(c, {1});
  auto second = submit(c, {2}, 0.010);
  const auto t1 = Clock::now();
  InferAnswer late = second.get();
  REQUIRE(late.outcome == Outcome::kTimedOut);
  REQUIRE(late.reason.find("timeout of 10000 us") != std::string::npos);
  REQUIRE(seconds_since(t1) < 0.9);  // ended in the queue, not after the 1 s service
  REQUIRE(late.queue_s >= 0.010);
  REQUIRE(first.get().outcome == Outcome::kAnswered);
  REQUIRE(serving.stop().ok());
  const OutcomeCounts n = c.counts();
  REQUIRE(n.received == 8);
  REQUIRE(n.answered == 4);
  REQUIRE(n.rejected == 3);
  REQUIRE(n.timed_out == 1);
  REQUIRE(n.balanced());
}

TEST_CASE("a stop drains: queued and running requests finish, later ones are refused", "[serve]") {
  FakeTransport t(1, 0.02);
  std::atomic<bool> stop{false};
  ControllerOptions o;
  o.stop = &stop;  // as the SIGTERM handler sets it
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  REQUIRE(c.live().ready);
  std::vector<std::future<InferAnswer>> f;
  f.reserve(5);
  for (int i = 0; i < 5; ++i) f.push_back(submit(c, {float(i)}));
  Status st;
  std::thread loop([&] { st = c.serve(nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  c.inbox().wake();
  for (auto& x : f) REQUIRE(x.get().outcome == Outcome::kAnswered);
  loop.join();
  REQUIRE(st.ok());
  REQUIRE(!c.live().ready);
  REQUIRE(c.live().draining);
  REQUIRE(submit(c, {9}).get().outcome == Outcome::kRejected);  // the inbox is closed
  const OutcomeCounts n = c.counts();
  REQUIRE(n.received == 6);
  REQUIRE(n.answered == 5);
  REQUIRE(n.rejected == 1);
  REQUIRE(n.balanced());
  REQUIRE(t.answered.size() == 5);
}

TEST_CASE("a stop while mpirun tears the job down names the dead node; waiting clients fail",
          "[serve]") {
  FakeTransport t(1, 0.05);
  t.torn_down = true;  // the nodes said farewell: they got SIGTERM too
  std::atomic<bool> stop{false};
  ControllerOptions o;
  o.stop = &stop;
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  int saved = 0;
  c.set_terminated_hook([&] { ++saved; });
  auto a = submit(c, {1});
  auto b = submit(c, {2});
  Status st;
  std::thread loop([&] { st = c.serve(nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  c.inbox().wake();
  loop.join();
  REQUIRE(st.code() == StatusCode::kUnavailable);
  REQUIRE(st.message() == "node rank 9 died (fake)");
  REQUIRE(saved == 1);
  REQUIRE(a.get().outcome == Outcome::kFailed);
  REQUIRE(b.get().outcome == Outcome::kFailed);
  REQUIRE(c.counts().balanced());
  REQUIRE(c.counts().failed == 2);
}

TEST_CASE("a node's error fails its client request only; the service goes on", "[serve]") {
  FakeTransport t(1, 1e-3);
  Controller c(t, {});
  REQUIRE(c.configure({1, 1, 1}).ok());
  t.fail_id = 1;
  Serving serving(c);
  auto a = submit(c, {1}), b = submit(c, {2}), d = submit(c, {3});
  REQUIRE(a.get().outcome == Outcome::kAnswered);
  InferAnswer failed = b.get();
  REQUIRE(failed.outcome == Outcome::kFailed);
  REQUIRE(failed.reason.find("fake failure") != std::string::npos);
  REQUIRE(d.get().output == std::vector<float>{4});
  REQUIRE(serving.stop().ok());
  REQUIRE(c.counts().failed == 1);
  REQUIRE(c.counts().balanced());
}

TEST_CASE("client arrivals drive the rate monitor and the table's switches", "[serve]") {
  FakeTransport t(4, 1e-3);
  ControllerOptions o;
  o.rate_window_s = 0.2;
  o.tick_s = 0.01;
  Controller c(t, o);
  REQUIRE(c.configure({1, 4, 1}).ok());
  double max_rate = 0;
  ConfigurationTable table;
  table.nodes = 4;
  for (auto [rate, config] :
       std::vector<std::pair<double, Configuration>>{{50, {1, 4, 1}}, {2000, {2, 1, 1}}}) {
    TableEntry e;
    e.rate_per_s = rate;
    e.stable = true;
    e.config = config;
    table.entries.push_back(e);
  }
  SchedulerHook table_switch = table_hook(table, 0.0);
  SchedulerHook hook = [&](double now_s, double rate) {
    max_rate = std::max(max_rate, rate);
    return table_switch(now_s, rate);
  };
  Serving serving(c, hook);
  std::vector<std::future<InferAnswer>> f;
  const auto t0 = Clock::now();
  for (int i = 0; seconds_since(t0) < 0.4; ++i) {  // about 500 requests/s
    f.push_back(submit(c, {float(i)}));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& x : f) REQUIRE(x.get().outcome == Outcome::kAnswered);
  REQUIRE(serving.stop().ok());
  REQUIRE(max_rate > 200);
  REQUIRE(!c.switches().empty());
  REQUIRE(c.switches().front().to == Configuration{2, 1, 1});
  REQUIRE(c.counts().answered == f.size());
}

TEST_CASE("generated load and clients share the path; records stay bounded", "[serve]") {
  FakeTransport t(2, 1e-3);
  ControllerOptions o;
  o.max_records = 10;
  o.input = {5, 6};
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  auto client = submit(c, {1, 2, 3});
  REQUIRE(c.run_open_loop(poisson_arrivals(2000, 200, 4), nullptr).ok());
  REQUIRE(client.get().output == std::vector<float>{2, 3, 4});
  REQUIRE(c.counts().received == 201);
  REQUIRE(c.counts().answered == 201);
  REQUIRE(c.records().size() == 10);
  REQUIRE(c.records().back().id == 200);
  // infer_one: one request, its own output.
  auto one = c.infer_one(std::make_shared<const std::vector<float>>(std::vector<float>{7}));
  REQUIRE(one.ok());
  REQUIRE(one->output == std::vector<float>{8});
}

TEST_CASE("queued requests whose client went away are dropped before dispatch, batches too",
          "[serve][controller]") {
  FakeTransport t(1, 0.2);  // one unit, 200 ms a batch
  Controller c(t, {});
  REQUIRE(c.configure({1, 1, 1, 4}).ok());  // batches of up to 4
  testing::Serving serving(c);
  auto first = testing::submit(c, {1, 2});  // takes the slot
  REQUIRE(wait_received(c, 1));
  // Five wait behind it; the clients of the 2nd and 4th go away while they wait.
  std::vector<std::shared_ptr<std::atomic<bool>>> gone;
  std::vector<std::future<InferAnswer>> waiting;
  for (int k = 0; k < 5; ++k) {
    gone.push_back(std::make_shared<std::atomic<bool>>(false));
    auto promise = std::make_shared<std::promise<InferAnswer>>();
    waiting.push_back(promise->get_future());
    InferRequest r;
    r.input = std::make_shared<const std::vector<float>>(std::vector<float>{10.0f * k, 1});
    r.arrival = std::chrono::steady_clock::now();
    r.done = [promise](InferAnswer&& a) { promise->set_value(std::move(a)); };
    r.cancelled = [flag = gone.back()] { return flag->load(); };
    const bool pushed = c.inbox().push(std::move(r));
    REQUIRE(pushed);
  }
  REQUIRE(wait_received(c, 6));
  gone[1]->store(true);
  gone[3]->store(true);
  REQUIRE(first.get().outcome == Outcome::kAnswered);
  for (int k = 0; k < 5; ++k) {
    InferAnswer a = waiting[static_cast<size_t>(k)].get();
    if (k == 1 || k == 3) {
      REQUIRE(a.outcome == Outcome::kTimedOut);
      REQUIRE(a.reason.find("went away") != std::string::npos);
      REQUIRE(a.compute_s == 0);  // never dispatched
    } else {
      REQUIRE(a.outcome == Outcome::kAnswered);
      REQUIRE(a.output == std::vector<float>{10.0f * k + 1, 2});  // its own row
    }
  }
  REQUIRE(serving.stop().ok());
  REQUIRE(c.counts().balanced());
  REQUIRE(c.counts().timed_out == 2);
  REQUIRE(c.counts().answered == 4);
  // The first alone, then the three left in one batch: the two gone were never sent.
  REQUIRE(t.rows_sent == std::vector<int>{1, 3});
}

TEST_CASE("SIGTERM during a switch's drain or its reconfiguration: every request ends, counted",
          "[serve]") {
  // One unit of (1,1,1) serving 200 ms requests; the table asks for (2,1,1) at once. The switch
  // drains the running request (up to 200 ms), then the nodes take 300 ms to reconfigure. The stop
  // comes during the drain (50 ms) or during the reconfiguration (300 ms).
  const double stop_after_s = GENERATE(0.05, 0.3);
  INFO("stop after " << stop_after_s << " s");
  FakeTransport t(2, 0.2);
  std::atomic<bool> stop{false};
  ControllerOptions o;
  o.stop = &stop;
  o.tick_s = 0.01;
  o.rate_window_s = 0.001;  // a measured rate from the first tick (this hook reads neither)
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  t.configure_s = 0.3;
  std::vector<std::future<InferAnswer>> f;
  f.reserve(4);
  for (int i = 0; i < 4; ++i) f.push_back(submit(c, {float(i)}));
  SchedulerHook hook = [](double, double) { return std::optional<Configuration>({2, 1, 1}); };
  Status st;
  std::thread loop([&] { st = c.serve(hook); });
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(stop_after_s));
  f.push_back(submit(c, {4}));  // arrives during the switch, before the stop
  stop = true;
  c.inbox().wake();
  for (auto& x : f) REQUIRE(x.get().outcome == Outcome::kAnswered);
  loop.join();
  REQUIRE(st.ok());
  REQUIRE(seconds_since(t0) < 5);
  REQUIRE(c.switches().size() == 1);  // the switch under way completed
  REQUIRE(submit(c, {9}).get().outcome == Outcome::kRejected);
  const OutcomeCounts n = c.counts();
  REQUIRE(n.received == 6);
  REQUIRE(n.answered == 5);
  REQUIRE(n.rejected == 1);
  REQUIRE(n.balanced());
}
