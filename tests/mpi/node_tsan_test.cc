// The node's slot threads and watcher and the controller's dispatcher under ThreadSanitizer
// (CTest test_node_tsan, label tsan): the runtime's own sources built with -fsanitize=thread,
// emulated nodes under mpiexec (real nodes run the same slot threads; only the worker inside
// sleeps instead of computing). Open MPI is not instrumented: tests/mpi/tsan.supp names the Open
// MPI functions whose accesses it orders with atomics TSan cannot see, each from a report read.
// A race in the node (slot threads, reconfiguration, the watcher answering pings) or the
// controller makes TSan report and the rank exit non-zero (halt_on_error).
#include <catch2/catch.hpp>
#include <map>
#include <memory>

#include "mpi/runtime.h"
#include "mpi_test_env.h"

using namespace serf;
using namespace serf::mpi;
using namespace serf::serve;
using namespace serf::mpi::testing;  // environment, AbortOnFailure

namespace {

Profile flat_profile() {
  return emulated_test_profile([](int, int, int) { return 2.0; }, 0.0);
}

}  // namespace

TEST_CASE("slot threads, reconfiguration and pings race-free under load", "[mpi][tsan]") {
  Environment& env = environment();
  REQUIRE(env.size() >= 3);
  auto comms = make_runtime_comms(60);
  REQUIRE(comms.ok());
  if (env.rank() != 0) {
    REQUIRE(run_node(*comms, {2, false, 500e-6}, emulated_worker_factory()).ok());
    return;
  }
  AbortOnFailure guard;  // a failed REQUIRE tears the job down instead of leaving the nodes waiting
  MpiTransport transport(*comms, 60.0);
  Controller controller(transport, {});
  ServiceSampler sampler(flat_profile(), false, 1);
  controller.set_sampler(&sampler);
  REQUIRE(controller.configure({2, 1, 1}).ok());
  const int nodes = env.size() - 1;
  // Every configuration kind: two slots per unit, units of 2 and of every node, two threads.
  std::vector<Configuration> plan = {{1, 2, 1}, {2, nodes >= 4 ? 4 : 2, 1}, {1, 1, 2}, {2, 1, 1}};
  size_t next = 0;
  auto hook = [&](double now_s, double) -> std::optional<Configuration> {
    if (next < plan.size() && now_s > 0.2 * static_cast<double>(next + 1)) return plan[next++];
    return std::nullopt;
  };
  Status run = controller.run_open_loop(poisson_arrivals(300, 300, 5), hook);
  REQUIRE(run.ok());
  REQUIRE(next == plan.size());
  std::map<int64_t, int> answered;
  for (const RequestRecord& r : controller.records()) answered[r.id] += r.answered ? 1 : 0;
  REQUIRE(answered.size() == 300);
  for (const auto& [id, n] : answered) REQUIRE(n == 1);
  // The watcher threads answer pings while the slot threads idle.
  for (int u = 0; u < controller.units(); ++u) REQUIRE(transport.probe(u, 5.0).ok());
  REQUIRE(controller.shutdown().ok());
  guard.done = true;
}
