// predict, plan, size, capacity: the queueing core's commands (issue 2).
// Thin: parse flags, validate them into one-line errors, call serf/core, print.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/tail_flags.h"
#include "serf/core/planner.h"
#include "serf/core/rate_spec.h"
#include "serf/core/sizing.h"
#include "serf/io/profile_io.h"
#include "serf/io/table_io.h"

namespace serf::cli {

namespace {

using nlohmann::json;

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}
std::string ms(double x) { return fmt("%.1f", x) + " ms"; }
// Rates for people: 4 significant digits, but never an exponent for large rates.
std::string rate_num(double x) { return x >= 1000 ? fmt("%.0f", x) : fmt("%.4g", x); }
std::string rate_text(double x) { return rate_num(x) + " requests/s"; }

// Flags every queue command shares.
struct CommonFlags {
  std::string profile;
  std::string queue = "md-interf";
  bool json = false;
  int nodes = 0;
  CLI::Option* nodes_opt = nullptr;

  void add(CLI::App* sub, bool with_nodes, bool with_json) {
    sub->add_option("--profile", profile,
                    "profile of the model's parallelism tuples (serf-profile/1 JSON)")
        ->required();
    sub->add_option("--queue", queue,
                    "queueing model: " + queue_kind_names() + " (default md-interf, the paper's)");
    if (with_nodes) {
      nodes_opt = sub->add_option("--nodes", nodes,
                                  "nodes in the cluster (default: the profile's hardware.nodes)");
    }
    if (with_json) sub->add_flag("--json", json, "print one JSON object instead of text");
  }

