// simulate: the discrete-event simulator of a cluster of serving units (serf/sim).
// Thin: the shared flags (cli/flags.h), validate() of the configuration, serf/sim, serf/io's
// report. An unstable load prints its result ("stable": false) and exits 3, as in predict.
#include <iostream>
#include <string>

#include "cli/command.h"
#include "cli/flags.h"
#include "serf/io/queue_report.h"
#include "serf/sim/simulator.h"

namespace serf::cli {
namespace {

struct SimulateFlags {
  ProfileFlag profile;
  ConfigurationFlags configuration;
  double rate_per_s = 0;
  int64_t requests = 1000000;
  int nodes = 0;  // 0: the profile's hardware.nodes
  std::string semantics = "start";
  ArrivalFlags arrivals;
  double max_batch_delay_us = 0;
  uint64_t seed = 1;
  bool json = false;
};

constexpr int64_t kMaxRequests = 1000000000;  // about 2 minutes of simulation

Status run_simulate(const SimulateFlags& f) {
  SERF_ASSIGN_OR_RETURN(Profile profile, f.profile.load());
  const Configuration& config = f.configuration.config;
  const int nodes = f.nodes > 0 ? f.nodes : profile.hardware.nodes;
  SERF_RETURN_IF_ERROR(validate(config, {nodes, profile.hardware.cores_per_node}));
  sim::SimulationOptions o;
  if (config.batch > 1) {
    SERF_ASSIGN_OR_RETURN(o.batching, service_table(profile, config));
    o.max_batch_delay_ms = f.max_batch_delay_us / 1000.0;
    if (f.semantics != "start") {
      return InvalidArgument("--semantics " + f.semantics +
                             ": batches (--batch > 1) are simulated with start semantics only");
    }
  } else {
    SERF_ASSIGN_OR_RETURN(o.levels, service_levels(profile, config));
    if (f.max_batch_delay_us > 0) {
      return InvalidArgument("--max-batch-delay-us needs --batch > 1 (a batch to wait for)");
    }
  }
  o.units = nodes / config.inter;
  SERF_ASSIGN_OR_RETURN(o.semantics, sim::parse_service_semantics(f.semantics));
  SERF_ASSIGN_OR_RETURN(ArrivalFlags::Resolved arrivals, f.arrivals.resolve());
  o.arrival_kind = arrivals.kind;
  o.arrival_scv = arrivals.scv;
  o.rate_per_s = f.rate_per_s;
  o.requests = f.requests;
  o.seed = f.seed;
  auto result = sim::simulate(o);
  const bool unstable = !result.ok() && result.status().code() == StatusCode::kInfeasible;
  if (!result.ok() && !unstable) return result.status().with_context("simulate");
  const io::SimulationReport report{config,          nodes, f.semantics,
                                    f.arrivals.kind, &o,    result.ok() ? &*result : nullptr};
  std::cout << (f.json ? io::simulation_json(report).dump(2) + "\n" : io::simulation_text(report));
  if (!unstable) return Status::Ok();
  std::cout.flush();  // the result first, then main's one-line error on stderr
  return result.status();
}

}  // namespace

void register_sim_commands(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<SimulateFlags>();
  auto* sub = app.add_subcommand(
      "simulate",
      "Simulate a cluster of floor(N/K) serving units (c slots, FIFO, random routing) with the\n"
      "profile's state-dependent service times; prints mean, percentiles and a 95% CI\n"
      "(exit 3 when the load is unstable).");
  f->profile.add(sub, "profile file (serf-profile/1 JSON)");
  f->configuration.add(sub);
  sub->add_option("--rate", f->rate_per_s, "cluster-wide arrival rate (requests/s)")
      ->check(positive_finite())
      ->required();
  sub->add_option("--requests", f->requests,
                  "requests to simulate (count; the first 10% are warm-up)")
      ->check(int_range(1, kMaxRequests))
      ->capture_default_str();
  add_nodes(sub, &f->nodes, "cluster size N (nodes; default: the profile's hardware.nodes)");
  sub->add_option("--semantics", f->semantics,
                  "start: service time fixed at start by the number running; shared: each running "
                  "request advances at rate 1/mean_ms(n)")
      ->capture_default_str();
  f->arrivals.add(sub, "");
  sub->add_option("--max-batch-delay-us", f->max_batch_delay_us,
                  "with --batch: a free slot waits up to this long (microseconds) for b requests "
                  "before it serves fewer (default 0: never waits)")
      ->check(finite_range(0, 6e10))
      ->capture_default_str();
  add_seed(sub, &f->seed, "random seed (integer; same seed, same result)")->capture_default_str();
  add_json(sub, &f->json);
  registry.add(sub, [f] { return run_simulate(*f); });
}

}  // namespace serf::cli
