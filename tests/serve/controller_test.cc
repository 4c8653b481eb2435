// The controller's dispatch, reconfiguration and closed-loop logic against a fake transport (no
// MPI).
#include "serve/controller.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <limits>
#include <map>
#include <thread>

#include "fake_transport.h"
#include "profiler/tuple_profiler.h"
#include "serve/switch_cost.h"

using namespace serf;
using namespace serf::serve;

TEST_CASE("open loop answers every request once across switches", "[mpi][controller]") {
  FakeTransport t(4);
  ControllerOptions o;
  o.rate_window_s = 0.01;  // a measured rate from 0.01 s on (this hook reads the time)
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  REQUIRE(c.units() == 4);
  std::vector<Configuration> plan = {{2, 1, 1}, {1, 2, 1}, {1, 4, 2}, {2, 2, 1}};
  size_t next = 0;
  auto hook = [&](double now_s, double) -> std::optional<Configuration> {
    if (next < plan.size() && now_s > 0.05 * static_cast<double>(next + 1)) return plan[next++];
    return std::nullopt;
  };
  auto arrivals = poisson_arrivals(1500, 400, 3);
  REQUIRE(c.run_open_loop(arrivals, hook).ok());
  REQUIRE(next == plan.size());
  REQUIRE(c.switches().size() == plan.size());
  REQUIRE(t.answered.size() == 400);
  for (const auto& [id, n] : t.answered) REQUIRE(n == 1);
  for (const auto& r : c.records()) {
    REQUIRE(r.answered);
    REQUIRE(r.latency_ms() >= 2.0);  // at least the service time, from the scheduled arrival
    REQUIRE(r.running <= r.config.service);
  }
  // Every configuration was applied to the transport, the first included.
  REQUIRE(t.configs.size() == 5);
  REQUIRE(t.configs.back() == Configuration{2, 2, 1});
}

TEST_CASE("no switch on less than a rate window of arrivals", "[mpi][controller]") {
  // 1000/s from the start; a 0.3 s window. Before 0.3 s the monitor counts the time before the
  // start as empty, so it reads low (e.g. 333/s at 0.1 s): a table would send the unit to a
  // lighter load's configuration. The hook is first asked once a whole window has passed, and
  // then sees the whole rate.
  FakeTransport t(2);
  ControllerOptions o;
  o.rate_window_s = 0.3;
  o.tick_s = 0.01;
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  std::vector<std::pair<double, double>> asked;  // (now, rate) with a rate measured
  auto hook = [&](double now_s, double rate) -> std::optional<Configuration> {
    if (rate <= 0) return std::nullopt;  // not measured yet: a table does not act (table_hook)
    asked.emplace_back(now_s, rate);
    if (asked.size() == 1) return Configuration{2, 1, 1};
    return std::nullopt;
  };
  REQUIRE(c.run_open_loop(poisson_arrivals(1000, 600, 11), hook).ok());
  REQUIRE(!asked.empty());
  REQUIRE(asked.front().first >= 0.3);
  REQUIRE(asked.front().second > 700);  // the whole window's rate, not a third of it
  REQUIRE(c.switches().size() == 1);
  REQUIRE(c.switches().front().at_s >= 0.3);
  REQUIRE(c.counts().answered == 600);
}

TEST_CASE("the window starts at the first arrival, not at the service's start",
          "[mpi][controller]") {
  // Clients connect 0.4 s after the service starts; a 0.3 s window. Counting from the start, the
  // monitor would be warm at 0.3 s and read 0-300/s of a 1000/s load until 0.7 s.
  FakeTransport t(2);
  ControllerOptions o;
  o.rate_window_s = 0.3;
  o.tick_s = 0.01;
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  std::vector<double> arrivals = poisson_arrivals(1000, 600, 12);
  for (double& a : arrivals) a += 0.4;
  std::vector<std::pair<double, double>> asked;  // (now, rate) with a rate measured
  auto hook = [&](double now_s, double rate) -> std::optional<Configuration> {
    if (rate > 0) asked.emplace_back(now_s, rate);
    return std::nullopt;
  };
  REQUIRE(c.run_open_loop(arrivals, hook).ok());
  REQUIRE(!asked.empty());
  REQUIRE(asked.front().first >= 0.4 + 0.3 - 0.01);  // the first arrival comes just after 0.4 s
  REQUIRE(asked.front().second > 700);
  REQUIRE(c.counts().answered == 600);
}

TEST_CASE("the rate monitor is warm a window after its first arrival", "[controller]") {
  RateMonitor m(2.0);
  REQUIRE(!m.warm(5.0));  // nothing arrived yet
  m.record(-0.5);         // a client's request taken before the service's loop began
  REQUIRE(!m.warm(1.4));
  REQUIRE(m.warm(1.5));
  RateMonitor late(2.0);
  for (int k = 0; k < 200; ++k) late.record(1.0 + 0.01 * k);  // 200 arrivals in [1, 3)
  REQUIRE(!late.warm(2.9));
  REQUIRE(late.warm(3.0));
  REQUIRE(late.rate_per_s(3.0) == Approx(100.0));
}

TEST_CASE("a unit never runs more than c requests", "[mpi][controller]") {
  FakeTransport t(2, 5e-3);
  Controller c(t, {});
  REQUIRE(c.configure({2, 1, 1}).ok());
  REQUIRE(c.run_open_loop(poisson_arrivals(2000, 100, 5), nullptr).ok());
  REQUIRE(t.max_running_seen[0] == 2);
  REQUIRE(t.max_running_seen[1] == 2);
}