  // Loads the profile, resolves the queue model and the node count.
  Status load(Profile* p, QueueKind* kind, int* n) const {
    auto loaded = io::load_profile(profile);
    if (!loaded.ok()) return loaded.status();
    *p = std::move(loaded).value();
    auto k = parse_queue_kind(queue);
    if (!k.ok()) return k.status().with_context("--queue");
    *kind = *k;
    if (nodes_opt != nullptr && nodes_opt->count() > 0 && nodes < 1) {
      return InvalidArgument("--nodes must be >= 1 (got " + std::to_string(nodes) + ")");
    }
    auto resolved = resolve_nodes(*p, nodes_opt != nullptr && nodes_opt->count() > 0 ? nodes : 0);
    if (!resolved.ok()) return resolved.status();
    *n = *resolved;
    return Status::Ok();
  }
};

Status check_rate(double rate, const std::string& flag) {
  if (!std::isfinite(rate) || rate <= 0) {
    return InvalidArgument(flag + " must be finite and > 0 requests/s (got " + fmt("%g", rate) +
                           ")");
  }
  return Status::Ok();
}

Status check_slo(double slo_ms) {
  if (!std::isfinite(slo_ms) || slo_ms <= 0) {
    return InvalidArgument("--slo-ms must be finite and > 0 ms (got " + fmt("%g", slo_ms) + ")");
  }
  return Status::Ok();
}

StatusOr<std::vector<double>> parse_rates_flag(const std::string& spec) {
  auto rates = parse_rate_spec(spec);
  if (!rates.ok()) return rates.status().with_context("--rates");
  return rates;
}

std::string breakdown(const Prediction& p) {
  return "mean latency " + ms(p.latency_ms) + " (service " + ms(p.service_ms) + " + queueing " +
         ms(p.wait_ms) + "), utilization " + fmt("%.3f", p.utilization);
}

std::string illustrative_note(const Profile& p) {
  return p.illustrative ? "note: this profile is illustrative, not measured (see its \"note\")\n"
                        : "";
}

// ---- predict ---------------------------------------------------------------------------------
struct PredictFlags {
  CommonFlags common;
  TailFlags tail;  // --percentile, --arrival-scv
  int service = 0, inter = 0, intra = 0;
  double rate = 0;
};

Status run_predict(const PredictFlags& f) {
  if (f.service < 1)
    return InvalidArgument("--service must be >= 1 (got " + std::to_string(f.service) + ")");
  if (f.inter < 1)
    return InvalidArgument("--inter must be >= 1 (got " + std::to_string(f.inter) + ")");
  if (f.intra < 1)
    return InvalidArgument("--intra must be >= 1 (got " + std::to_string(f.intra) + ")");
  SERF_RETURN_IF_ERROR(check_rate(f.rate, "--rate"));
  Profile profile;
  QueueKind kind;
  int nodes = 0;
  SERF_RETURN_IF_ERROR(f.common.load(&profile, &kind, &nodes));
  const Configuration config{f.service, f.inter, f.intra};
  SERF_ASSIGN_OR_RETURN(QueueModel model, model_for(profile, config, nodes, kind));
  const int units = units_for(nodes, config.inter);
  const double unit_rate = f.rate / units;
  Prediction p = model.predict(config.service, unit_rate);
  // Beyond the paper: bursty arrivals scale the wait; a percentile comes from the tail model.
  SERF_ASSIGN_OR_RETURN(auto objective, f.tail.make(profile, nodes));
  double score_ms = 0;  // the objective: the percentile, or the mean (simulated where poor)
  if (objective && p.stable) {
    const ConfigurationFamily family{config.inter, config.intra, config.service, model, {}};
    score_ms = objective.get()->score_ms(family, config.service, unit_rate, p);
    p = objective->corrected(family, config.service, p);
  }
  if (f.common.json) {
    json out = io::prediction_to_json(p);
    if (objective && p.stable) {
      out.update({{"score_ms", score_ms},
                  {"objective", objective->name()},
                  {"percentile", f.tail.percentile},
                  {"arrival_scv", f.tail.arrival_scv},
                  {"simulated", objective.simulations() > 0}});
    }
    out.update({{"service", config.service},
                {"inter", config.inter},
                {"intra", config.intra},
                {"nodes", nodes},
                {"rate_per_s", f.rate},
                {"units", units},
                {"unit_rate_per_s", unit_rate},
                {"unit_capacity_per_s", model.max_rate_per_s(config.service)},
                {"queue", to_string(kind)}});
    std::cout << out.dump() << "\n";
    return Status::Ok();
  }
  std::cout << "configuration " << to_string(config) << " on " << nodes << " nodes: " << units
            << " unit(s) of " << config.inter << " node(s), each sees " << rate_text(unit_rate)
            << "\n";
  if (p.stable) {
    std::cout << "model " << to_string(kind) << ": " << breakdown(p) << "\n";
    if (objective && (objective->options().percentile > 0 || objective.simulations() > 0)) {
      std::cout << (objective.simulations() > 0 ? "simulated " : "") << f.tail.what() << ": "
                << ms(score_ms) << "\n";
    }
    std::cout << objective.note();
  } else {
    std::cout << "model " << to_string(kind) << ": UNSTABLE: a unit serves at most "
              << rate_text(model.max_rate_per_s(config.service))
              << ", so the queue grows without bound at this rate\n";
  }
  std::cout << illustrative_note(profile);
  return Status::Ok();
}

// ---- plan ------------------------------------------------------------------------------------
struct PlanFlags {
  CommonFlags common;
  TailFlags tail;  // --objective, --arrival-scv
  std::string rates, out;
  bool all = false;
};

Status run_plan(const PlanFlags& f) {
  SERF_ASSIGN_OR_RETURN(std::vector<double> rates, parse_rates_flag(f.rates));
  Profile profile;
  QueueKind kind;
  int nodes = 0;
  SERF_RETURN_IF_ERROR(f.common.load(&profile, &kind, &nodes));
  SERF_ASSIGN_OR_RETURN(auto objective, f.tail.make(profile, nodes));
  PlanOptions options;
  options.nodes = nodes;
  options.queue = kind;
  options.keep_all = f.all;
  options.objective = objective.get();
  auto table = plan_table(profile, rates, options);
  if (!table.ok()) return table.status().with_context(f.common.profile);
  SERF_ASSIGN_OR_RETURN(auto written, io::save_table(*table, f.out));

  std::cout << "planned " << table->configurations_evaluated << " configurations x " << rates.size()
            << " load levels on " << nodes << " nodes x " << profile.hardware.cores_per_node
            << " cores (model " << to_string(kind) << ", objective " << table->objective << ")\n";
  // Load ranges with one best configuration each: the switch points of the online scheduler.
  std::printf("%-24s %-18s %s (ms)\n", "load (requests/s)", "configuration", f.tail.what().c_str());
  const auto& e = table->entries;
  for (size_t a = 0; a < e.size();) {
    size_t b = a;
    while (b + 1 < e.size() && e[b + 1].stable == e[a].stable &&
           (!e[a].stable || e[b + 1].config == e[a].config)) {
      ++b;
    }
    const std::string range = rate_num(e[a].rate_per_s) + " - " + rate_num(e[b].rate_per_s);
    if (e[a].stable) {
      std::printf("%-24s %-18s %.1f - %.1f\n", range.c_str(), to_string(e[a].config).c_str(),
                  e[a].score_ms, e[b].score_ms);
    } else {
      std::printf("%-24s %-18s %s\n", range.c_str(), "none", "unstable (overloaded)");
    }
    a = b + 1;
  }
  std::cout << "wrote";
  for (const std::string& w : written) std::cout << " " << w;
  std::cout << "\n" << objective.note() << illustrative_note(profile);
  return Status::Ok();
}

// ---- size ------------------------------------------------------------------------------------
struct SizeFlags {
  CommonFlags common;
  TailFlags tail;  // --percentile, --arrival-scv
  double rate = 0, slo_ms = 0;
  std::string rates;
  int max_nodes = 1024;
  CLI::Option* rate_opt = nullptr;
  CLI::Option* rates_opt = nullptr;
};

json sizing_json(const SizingResult& r) {
  json out = {{"rate_per_s", r.rate_per_s}, {"slo_ms", r.slo_ms}, {"feasible", r.feasible}};
  if (r.feasible) {
    out.update({{"nodes", r.nodes},
                {"service", r.config.service},
                {"inter", r.config.inter},
                {"intra", r.config.intra},
                {"units", r.units},
                {"unit_rate_per_s", r.unit_rate_per_s}});
    out.update(io::prediction_to_json(r.prediction));
    out["score_ms"] = r.score_ms;
  } else {
    out["best_latency_ms"] = r.stable ? json(r.score_ms) : json(nullptr);
  }
  return out;
}

Status run_size(const SizeFlags& f) {
  if ((f.rate_opt->count() > 0) == (f.rates_opt->count() > 0)) {
    return InvalidArgument("give exactly one of --rate R or --rates SPEC");
  }
  SERF_RETURN_IF_ERROR(check_slo(f.slo_ms));
  if (f.max_nodes < 1) {
    return InvalidArgument("--max-nodes must be >= 1 (got " + std::to_string(f.max_nodes) + ")");
  }
  Profile profile;
  QueueKind kind;
  int nodes_unused = 0;
  SERF_RETURN_IF_ERROR(f.common.load(&profile, &kind, &nodes_unused));
  SizingOptions options;
  options.queue = kind;
  SERF_ASSIGN_OR_RETURN(auto objective, f.tail.make(profile, 0));  // 0: the node count is searched
  options.objective = objective.get();

  if (f.rate_opt->count() > 0) {
    SERF_RETURN_IF_ERROR(check_rate(f.rate, "--rate"));
    SERF_ASSIGN_OR_RETURN(SizingResult r,
                          size_for_slo(profile, f.rate, f.slo_ms, f.max_nodes, options));
    if (f.common.json) {
      std::cout << sizing_json(r).dump() << "\n";
      return Status::Ok();
    }
    std::cout << "fewest nodes for " << rate_text(r.rate_per_s) << " within a " << f.tail.what()
              << " of " << ms(r.slo_ms) << ": " << r.nodes << " nodes with configuration "
              << to_string(r.config) << "\n"
              << r.units << " unit(s) of " << r.config.inter << " node(s), each sees "
              << rate_text(r.unit_rate_per_s) << "; predicted " << breakdown(r.prediction)
              << " (model " << to_string(kind) << ")\n"
              << (objective ? "predicted " + f.tail.what() + ": " + ms(r.score_ms) + "\n" : "")
              << objective.note() << illustrative_note(profile);
    return Status::Ok();
  }

  SERF_ASSIGN_OR_RETURN(std::vector<double> rates, parse_rates_flag(f.rates));
  SERF_ASSIGN_OR_RETURN(auto rows, size_for_rates(profile, rates, f.slo_ms, f.max_nodes, options));
  size_t infeasible = 0;
  for (const SizingResult& r : rows) infeasible += r.feasible ? 0 : 1;
  if (f.common.json) {
    json out = {{"slo_ms", f.slo_ms},
                {"max_nodes", f.max_nodes},
                {"queue", to_string(kind)},
                {"rows", json::array()}};
    for (const SizingResult& r : rows) out["rows"].push_back(sizing_json(r));
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "fewest nodes within a " << f.tail.what() << " of " << ms(f.slo_ms) << " (model "
              << to_string(kind) << ", at most " << f.max_nodes << " nodes)\n";
    std::printf("%-12s %-6s %-18s %s (ms)\n", "requests/s", "nodes", "configuration",
                f.tail.what().c_str());
    for (const SizingResult& r : rows) {
      if (r.feasible) {
        std::printf("%-12s %-6d %-18s %.1f\n", rate_num(r.rate_per_s).c_str(), r.nodes,
                    to_string(r.config).c_str(), r.score_ms);
      } else {
        std::printf("%-12s %-6s %-18s %s\n", rate_num(r.rate_per_s).c_str(), "-", "infeasible",
                    r.stable ? ("best " + fmt("%.1f", r.score_ms) + " on " +
                                std::to_string(f.max_nodes) + " nodes")
                                   .c_str()
                             : "not even stable");
      }
    }
    std::cout << objective.note() << illustrative_note(profile);
  }
  if (infeasible > 0) {
    std::cout.flush();  // the table first, then main's one-line error on stderr
    return Infeasible(std::to_string(infeasible) + " of " + std::to_string(rows.size()) +
                      " load levels cannot meet the SLO with up to " + std::to_string(f.max_nodes) +
                      " nodes (marked infeasible above)");
  }
  return Status::Ok();
}

// ---- capacity --------------------------------------------------------------------------------
struct CapacityFlags {
  CommonFlags common;
  TailFlags tail;  // --percentile, --arrival-scv
  double slo_ms = 0;
};

Status run_capacity(const CapacityFlags& f) {
  SERF_RETURN_IF_ERROR(check_slo(f.slo_ms));
  Profile profile;
  QueueKind kind;
  int nodes = 0;
  SERF_RETURN_IF_ERROR(f.common.load(&profile, &kind, &nodes));
  SizingOptions options;
  options.queue = kind;
  SERF_ASSIGN_OR_RETURN(auto objective, f.tail.make(profile, nodes));
  options.objective = objective.get();
  SERF_ASSIGN_OR_RETURN(CapacityResult r, capacity(profile, f.slo_ms, nodes, options));
  if (f.common.json) {
    json out = {{"rate_per_s", r.rate_per_s}, {"slo_ms", r.slo_ms},
                {"nodes", r.nodes},           {"service", r.config.service},
                {"inter", r.config.inter},    {"intra", r.config.intra},
                {"units", r.units},           {"unit_rate_per_s", r.unit_rate_per_s},
                {"queue", to_string(kind)}};
    out.update(io::prediction_to_json(r.prediction));
    if (objective) out.update({{"objective", objective->name()}, {"score_ms", r.score_ms}});
    std::cout << out.dump() << "\n";
    return Status::Ok();
  }
  std::cout << nodes << " nodes sustain at most " << rate_text(r.rate_per_s) << " within a "
            << f.tail.what() << " of " << ms(r.slo_ms) << ", with configuration "
            << to_string(r.config) << "\n"
            << r.units << " unit(s) of " << r.config.inter << " node(s), each at "
            << rate_text(r.unit_rate_per_s) << "; predicted " << breakdown(r.prediction)
            << " (model " << to_string(kind) << ")\n"
            << (objective ? "predicted " + f.tail.what() + ": " + ms(r.score_ms) + "\n" : "")
            << objective.note() << illustrative_note(profile);
  return Status::Ok();
}

}  // namespace

