// The runtime under mpiexec (5 ranks: a controller and 4 emulated nodes): switching configuration
// under load several times answers every request exactly once, and the closed loop reproduces
// the profiled service times.
#include "mpi/runtime.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "mpi_test_env.h"

using namespace serf;
using namespace serf::mpi;
using namespace serf::serve;
using namespace serf::mpi::testing;  // environment, AbortOnFailure

namespace {

Profile test_profile() {
  return emulated_test_profile([](int i, int k, int t) { return 4.0 + 2.0 * i / k / t; }, 0.1);
}

}  // namespace

TEST_CASE("switching configuration under load answers every request once", "[mpi]") {
  Environment& env = environment();
  REQUIRE(env.size() >= 3);
  auto comms = make_runtime_comms();
  REQUIRE(comms.ok());
  if (env.rank() != 0) {
    REQUIRE(run_node(*comms, {2, false}, emulated_worker_factory()).ok());
    return;
  }
  // A failed REQUIRE on rank 0 must not leave the nodes waiting: tear the job down instead.
  AbortOnFailure guard;
  MpiTransport transport(*comms, 10.0);
  Controller controller(transport, {});
  ServiceSampler sampler(test_profile(), false, 3);
  controller.set_sampler(&sampler);
  REQUIRE(controller.configure({1, 1, 1}).ok());

  // Closed loop first: the measured service time is the profiled one plus the messaging.
  std::vector<double> occupancy;
  auto samples = controller.run_closed_loop(1, 8, &occupancy);
  REQUIRE(samples.ok());
  REQUIRE(samples->size() == 8);
  // The slot is held from dispatch to answer: at least what the node measured.
  REQUIRE(occupancy.size() == 8);
  for (size_t k = 0; k < occupancy.size(); ++k) CHECK(occupancy[k] >= (*samples)[k]);
  // (i=1, K=1, T=1) sleeps 6 ms. The machine is shared, so one sample gets no tight upper bound;
  // the median bound catches gross errors only.
  std::vector<double> sorted = *samples;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(sorted.front() >= 6.0);
  REQUIRE(sorted[sorted.size() / 2] < 15.0);

  const int nodes = env.size() - 1;
  std::vector<Configuration> plan = {
      {2, 1, 1}, {1, 2, 1}, {2, std::min(nodes, 4) >= 4 ? 4 : 2, 1}, {1, 2, 2}, {2, 1, 1}};
  size_t next = 0;
  auto hook = [&](double now_s, double) -> std::optional<Configuration> {
    if (next < plan.size() && now_s > 0.15 * static_cast<double>(next + 1)) return plan[next++];
    return std::nullopt;
  };
  const size_t before = controller.records().size();
  Status run = controller.run_open_loop(poisson_arrivals(400, 400, 11), hook);
  REQUIRE(run.ok());
  CHECK(next == plan.size());
  CHECK(controller.switches().size() == plan.size());
  std::map<int64_t, int> seen;
  for (size_t r = before; r < controller.records().size(); ++r) {
    const RequestRecord& rec = controller.records()[r];
    REQUIRE(rec.answered);
    seen[rec.id]++;
    const double profiled_ms = 4.0 + 2.0 * rec.running / rec.config.inter / rec.config.intra;
    REQUIRE(rec.service_ms >= profiled_ms - 0.01);
    REQUIRE(rec.latency_ms() >= rec.service_ms);
  }
  REQUIRE(seen.size() == 400);
  for (const auto& [id, n] : seen) REQUIRE(n == 1);
  for (const SwitchRecord& s : controller.switches()) {
    WARN("switch " << to_string(s.from) << " -> " << to_string(s.to) << ": drain " << s.drain_ms
                   << " ms, reconfigure " << s.configure_ms << " ms");
    REQUIRE(s.configure_ms < 2000);
  }
  REQUIRE(controller.shutdown().ok());
  guard.done = true;
}

TEST_CASE("parse_cpu_list reads Linux cpulists and refuses malformed ones", "[mpi]") {
  CHECK(parse_cpu_list("0") == std::vector<int>{0});
  CHECK(parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("2-2") == std::vector<int>{2});
  for (const char* bad : {"", "\n", "-1", "3-", "3-1", "1,,2", "x", "0-3x", "1 2", "99999999999"}) {
    INFO(bad);
    CHECK(parse_cpu_list(bad).empty());
  }
}

TEST_CASE("an idle slot sleeps at most 4 % of its last service between polls", "[mpi]") {
  const double max_s = 200e-6;
  CHECK(idle_poll_after(max_s, 0) == max_s);  // no request served yet: the maximum
  CHECK(idle_poll_after(max_s, -1) == max_s);
  CHECK(idle_poll_after(max_s, std::nan("")) == max_s);
  CHECK(idle_poll_after(max_s, 0.5e-3) == Approx(20e-6));  // cifar10: 0.5 ms -> 20 us
  CHECK(idle_poll_after(max_s, 1e-3) == Approx(40e-6));
  CHECK(idle_poll_after(max_s, 1e-5) == Approx(20e-6));   // never below 20 us
  CHECK(idle_poll_after(max_s, 16e-3) == Approx(max_s));  // imagenet1k: 16 ms keeps 200 us
  CHECK(idle_poll_after(5e-6, 1e-3) == Approx(5e-6));     // --idle-poll-us below 20 us holds
  CHECK(idle_poll_after(2e-3, 20e-3) == Approx(0.8e-3));  // a raised maximum: 4 % of 20 ms
}
