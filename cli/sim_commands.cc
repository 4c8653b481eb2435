// simulate: the discrete-event simulator of a cluster of serving units (serf/sim).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "serf/io/profile_io.h"
#include "serf/sim/simulator.h"

namespace serf::cli {
namespace {

struct SimulateFlags {
  std::string profile;
  Configuration config;
  double rate_per_s = 0;
  int64_t requests = 1000000;
  int nodes = 0;  // 0: the profile's hardware.nodes
  std::string semantics = "start";
  std::string arrivals = "poisson";
  double arrival_scv = -1;  // -1: the process's own (1 Poisson, 0 deterministic)
  uint64_t seed = 1;
  bool json = false;
};

constexpr int kMaxNodes = 1000000;

Status run_simulate(const SimulateFlags& f) {
  SERF_ASSIGN_OR_RETURN(Profile profile, io::load_profile(f.profile));
  constexpr int64_t kMaxRequests = 1000000000;  // about 2 minutes of simulation
  if (f.requests > kMaxRequests) {
    return InvalidArgument("--requests " + std::to_string(f.requests) + ": at most " +
                           std::to_string(kMaxRequests));
  }
  const int nodes = f.nodes > 0 ? f.nodes : profile.hardware.nodes;
  if (f.config.inter < 1 || f.config.intra < 1 || f.config.service < 1) {
    return InvalidArgument("--service, --inter and --intra must be >= 1");
  }
  if (f.config.inter > nodes) {
    return InvalidArgument("--inter " + std::to_string(f.config.inter) + " is more than the " +
                           std::to_string(nodes) + " nodes; lower --inter or raise --nodes");
  }
  sim::SimulationOptions o;
  SERF_ASSIGN_OR_RETURN(o.levels, service_levels(profile, f.config));
  o.units = nodes / f.config.inter;
  SERF_ASSIGN_OR_RETURN(o.semantics, sim::parse_service_semantics(f.semantics));
  SERF_ASSIGN_OR_RETURN(o.arrival_kind, parse_arrival_kind(f.arrivals));
  o.arrival_scv = f.arrival_scv;
  if (o.arrival_kind == ArrivalKind::kDeterministic && f.arrival_scv > 0) {
    return InvalidArgument(
        "deterministic arrivals have SCV 0; use --arrivals gamma for --arrival-scv " +
        std::to_string(f.arrival_scv));
  }
  if (f.arrival_scv < 0) {
    if (o.arrival_kind == ArrivalKind::kGamma) {
      return InvalidArgument("--arrivals gamma needs --arrival-scv X (X > 0; 1 is Poisson)");
    }
    o.arrival_scv = o.arrival_kind == ArrivalKind::kDeterministic ? 0.0 : 1.0;
  }
  o.rate_per_s = f.rate_per_s;
  o.requests = f.requests;
  o.seed = f.seed;
  auto result = sim::simulate(o);
  if (!result.ok()) {
    // An unstable load has no steady state: say so (exit 2), in JSON too, and print no latency.
    if (result.status().code() == StatusCode::kInfeasible) {
      if (f.json) {
        std::cout << nlohmann::json{{"stable", false}, {"utilization", sim::offered_utilization(o)}}
                         .dump(2)
                  << "\n";
      }
      return InvalidArgument(result.status().message());
    }
    return result.status().with_context("simulate");
  }
  const sim::SimulationResult& r = *result;
  if (f.json) {
    nlohmann::json j = {
        {"stable", true},
        {"configuration",
         {{"service", f.config.service}, {"inter", f.config.inter}, {"intra", f.config.intra}}},
        {"nodes", nodes},
        {"units", o.units},
        {"rate", f.rate_per_s},
        {"utilization", r.utilization},
        {"semantics", f.semantics},
        {"arrivals", f.arrivals},
        {"arrival_scv", o.arrival_scv},
        {"seed", f.seed},
        {"requests", r.requests},
        {"latency_ms", r.latency_ms},
        {"wait_ms", r.wait_ms},
        {"service_ms", r.service_ms},
        {"p50_ms", r.p50_ms},
        {"p90_ms", r.p90_ms},
        {"p99_ms", r.p99_ms},
        {"p999_ms", r.p999_ms},
        {"wait_p99_ms", r.wait_p99_ms},
        {"wait_probability", r.wait_probability},
        {"latency_ci95_ms", r.latency_ci95_ms}};
    std::cout << j.dump(2) << "\n";
    return Status::Ok();
  }
  std::printf("configuration %s on %d nodes: %d units, %.6g requests/s (%.3g per unit), rho %.4f\n",
              to_string(f.config).c_str(), nodes, o.units, f.rate_per_s, f.rate_per_s / o.units,
              r.utilization);
  std::printf("simulated %lld requests (%s service, %s arrivals, seed %llu), %.4g s\n",
              static_cast<long long>(r.requests), f.semantics.c_str(), f.arrivals.c_str(),
              static_cast<unsigned long long>(f.seed), r.simulated_s);
  std::printf("latency  mean %.4f ms +- %.4f (95%% CI)  wait %.4f ms  service %.4f ms\n",
              r.latency_ms, r.latency_ci95_ms, r.wait_ms, r.service_ms);
  std::printf("latency  p50 %.4f  p90 %.4f  p99 %.4f  p99.9 %.4f ms\n", r.p50_ms, r.p90_ms,
              r.p99_ms, r.p999_ms);
  std::printf("queued   %.2f%% of requests, wait p99 %.4f ms\n", 100 * r.wait_probability,
              r.wait_p99_ms);
  return Status::Ok();
}

}  // namespace

void register_sim_commands(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<SimulateFlags>();
  auto* sub = app.add_subcommand(
      "simulate",
      "Simulate a cluster of floor(N/K) serving units (c slots, FIFO, random routing) with the\n"
      "profile's state-dependent service times; prints mean, percentiles and a 95% CI.");
  sub->add_option("--profile", f->profile, "profile file (serf-profile/1 JSON)")->required();
  sub->add_option("--service", f->config.service,
                  "service parallelism c (requests at once per unit)")
      ->required();
  sub->add_option("--inter", f->config.inter, "inter-node parallelism K (nodes per request)")
      ->required();
  sub->add_option("--intra", f->config.intra, "intra-node parallelism T (threads per node)")
      ->required();
  sub->add_option("--rate", f->rate_per_s, "cluster-wide arrival rate (requests/s)")->required();
  sub->add_option("--requests", f->requests,
                  "requests to simulate (count; the first 10% are warm-up)")
      ->capture_default_str();
  sub->add_option("--nodes", f->nodes,
                  "cluster size N (nodes; default: the profile's hardware.nodes)")
      ->check(finite_range(1, kMaxNodes));
  sub->add_option("--semantics", f->semantics,
                  "start: service time fixed at start by the number running; shared: each running "
                  "request advances at rate 1/mean_ms(n)")
      ->capture_default_str();
  sub->add_option("--arrivals", f->arrivals, "arrival process: poisson, gamma or deterministic")
      ->capture_default_str();
  sub->add_option("--arrival-scv", f->arrival_scv,
                  "squared coefficient of variation of inter-arrival gaps (dimensionless; gamma)")
      ->check(finite_range(0.0, 1e4));
  sub->add_option("--seed", f->seed, "random seed (integer; same seed, same result)")
      ->check(unsigned_integer())
      ->capture_default_str();
  sub->add_flag("--json", f->json, "print one JSON object");
  registry.add(sub, [f] { return run_simulate(*f); });
}

}  // namespace serf::cli