void register_queue_commands(CLI::App& app, CommandRegistry& registry) {
  {
    auto f = std::make_shared<PredictFlags>();
    auto* sub = app.add_subcommand(
        "predict",
        "Predict the mean latency of one configuration (c, K, T) at a cluster arrival rate");
    f->common.add(sub, true, true);
    sub->add_option("--service", f->service, "C: at most C requests served at once per unit")
        ->required();
    sub->add_option("--inter", f->inter, "K: nodes that compute each request together")->required();
    sub->add_option("--intra", f->intra, "T: threads per node for each request")->required();
    sub->add_option(
           "--rate", f->rate,
           "cluster-wide arrival rate in requests/s (a unit of K nodes sees R / floor(N/K))")
        ->required();
    f->tail.add_percentile(sub);
    f->tail.add_arrival_scv(sub);
    registry.add(sub, [f] { return run_predict(*f); });
  }
  {
    auto f = std::make_shared<PlanFlags>();
    auto* sub = app.add_subcommand(
        "plan",
        "Build the configuration reference table: the best configuration at each load level");
    f->common.add(sub, true, false);
    sub->add_option("--rates", f->rates,
                    "cluster-wide load levels in requests/s: a,b,c or start:stop:step (inclusive)")
        ->required();
    sub->add_flag("--all", f->all, "also keep every configuration's predicted latency (for plots)");
    sub->add_option("--out", f->out,
                    "table file to write (serf-table/1 JSON; a CSV is written beside it)")
        ->required();
    f->tail.add_objective(sub);
    f->tail.add_arrival_scv(sub);
    registry.add(sub, [f] { return run_plan(*f); });
  }
  {
    auto f = std::make_shared<SizeFlags>();
    auto* sub = app.add_subcommand("size",
                                   "Fewest nodes whose best configuration meets a mean-latency SLO "
                                   "at a load (exit 3 if none)");
    f->common.add(sub, false, true);
    f->rate_opt = sub->add_option("--rate", f->rate, "cluster-wide arrival rate in requests/s");
    f->rates_opt = sub->add_option("--rates", f->rates,
                                   "size for several loads (requests/s): a,b,c or start:stop:step");
    sub->add_option("--slo-ms", f->slo_ms,
                    "latency objective in ms (the mean; with --percentile, that percentile)")
        ->required();
    sub->add_option("--max-nodes", f->max_nodes,
                    "largest cluster to consider, in nodes (default 1024)");
    f->tail.add_percentile(sub);
    f->tail.add_arrival_scv(sub);
    registry.add(sub, [f] { return run_size(*f); });
  }
  {
    auto f = std::make_shared<CapacityFlags>();
    auto* sub = app.add_subcommand(
        "capacity",
        "Highest cluster arrival rate (requests/s) whose best configuration meets the SLO");
    f->common.add(sub, true, true);
    sub->add_option("--slo-ms", f->slo_ms,
                    "latency objective in ms (the mean; with --percentile, that percentile)")
        ->required();
    f->tail.add_percentile(sub);
    f->tail.add_arrival_scv(sub);
    registry.add(sub, [f] { return run_capacity(*f); });
  }
}

}  // namespace serf::cli