TEST_CASE("closed loop keeps exactly c requests running", "[mpi][controller]") {
  FakeTransport t(2, 1e-3);
  Controller c(t, {});
  REQUIRE(c.configure({2, 2, 1}).ok());
  auto samples = c.run_closed_loop(2, 10);
  REQUIRE(samples.ok());
  REQUIRE(samples->size() == 10);
  for (double s : *samples) REQUIRE(s == Approx(1.0));
  REQUIRE(t.max_running_seen[0] == 2);
}

TEST_CASE("closed loop side by side keeps c requests running on every unit", "[mpi][controller]") {
  FakeTransport t(4, 1e-3);
  Controller c(t, {});
  REQUIRE(c.configure({2, 1, 1}).ok());  // 4 units of 1 node
  std::vector<double> occupancy;
  auto samples = c.run_closed_loop(2, 40, &occupancy, 4);
  REQUIRE(samples.ok());
  REQUIRE(samples->size() == 40);
  REQUIRE(occupancy.size() == 40);
  for (int u = 0; u < 4; ++u) REQUIRE(t.max_running_seen[static_cast<size_t>(u)] == 2);
  for (const auto& r : c.records()) REQUIRE(r.answered);
  // The warm-up is each unit's own: one sample after 5 warm-up answers on a unit needs about 5
  // answers on each of the 4 (the units run in step); a warm-up shared by all would stop near 10.
  REQUIRE(c.configure({1, 1, 1}).ok());
  const size_t before = c.records().size();
  REQUIRE(c.run_closed_loop(5, 1, nullptr, 4).ok());
  REQUIRE(c.records().size() - before >= 20);
  // More units than the configuration has, or none: refused, nothing sent.
  REQUIRE(c.run_closed_loop(2, 4, nullptr, 5).status().code() == StatusCode::kInvalidArgument);
  REQUIRE(c.run_closed_loop(2, 4, nullptr, 0).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a request on a dead unit is reported within the node timeout", "[mpi][controller]") {
  FakeTransport t(2);
  t.hang_after = 3;
  t.dead_unit = 0;
  ControllerOptions o;
  o.node_timeout_s = 1.0;
  Controller c(t, o);
  REQUIRE(c.configure({1, 2, 1}).ok());  // one unit: the fourth request goes to unit 0
  auto t0 = std::chrono::steady_clock::now();
  Status s = c.run_open_loop(poisson_arrivals(200, 20, 1), nullptr);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(s.code() == StatusCode::kUnavailable);
  REQUIRE(s.message().find("request 3 on unit 0 not answered after") != std::string::npos);
  REQUIRE(s.message().find("unit 0 is fake and silent") != std::string::npos);
  // Probed once, with a window of half the timeout (probe_s) and the report margin before it, so
  // the fault is named when the timeout passes (from the dispatch of request 3, which came after
  // the first arrivals).
  REQUIRE(t.probes == std::vector<int>{0});
  REQUIRE(t.probe_windows_s[0] == Approx(Controller::probe_s(1.0)));
  REQUIRE(t.probe_windows_s[0] == Approx(0.5));
  const double dispatched = c.records()[3].dispatch_s;
  REQUIRE(c.now_s() - dispatched < 1.0 + 0.1);
  REQUIRE(took < 2.0);
  size_t answered = 0;
  for (const auto& r : c.records()) answered += r.answered ? 1 : 0;
  REQUIRE(answered == 3);  // what was measured before the fault stays
}

TEST_CASE("a slow request on a live unit is reported at the timeout as too slow",
          "[mpi][controller]") {
  FakeTransport t(2);
  t.hang_after = 0;  // nothing is answered, but every unit answers its probe
  ControllerOptions o;
  o.node_timeout_s = 0.3;
  Controller c(t, o);
  REQUIRE(c.configure({1, 1, 1}).ok());
  Status s = c.run_open_loop({0.0}, nullptr);
  REQUIRE(s.code() == StatusCode::kUnavailable);
  REQUIRE(s.message().find("not answered within 0.3 s") != std::string::npos);
  REQUIRE(s.message().find("too slow") != std::string::npos);
  REQUIRE(t.probes.size() == 1);  // once per request, not once per loop
  const double age = c.now_s() - c.records()[0].dispatch_s;
  REQUIRE(age > 0.3);
  REQUIRE(age < 0.3 + 0.1);
}

TEST_CASE("the probe window is inside the node timeout", "[mpi][controller]") {
  REQUIRE(Controller::probe_s(10) == Approx(2.0));  // default: probed at 8 s, named by 10 s
  REQUIRE(Controller::probe_s(2) == Approx(1.0));   // half the timeout: a ping of 1 s, not 0.4 s
  REQUIRE(Controller::probe_s(4) == Approx(2.0));
  REQUIRE(Controller::probe_s(100) == Approx(2.0));
}

TEST_CASE("SIGTERM stops the run: measurements saved first, then the dead rank named",
          "[mpi][controller]") {
  FakeTransport t(2);
  std::atomic<bool> terminated{false};
  ControllerOptions o;
  o.interrupted = &terminated;
  Controller c(t, o);
  std::vector<int64_t> journal;
  size_t failed = 0;
  c.set_answer_hook([&](const RequestRecord& r) {
    if (!r.answered) {  // after the fault: every request still queued or running fails
      REQUIRE(r.outcome == Outcome::kFailed);
      ++failed;
      return;
    }
    journal.push_back(r.id);
    if (journal.size() == 4) terminated = true;  // as the SIGTERM handler does
  });
  int saved = 0;
  size_t answered_when_saved = 0;
  c.set_terminated_hook([&] {
    ++saved;
    for (const auto& r : c.records()) answered_when_saved += r.answered ? 1 : 0;
  });
  REQUIRE(c.configure({1, 1, 1}).ok());
  auto t0 = std::chrono::steady_clock::now();
  Status s = c.run_open_loop(poisson_arrivals(200, 100, 1), nullptr);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(s.code() == StatusCode::kUnavailable);
  REQUIRE(s.message() == "node rank 9 died (fake)");
  REQUIRE(took < 1.0);  // not the 10 s node timeout
  REQUIRE(saved == 1);
  REQUIRE(journal.size() == 4);
  REQUIRE(answered_when_saved == 4);
  REQUIRE(failed == c.records().size() - 4);
  REQUIRE(c.counts().balanced());
  REQUIRE(c.counts().failed == failed);
  // Later calls report the same, without saving again.
  REQUIRE(c.shutdown().ok());  // the fake's shutdown succeeds: nothing to convert
  REQUIRE(saved == 1);
}

TEST_CASE("configure rejects K larger than the cluster", "[mpi][controller]") {
  FakeTransport t(2);
  Controller c(t, {});
  Status s = c.configure({1, 4, 1});
  REQUIRE(s.code() == StatusCode::kInvalidArgument);
  REQUIRE(s.message().find("needs K = 4 nodes per request but the cluster has 2") !=
          std::string::npos);
}

TEST_CASE("emulated service times come from the profile", "[mpi][controller]") {
  Profile p;
  p.model = "m";
  p.tuples.push_back({{1, 1, 1}, 10.0, 0.0, 5, 0});
  p.tuples.push_back({{2, 1, 1}, 14.0, 0.25, 5, 0});
  ServiceSampler fixed(p, false, 1);
  REQUIRE(fixed.sample_ms({2, 1, 1}).value() == 14.0);
  REQUIRE(fixed.sample_ms({1, 2, 1}).status().code() == StatusCode::kNotFound);
  REQUIRE(fixed.check({2, 1, 1}).ok());
  REQUIRE(!fixed.check({3, 1, 1}).ok());
  ServiceSampler random(p, true, 7);
  std::vector<double> draws;
  for (int i = 0; i < 20000; ++i) draws.push_back(random.sample_ms({2, 1, 1}).value());
  TupleStats s = profiler::tuple_stats({2, 1, 1}, draws);
  REQUIRE(s.mean_ms == Approx(14.0).epsilon(0.02));
  REQUIRE(s.scv == Approx(0.25).epsilon(0.05));
}

TEST_CASE("poll planner sleeps until an answer can come, then polls finely", "[mpi][controller]") {
  const double inf = std::numeric_limits<double>::infinity();
  PollPlanner p;
  // Nothing in flight: sleep until the next arrival, at most kCoarseS, never past it.
  CHECK(p.sleep_s(10.0, inf, inf) == PollPlanner::kCoarseS);
  CHECK(p.sleep_s(10.0, inf, 10.002) == Approx(0.002));
  CHECK(p.sleep_s(10.0, inf, 9.0) == 0.0);
  // In flight but the pace is unknown (fewer than 4 answers): fine polling.
  for (int i = 0; i < 3; ++i) p.answered(0.020);
  CHECK(p.sleep_s(10.0, 9.999, inf) == PollPlanner::kFineS);
  p.answered(0.030);
  p.answered(-1.0);  // ignored
  // Answers take >= 20 ms: dispatched at 10.000, none can come before 10.016.
  CHECK(p.sleep_s(10.001, 10.0, inf) == PollPlanner::kCoarseS);
  CHECK(p.sleep_s(10.013, 10.0, inf) == Approx(0.003));
  CHECK(p.sleep_s(10.0159, 10.0, inf) == PollPlanner::kFineS);
  CHECK(p.sleep_s(10.030, 10.0, inf) == PollPlanner::kFineS);  // late: keep polling finely
  // An arrival due sooner wins over the answer bound.
  CHECK(p.sleep_s(10.001, 10.0, 10.0015) == Approx(0.0005));
  // A faster answer lowers the bound; reset forgets the pace.
  p.answered(0.005);
  CHECK(p.sleep_s(10.001, 10.0, inf) == Approx(0.003));
  p.reset();
  CHECK(p.sleep_s(10.001, 10.0, inf) == PollPlanner::kFineS);
}

TEST_CASE("rate monitor counts arrivals in its window", "[mpi][controller]") {
  RateMonitor m(1.0);
  for (int i = 0; i < 50; ++i) m.record(2.0 + i * 0.02);
  REQUIRE(m.rate_per_s(3.0) == Approx(50.0));
  REQUIRE(m.rate_per_s(4.5) == Approx(0.0));
}

TEST_CASE("rate monitor: the first window does not hang on when the tick comes", "[controller]") {
  // seed 1's first arrivals of `serf serve --load 0:4;...` (test_serve_cli_ahead_memory): a tick
  // 25 ms late read them as 28/s (2 / 0.0726 s) and a table of level 20/s switched at the start.
  RateMonitor m(1.0);
  m.record(0.0359);
  m.record(0.0726);
  CHECK(m.rate_per_s(0.05) == Approx(2.0));
  CHECK(m.rate_per_s(0.0999) == Approx(2.0));
  CHECK(m.rate_per_s(0.5) == Approx(2.0));
  // Past the first window it is the sliding count.
  CHECK(m.rate_per_s(1.05) == Approx(1.0));
}

TEST_CASE("profiler tuples and lists", "[mpi][profiler]") {
  auto tuples = profiler::profile_tuples(4, 4, {1, 2, 8});
  // K=8 > 4 nodes is skipped; per K: T=1 i<=4, T=2 i<=2, T=3 i=1, T=4 i=1 -> 8 tuples.
  REQUIRE(tuples.size() == 16);
  for (const auto& t : tuples) REQUIRE(t.service * t.intra <= 4);
  REQUIRE(profiler::parse_int_list("1,2,4", "--inter").value() == std::vector<int>{1, 2, 4});
  REQUIRE(!profiler::parse_int_list("1,0", "--inter").ok());
  TupleStats s = profiler::tuple_stats({1, 1, 1}, {1, 3});
  REQUIRE(s.mean_ms == 2.0);
  REQUIRE(s.scv == Approx(0.25));
}

TEST_CASE("pool_passes leaves out a disturbed pass and pools the rest", "[mpi][profiler]") {
  const ParallelismTuple t{1, 2, 1};
  auto pass = [](double mean, double spread) {
    profiler::PassSamples p;
    for (int k = 0; k < 20; ++k) {
      const double x = mean + spread * ((k % 5) - 2);  // mean `mean`, symmetric spread
      p.occupancy_ms.push_back(x);
      p.node_ms.push_back(x - 0.5);
    }
    return p;
  };
  SECTION("one pass is tuple_stats of its samples, passes not recorded") {
    const auto one = pass(10.0, 0.2);
    TupleStats s = profiler::pool_passes(t, {one});
    CHECK(s.mean_ms == Approx(profiler::tuple_stats(t, one.occupancy_ms).mean_ms));
    CHECK(s.scv == Approx(profiler::tuple_stats(t, one.occupancy_ms).scv));
    CHECK(s.node_ms == Approx(9.5));
    CHECK(s.samples == 20);
    CHECK(s.passes == 0);
  }
  SECTION("a pass 18 % slow (another job on the node) is left out") {
    TupleStats s = profiler::pool_passes(
        t, {pass(10.0, 0.2), pass(10.1, 0.2), pass(11.8, 0.2), pass(9.95, 0.2), pass(10.05, 0.2)});
    CHECK(s.passes == 5);
    CHECK(s.passes_kept == 4);
    CHECK(s.samples == 80);
    CHECK(s.mean_ms == Approx((10.0 + 10.1 + 9.95 + 10.05) / 4));
    CHECK(s.node_ms == Approx(s.mean_ms - 0.5));
  }
  SECTION("passes within a few percent are all kept") {
    TupleStats s = profiler::pool_passes(
        t, {pass(10.0, 0.2), pass(10.3, 0.2), pass(9.8, 0.2), pass(10.2, 0.2), pass(9.9, 0.2)});
    CHECK(s.passes_kept == 5);
    CHECK(s.mean_ms == Approx(10.04));
  }
  SECTION("a service whose pass means vary widely keeps them: the band is 3 MADs") {
    // Pass means 8..12 (a genuinely variable service): the MAD is 1, the band 4.4.
    TupleStats s = profiler::pool_passes(
        t, {pass(8.0, 1.0), pass(9.0, 1.0), pass(10.0, 1.0), pass(11.0, 1.0), pass(12.0, 1.0)});
    CHECK(s.passes_kept == 5);
    CHECK(s.mean_ms == Approx(10.0));
  }
}

TEST_CASE("stepped Poisson arrivals follow each step's rate", "[mpi][controller]") {
  auto at = stepped_arrivals({{0, 100}, {10, 1000}}, 20000, 9).value();
  REQUIRE(at.size() == 20000);
  size_t first =
      static_cast<size_t>(std::count_if(at.begin(), at.end(), [](double t) { return t < 10; }));
  REQUIRE(first == Approx(1000).epsilon(0.1));  // 100/s for 10 s
  REQUIRE(std::is_sorted(at.begin(), at.end()));
  REQUIRE(at.back() == Approx(10 + 19000 / 1000.0).epsilon(0.05));
}

namespace {

// A table of `nodes` whose stable entries are `levels` (rate up to which, configuration), in order.
ConfigurationTable table_of(int nodes,
                            const std::vector<std::pair<double, Configuration>>& levels) {
  ConfigurationTable table;
  table.nodes = nodes;
  for (const auto& [rate, c] : levels) {
    TableEntry e;
    e.rate_per_s = rate;
    e.stable = true;
    e.config = c;
    table.entries.push_back(e);
  }
  return table;
}

}  // namespace

TEST_CASE("the table hook follows the measured rate with hysteresis", "[mpi][controller]") {
  ConfigurationTable table = table_of(4, {{10, {1, 4, 1}}, {50, {1, 2, 1}}, {100, {2, 1, 1}}});
  TableEntry unstable;
  unstable.rate_per_s = 200;
  table.entries.push_back(unstable);
  SchedulerHook hook = table_hook(table, 1.0);
  REQUIRE(hook(0.0, 8) == std::optional<Configuration>(Configuration{1, 4, 1}));
  REQUIRE(!hook(0.1, 9));   // same configuration
  REQUIRE(!hook(0.5, 40));  // another one, but within the dwell time
  REQUIRE(hook(1.2, 40) == std::optional<Configuration>(Configuration{1, 2, 1}));
  REQUIRE(hook(2.5, 90) == std::optional<Configuration>(Configuration{2, 1, 1}));
  REQUIRE(!hook(4.0, 150));  // unstable level: keep what runs
  REQUIRE(!hook(5.0, 0));    // no arrivals measured yet
}

TEST_CASE("the rate band holds a configuration the rate may still need, not one it outgrew",
          "[mpi][controller]") {
  // (1,4,1) up to 140/s, (1,2,1) to 200/s, (2,1,1) to 300/s, levels every 10/s.
  std::vector<std::pair<double, Configuration>> levels;
  for (int r = 10; r <= 300; r += 10) {
    levels.push_back({r, r <= 140   ? Configuration{1, 4, 1}
                         : r <= 200 ? Configuration{1, 2, 1}
                                    : Configuration{2, 1, 1}});
  }
  const ConfigurationTable table = table_of(4, levels);
  const RateBand band{1.0, 2.0};
  REQUIRE(band.half_width(100) == Approx(20.0));
  REQUIRE(band.half_width(0) == 0);
  REQUIRE(RateBand{}.half_width(100) == 0);
  REQUIRE(RateBand{1.0, 0.0}.half_width(100) == 0);

  SchedulerHook hook = table_hook(table, 0.0, nullptr, nullptr, band);
  REQUIRE(hook(0.0, 160) == std::optional<Configuration>(Configuration{1, 2, 1}));
  // 135/s: the table's level is (1,4,1)'s, but 135 + 2 sqrt(135) = 158 reaches (1,2,1)'s.
  REQUIRE(!hook(1.0, 135));
  REQUIRE(!hook(2.0, 125));  // 125 + 22.4 = 147.4: still within (1,2,1)'s levels
  // 110 + 21 = 131: every level the band covers names (1,4,1).
  REQUIRE(hook(3.0, 110) == std::optional<Configuration>(Configuration{1, 4, 1}));
  // Up at once: (1,4,1) is no level's at or above 145/s.
  REQUIRE(hook(4.0, 145) == std::optional<Configuration>(Configuration{1, 2, 1}));
  REQUIRE(hook(5.0, 205) == std::optional<Configuration>(Configuration{2, 1, 1}));
  REQUIRE(!hook(6.0, 185));  // 185 + 27 = 212: (2,1,1) is still the level of 210/s
  REQUIRE(hook(7.0, 150) == std::optional<Configuration>(Configuration{1, 2, 1}));
  // Beyond the top level: the top entry's, up at once.
  REQUIRE(hook(8.0, 400) == std::optional<Configuration>(Configuration{2, 1, 1}));
  // A fall past two boundaries: the band holds a configuration only if it covers its levels.
  REQUIRE(hook(9.0, 130) == std::optional<Configuration>(Configuration{1, 4, 1}));

  // Without the band the same rates switch down at once.
  SchedulerHook plain = table_hook(table, 0.0);
  REQUIRE(plain(0.0, 160) == std::optional<Configuration>(Configuration{1, 2, 1}));
  REQUIRE(plain(1.0, 135) == std::optional<Configuration>(Configuration{1, 4, 1}));
}

TEST_CASE("an unstable level switches to the configuration of highest capacity, once said",
          "[mpi][controller]") {
  // Three stable levels: (1,4,1) holds 10/s at utilization 0.1 (capacity 100/s), (1,2,1) 50/s at
  // 0.25 (200/s), (2,1,1) 100/s at 0.8 (125/s); at 200/s nothing is stable.
  ConfigurationTable table = table_of(4, {{10, {1, 4, 1}}, {50, {1, 2, 1}}, {100, {2, 1, 1}}});
  const double utilization[] = {0.1, 0.25, 0.8};
  for (size_t i = 0; i < table.entries.size(); ++i) {
    table.entries[i].prediction.stable = true;
    table.entries[i].prediction.utilization = utilization[i];
  }
  TableEntry unstable;
  unstable.rate_per_s = 200;
  table.entries.push_back(unstable);
  auto best = highest_capacity(table);
  REQUIRE(best.has_value());
  REQUIRE(best->first == Configuration{1, 2, 1});
  REQUIRE(best->second == Approx(200.0));
  std::vector<OverloadNote> notes;
  SchedulerHook hook = table_hook(table, 10.0, [&](const OverloadNote& n) { notes.push_back(n); });
  REQUIRE(hook(0.0, 90) == std::optional<Configuration>(Configuration{2, 1, 1}));
  // Within the dwell time, but overloaded: the highest capacity at once (it stayed on (2,1,1)).
  REQUIRE(hook(0.5, 180) == std::optional<Configuration>(Configuration{1, 2, 1}));
  REQUIRE(notes.size() == 1);
  REQUIRE(notes[0].rate_per_s == 180);
  REQUIRE(notes[0].config == Configuration{1, 2, 1});
  REQUIRE(notes[0].capacity_per_s == Approx(200.0));
  REQUIRE(!hook(0.6, 250));  // still overloaded: already there, said once
  REQUIRE(notes.size() == 1);
  REQUIRE(!hook(0.7, 40));  // back within the table: its level names (1,2,1), which runs
  REQUIRE(hook(11.0, 300) == std::nullopt);  // a new episode: said again, nothing to switch
  REQUIRE(notes.size() == 2);
}

namespace {

Prediction predicted(double latency_ms, double utilization) {
  Prediction p;
  p.stable = utilization < 1;
  p.latency_ms = latency_ms;
  p.utilization = utilization;
  return p;
}

// (1,1,2) up to 10/s, (2,1,1) above (as imagenet1k on 2 cores), stable to 40/s.
ConfigurationTable two_level_table() { return table_of(1, {{10, {1, 1, 2}}, {40, {2, 1, 1}}}); }

SwitchRecord measured_switch(Configuration from, Configuration to, double drain_ms,
                             double configure_ms) {
  SwitchRecord s;
  s.from = from;
  s.to = to;
  s.drain_ms = drain_ms;
  s.configure_ms = configure_ms;
  return s;
}

}  // namespace

TEST_CASE("the switch cost estimate: per pair, else per target, else over all", "[controller]") {
  SwitchCostEstimate e;
  const Configuration a{1, 1, 2}, b{2, 1, 1}, c{1, 1, 1};
  REQUIRE(!e.cost_s(a, b));  // nothing measured
  e.observe(measured_switch(a, b, 20, 180));
  e.observe(measured_switch(a, b, 0, 300));
  e.observe(measured_switch(b, c, 0, 10));
  REQUIRE(*e.cost_s(a, b) == Approx(0.25));                    // the pair's mean
  REQUIRE(*e.cost_s(c, b) == Approx(0.25));                    // no such pair: the switches to b
  REQUIRE(*e.cost_s(b, a) == Approx((0.2 + 0.3 + 0.01) / 3));  // nothing to a: every switch
  for (int k = 0; k < 20; ++k) e.observe(measured_switch(a, b, 0, 100));
  REQUIRE(*e.cost_s(a, b) == Approx(0.1));  // the last kKept only
}

TEST_CASE("a costly switch with little gain is declined; a large gain or an old wish takes it",
          "[controller]") {
  const Configuration t2{1, 1, 2}, c2{2, 1, 1};
  // At 20/s: (1,1,2) 26 ms, (2,1,1) 25 ms at utilization 0.25; at 30/s (1,1,2) 120 ms.
  SwitchPredictor predict = [&](const Configuration& config,
                                double rate) -> std::optional<Prediction> {
    if (config == c2) return predicted(25, 0.25);
    return rate > 25 ? predicted(120, 0.9) : predicted(26, 0.5);
  };
  SwitchGate gate(predict);
  gate.learn({measured_switch(c2, t2, 0, 200), measured_switch(t2, c2, 0, 200)});
  gate.wish(100.0, c2);
  // Little gain: 20/s * 1 ms * 1 s = 0.02 request-s, against 20 * 0.2^2 / (2 * 0.75) = 0.533.
  SwitchVerdict v = gate.judge(101.0, 20, t2, c2);
  REQUIRE(!v.take);
  REQUIRE(v.switch_s == Approx(0.2));
  REQUIRE(v.dwell_s == Approx(1.0));
  REQUIRE(v.gain_request_s == Approx(0.02));
  REQUIRE(v.cost_request_s == Approx(20 * 0.04 / 1.5));
  REQUIRE(gate.declined() == 1);
  REQUIRE(!gate.judge(110.0, 20, t2, c2).take);  // 0.2 request-s after 10 s: still less
  REQUIRE(gate.declined() == 1);                 // one wish, declined once
  // The wish lasted long enough to repay the switch (ski rental): 27 s * 0.02 > 0.533.
  REQUIRE(gate.judge(127.0, 20, t2, c2).take);
  // A large gain at once: 30/s * 95 ms * 1 s = 2.85 request-s against 30 * 0.04 / 1.5 = 0.8.
  gate.wish(130.0, t2);
  gate.wish(131.0, c2);
  v = gate.judge(132.0, 30, t2, c2);
  REQUIRE(v.take);
  // The past wishes ((2,1,1) for 30 s, (1,1,2) for 1 s) now set the expected dwell: their mean.
  REQUIRE(v.dwell_s == Approx(15.5));
}

TEST_CASE("the gate takes a switch it cannot weigh: nothing measured, no prediction, unstable",
          "[controller]") {
  const Configuration t2{1, 1, 2}, c2{2, 1, 1};
  SwitchGate none([](const Configuration&, double) { return std::optional<Prediction>(); });
  none.wish(0, c2);
  REQUIRE(none.judge(0.5, 20, t2, c2).take);  // no switch measured: taken, to learn its cost
  none.learn({measured_switch(t2, c2, 0, 500)});
  REQUIRE(none.judge(0.5, 20, t2, c2).take);  // no prediction: the table's word
  SwitchGate unstable([&](const Configuration& config, double) {
    return std::optional<Prediction>(config == t2 ? predicted(0, 1.2) : predicted(25, 0.9));
  });
  unstable.learn({measured_switch(t2, c2, 0, 500)});
  unstable.wish(0, c2);
  REQUIRE(unstable.judge(0.0, 20, t2, c2).take);  // the running one cannot carry the load
  REQUIRE(none.declined() == 0);
  REQUIRE(unstable.declined() == 0);
}

TEST_CASE("the table hook asks the gate: a measured costly switch of little gain is not taken",
          "[controller]") {
  FakeTransport t(1);
  t.configure_s = 0.1;  // each switch costs about 100 ms (the fake nodes rebuild slowly)
  Controller c(t, {});
  const Configuration t2{1, 1, 2}, c2{2, 1, 1};
  REQUIRE(c.configure(t2).ok());
  REQUIRE(c.configure(c2).ok());
  REQUIRE(c.configure(t2).ok());
  REQUIRE(c.switches().size() == 2);
  REQUIRE(c.switches().back().total_ms() >= 100);
  double gain_ms = 1;  // what (2,1,1) saves a request over (1,1,2)
  SwitchPredictor predict = [&](const Configuration& config, double) -> std::optional<Prediction> {
    return config == c2 ? predicted(25, 0.25) : predicted(25 + gain_ms, 0.5);
  };
  auto gate = std::make_shared<SwitchGate>(predict);
  std::vector<SwitchVerdict> said;
  SchedulerHook hook = table_hook(
      two_level_table(), 0.0, nullptr,
      switch_filter(
          gate, c,
          [&](double, const Configuration& from, const Configuration& to, const SwitchVerdict& v) {
            REQUIRE(from == t2);
            REQUIRE(to == c2);
            said.push_back(v);
          }));
  // The hook's first word is the table's configuration (the controller keeps it: it runs).
  REQUIRE(hook(0.0, 5) == std::optional<Configuration>(t2));
  // At 20/s the table's level is 40/s, where it is weighed. (2,1,1) saves 1 ms a request; the
  // expected dwell is the last wish's 1 s: 0.04 request-s, against at least
  // 40 * 0.1^2 / (2 * 0.75) = 0.27 for the switch.
  REQUIRE(!hook(1.0, 20));
  REQUIRE(!hook(2.0, 20));
  REQUIRE(gate->declined() == 1);
  REQUIRE(said.size() == 1);  // said once per wish
  REQUIRE(said[0].switch_s >= 0.1);
  REQUIRE(said[0].rate_per_s == 40);  // the level's rate, not the measured 20/s
  REQUIRE(gate->last_cost_s() >= 0.1);
  gain_ms = 200;  // (1,1,2) saturates: 40/s * 0.2 s * 1 s = 8 request-s
  REQUIRE(hook(2.0, 20) == std::optional<Configuration>(c2));
}

TEST_CASE("a cold first switch does not inflate the estimate of a warm one", "[controller]") {
  // The fake nodes' first preparation of T = 2 takes 300 ms, every later switch 20 ms.
  FakeTransport t(2);
  Controller c(t, {});
  const Configuration c2{2, 1, 1}, t2{1, 1, 2}, c1{1, 1, 1}, t4{1, 1, 4};
  REQUIRE(c.configure(c2).ok());  // the start: (K, T, b) = (1, 1, 1) prepared
  t.configure_s = 0.3;
  REQUIRE(c.configure(t2).ok());  // cold: T = 2 never prepared
  SwitchPredictor predict = [&](const Configuration& config, double) -> std::optional<Prediction> {
    return config == t2 ? predicted(26, 0.5) : predicted(25, 0.25);
  };
  SwitchGate gate(predict);
  gate.learn(c.switches());
  // Back to (2,1,1) is warm and no warm switch was measured: taken, not weighed at 300 ms.
  SwitchVerdict v = gate.judge(1.0, 20, t2, c2);
  REQUIRE(v.take);
  REQUIRE(!v.cold);
  REQUIRE(v.reason.find("no warm switch") != std::string::npos);
  t.configure_s = 0.02;
  REQUIRE(c.configure(c2).ok());
  REQUIRE(c.configure(t2).ok());
  gate.learn(c.switches());
  REQUIRE(c.switches().front().total_ms() >= 300);
  // Warm switches estimate warm ones only: C is about 20 ms, not the mean with the cold 300 ms.
  gate.wish(10.0, c2);
  v = gate.judge(11.0, 20, t2, c2);
  REQUIRE(!v.cold);
  REQUIRE(v.switch_s >= 0.02);
  REQUIRE(v.switch_s < 0.15);
  // (1,1,1) differs from (2,1,1) in c only: the nodes prepare nothing new, so it is warm too.
  REQUIRE(!gate.judge(11.0, 20, t2, c1).cold);
  // A never-prepared T = 4 is cold, and the cold switch's cost estimates it.
  v = gate.judge(11.0, 20, t2, t4);
  REQUIRE(v.cold);
  REQUIRE(v.switch_s >= 0.3);
}

TEST_CASE("a switch's kind is what its nodes reported; prepared ahead is not cold",
          "[controller]") {
  FakeTransport t(2);
  Controller c(t, {});
  const Configuration c1{1, 1, 1}, t2{1, 1, 2}, k2{1, 2, 1}, t4{1, 1, 4};
  REQUIRE(c.configure(c1).ok());
  // The nodes held T = 2's kernels from the start: the record says so, whatever it cost.
  t.preparation = Preparation::kHeld;
  t.configure_s = 0.05;
  REQUIRE(c.configure(t2).ok());
  REQUIRE(c.switches().back().preparation == Preparation::kHeld);
  t.preparation = Preparation::kCold;
  t.configure_s = 0.3;
  REQUIRE(c.configure(k2).ok());
  REQUIRE(c.switches().back().preparation == Preparation::kCold);
  SwitchPredictor predict = [&](const Configuration&, double) -> std::optional<Prediction> {
    return predicted(25, 0.25);
  };
  SwitchGate gate(predict);
  gate.prepared_ahead({c1, t2});
  gate.learn(c.switches());
  // The held first switch to T = 2 is warm (50 ms), the reported cold one cold (300 ms).
  SwitchVerdict v = gate.judge(1.0, 20, c1, t2);
  REQUIRE(!v.cold);
  REQUIRE(v.switch_s >= 0.05);
  REQUIRE(v.switch_s < 0.2);
  v = gate.judge(1.0, 20, c1, t4);  // never prepared, not ahead: cold
  REQUIRE(v.cold);
  REQUIRE(v.switch_s >= 0.3);
  // Emulated nodes say nothing: a first switch to a configuration is cold, as before.
  t.preparation = Preparation::kUnknown;
  t.configure_s = 0;
  REQUIRE(c.configure(t4).ok());
  REQUIRE(c.switches().back().preparation == Preparation::kUnknown);
}

TEST_CASE("the gain is the running configuration's observed latency against the wanted's",
          "[controller]") {
  const Configuration t2{1, 1, 2}, c2{2, 1, 1};
  // The profile promises (1,1,2) 26 ms and (2,1,1) 25 ms: 1 ms a request, never worth 200 ms.
  SwitchPredictor predict = [&](const Configuration& config, double) -> std::optional<Prediction> {
    return config == t2 ? predicted(26, 0.5) : predicted(25, 0.25);
  };
  SwitchGate gate(predict);
  SwitchRecord start = measured_switch(c2, t2, 0, 768);  // cold, at 0 s
  gate.learn({start, measured_switch(t2, c2, 0, 200), measured_switch(c2, t2, 0, 200)});
  auto answer = [](double arrival_s, double latency_ms, Configuration config) {
    RequestRecord r;
    r.arrival_s = arrival_s;
    r.done_s = arrival_s + latency_ms / 1e3;
    r.config = config;
    r.answered = true;
    r.outcome = Outcome::kAnswered;
    return r;
  };
  gate.wish(20.0, c2);
  // Too few answers seen: the model's 1 ms gain, declined (0.02 against 0.533 request-s).
  for (int k = 0; k < 5; ++k) gate.observe(answer(19.0 + 0.1 * k, 300, t2));
  SwitchVerdict v = gate.judge(21.0, 20, t2, c2);
  REQUIRE(!v.take);
  REQUIRE(!v.observed);
  REQUIRE(v.running_ms == Approx(26));
  // The loaded host made (1,1,2) answer in 300 ms: 20/s * 275 ms * 1 s = 5.5 request-s, taken.
  for (int k = 5; k < 20; ++k) gate.observe(answer(19.0 + 0.1 * k, 300, t2));
  // Answers of another configuration and a failed one do not count.
  for (int k = 0; k < 20; ++k) gate.observe(answer(19.0 + 0.05 * k, 1, c2));
  RequestRecord failed = answer(20.5, 1, t2);
  failed.answered = false;
  failed.outcome = Outcome::kFailed;
  gate.observe(failed);
  v = gate.judge(21.0, 20, t2, c2);
  REQUIRE(v.take);
  REQUIRE(v.observed);
  REQUIRE(v.running_ms == Approx(300));
  REQUIRE(v.gain_request_s == Approx(20 * 0.275 * 1.0));
  // Answers older than the window, or that arrived before the switch to the running
  // configuration ended, are not its latency now.
  REQUIRE(!gate.observed_ms(21.0 + SwitchGate::kObservedWindowS + 3, t2));
  SwitchRecord later = measured_switch(t2, c2, 0, 10);
  later.at_s = 30;
  gate.learn({start, measured_switch(t2, c2, 0, 200), measured_switch(c2, t2, 0, 200), later});
  for (int k = 0; k < 20; ++k) gate.observe(answer(29.0 + 0.01 * k, 500, c2));
  REQUIRE(!gate.observed_ms(30.5, c2));
}

TEST_CASE("a node's message is copied whole, or cut with a visible mark", "[controller]") {
  serf::serve::NodeReply reply;
  reply.set_message("pinned to cores 0-1");
  CHECK(std::string(reply.message) == "pinned to cores 0-1");
  const std::string fits(sizeof(reply.message) - 1, 'x');  // exactly the field: not cut
  reply.set_message(fits);
  CHECK(std::string(reply.message) == fits);
  const std::string longer = fits + "y";
  reply.set_message(longer);
  const std::string got = reply.message;
  CHECK(got.size() == sizeof(reply.message) - 1);
  CHECK(got.substr(got.size() - 3) == "...");
  CHECK(got.substr(0, got.size() - 3) == longer.substr(0, got.size() - 3));
  serf::serve::RunResult result;
  result.set_message(std::string(500, 'e'));
  CHECK(std::string(result.message).size() == sizeof(result.message) - 1);
  CHECK(std::string(result.message).substr(sizeof(result.message) - 4) == "...");
}
