// predict, plan, size, capacity: the queueing core's commands (issue 2).
// Thin: parse the shared flags (cli/flags.h), call serf/core, print with serf/io's reports.
// An unstable load (docs/queueing.md, exit codes) prints its result, then exits 3.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/flags.h"
#include "profiler/cost.h"
#include "serf/core/planner.h"
#include "serf/core/rate_spec.h"
#include "serf/core/sizing.h"
#include "serf/core/statistics.h"
#include "serf/io/profile_io.h"
#include "serf/io/queue_report.h"
#include "serf/io/table_io.h"

namespace serf::cli {

namespace {

// Flags every queue command shares.
struct CommonFlags {
  ProfileFlag profile;
  std::string queue = to_string(kDefaultQueue);
  bool json = false;
  int nodes = 0;      // 0: the profile's hardware.nodes
  int max_batch = 1;  // plan, size, capacity: search b in (1, B] (predict: --batch is its b)
  TailFlags tail;

  void add(CLI::App* sub, bool with_nodes, bool with_json, bool search_batch = true) {
    profile.add(sub);
    add_queue(sub, &queue, false);
    if (search_batch) {
      add_batch(sub, &max_batch,
                "B: also consider batches of up to B requests per slot, over the batch sizes "
                "b <= B the profile holds (default 1: the paper's configurations)");
    }
    if (with_nodes)
      add_nodes(sub, &nodes, "nodes in the cluster (default: the profile's hardware.nodes)");
    if (with_json) add_json(sub, &json);
    tail.add_arrival_scv(sub);
  }

  struct Loaded {
    Profile profile;
    QueueKind queue = kDefaultQueue;
    int nodes = 0;
  };
  // Loads the profile, resolves the queue model and the node count.
  StatusOr<Loaded> load() const {
    Loaded l;
    SERF_ASSIGN_OR_RETURN(l.profile, profile.load());
    auto k = parse_queue_kind(queue);
    if (!k.ok()) return k.status().with_context("--queue");
    l.queue = *k;
    SERF_ASSIGN_OR_RETURN(l.nodes, resolve_nodes(l.profile, nodes));
    return l;
  }
};

StatusOr<std::vector<double>> parse_rates_flag(const std::string& spec) {
  auto rates = parse_rate_spec(spec);
  if (!rates.ok()) return rates.status().with_context("--rates");
  return rates;
}

// ---- predict ---------------------------------------------------------------------------------
struct PredictFlags {
  CommonFlags common;
  ConfigurationFlags configuration;
  double rate = 0;
};

Status run_predict(const PredictFlags& f) {
  SERF_ASSIGN_OR_RETURN(CommonFlags::Loaded in, f.common.load());
  SERF_ASSIGN_OR_RETURN(TailObjective objective,
                        f.common.tail.make(in.profile, in.nodes, f.configuration.config.batch));
  SERF_ASSIGN_OR_RETURN(ConfigurationPrediction r,
                        predict_configuration(in.profile, f.configuration.config, in.nodes, f.rate,
                                              in.queue, objective.analytic(), objective.get()));
  const io::ObjectiveLabel label = f.common.tail.label(objective);
  if (f.common.json) {
    std::cout << io::predict_json(r, label).dump() << "\n";
  } else {
    std::cout << io::predict_text(r, label, in.profile.illustrative);
  }
  if (r.prediction.stable) return Status::Ok();
  std::cout.flush();  // the result first, then main's one-line error on stderr
  return UnstableLoad(to_string(r.config) + " at " + format_rate_text(r.rate_per_s) +
                      ": a unit serves at most " + format_rate_text(r.unit_capacity_per_s) +
                      " and sees " + format_rate_text(r.unit_rate_per_s));
}

// ---- plan ------------------------------------------------------------------------------------
struct PlanFlags {
  CommonFlags common;
  std::string rates, out;
  bool all = false;
  bool cost_of_exhaustive = false;
  profiler::ExhaustiveCostOptions cost;
  std::vector<const CLI::Option*> cost_flags;  // refused without --cost-of-exhaustive
};

// serf plan --cost-of-exhaustive: what measuring every configuration at every level of --rates
// would cost on this cluster, against the profile's tuples (the paper's Table II, projected).
Status print_exhaustive_cost(const PlanFlags& f, const Profile& profile, int nodes,
                             const std::vector<double>& rates) {
  profiler::ExhaustiveCostOptions o = f.cost;
  o.nodes = nodes;
  o.rates_per_s = rates;
  for (const TupleStats& t : profile.tuples) {
    if (t.tuple.inter <= nodes &&
        std::find(o.inter.begin(), o.inter.end(), t.tuple.inter) == o.inter.end())
      o.inter.push_back(t.tuple.inter);
  }
  auto cost = profiler::project_exhaustive_cost(profile, o);
  if (!cost.ok()) return cost.status().with_context("--cost-of-exhaustive");
  const auto hours = [](double s) { return format_number("%.1f", s / 3600); };
  std::cout << "cost of the exhaustive measurement on " << nodes << " nodes x "
            << profile.hardware.cores_per_node << " cores (projected; each point run until its "
            << "mean's 95% CI is within " << format_percent(o.target.precision) << ", at least "
            << format_g(o.target.min_duration_s) << " s and "
            << profiler::min_valid_requests(o.target) << " answers (the p"
            << format_g(o.target.percentile) << " bounded), +" << format_percent(o.warmup_fraction)
            << " warm-up):\n"
            << "  configurations x load levels  " << cost->configurations << " x " << cost->levels
            << " = " << cost->points << " points (" << cost->unstable
            << " unstable, counted at the minimum duration; " << cost->floored
            << " set by the minimum answers or duration, not the CI)\n"
            << "  run length per point          median "
            << format_number("%.0f", cost->median_point_s) << " s, longest "
            << format_number("%.0f", cost->longest_point_s) << " s\n"
            << "  exhaustive measurement        " << format_number("%.0f", cost->exhaustive_s)
            << " s (" << hours(cost->exhaustive_s) << " h; the 10% longest points "
            << format_percent(cost->longest_tenth_share) << " of it)\n"
            << "  tuple profile                 " << format_number("%.1f", cost->tuple_profile_s)
            << " s (the profile's " << profile.tuples.size() << " tuples to the same precision, "
            << cost->tuple_samples << " samples: (warm-up + samples) x mean_ms / i; "
            << format_number("%.1f", cost->tuple_profile_as_profiled_s)
            << " s at the file's sample counts)\n"
            << "  ratio                         " << format_number("%.0f", cost->ratio) << "x\n"
            << "  tuple profile side by side    "
            << format_number("%.1f", cost->tuple_profile_side_by_side_s)
            << " s (serf profile --side-by-side: each K-node tuple on all N/K units at once)\n"
            << "  ratio side by side            " << format_number("%.0f", cost->ratio_side_by_side)
            << "x\n";
  return Status::Ok();
}

Status run_plan(const PlanFlags& f) {
  for (const CLI::Option* o : f.cost_flags) {
    if (!f.cost_of_exhaustive && o->count() > 0)
      return InvalidArgument(o->get_name() + ": only with --cost-of-exhaustive");
  }
  SERF_ASSIGN_OR_RETURN(std::vector<double> rates, parse_rates_flag(f.rates));
  // Not check_output_path: the table may go through a pipe or device (one file, no CSV beside).
  SERF_RETURN_IF_ERROR(check_not_input("--out", f.out, "--profile", f.common.profile.path));
  SERF_ASSIGN_OR_RETURN(CommonFlags::Loaded in, f.common.load());
  SERF_ASSIGN_OR_RETURN(TailObjective objective,
                        f.common.tail.make(in.profile, in.nodes, f.common.max_batch));
  PlanOptions options;
  options.nodes = in.nodes;
  options.queue = in.queue;
  options.max_batch = f.common.max_batch;
  options.keep_all = f.all;
  options.objective = objective.get();
  auto table = plan_table(in.profile, rates, options);
  if (!table.ok()) return table.status().with_context(f.common.profile.path);
  SERF_ASSIGN_OR_RETURN(auto written, io::save_table(*table, f.out));
  std::cout << io::plan_text(*table, written, f.common.tail.label(objective));
  if (f.cost_of_exhaustive)
    SERF_RETURN_IF_ERROR(print_exhaustive_cost(f, in.profile, in.nodes, rates));
  const std::string unstable = io::plan_unstable_message(*table);
  if (unstable.empty()) return Status::Ok();
  std::cout.flush();
  return UnstableLoad(unstable);
}

// ---- size ------------------------------------------------------------------------------------
struct SizeFlags {
  CommonFlags common;
  double rate = 0, slo_ms = 0;
  std::string rates;
  int max_nodes = 1024;
  CLI::Option* rate_opt = nullptr;
  CLI::Option* rates_opt = nullptr;
};

Status run_size(const SizeFlags& f) {
  if ((f.rate_opt->count() > 0) == (f.rates_opt->count() > 0)) {
    return InvalidArgument("give exactly one of --rate R or --rates SPEC");
  }
  SERF_ASSIGN_OR_RETURN(CommonFlags::Loaded in, f.common.load());
  SizingOptions options;
  options.queue = in.queue;
  options.max_batch = f.common.max_batch;
  // 0: N is searched.
  SERF_ASSIGN_OR_RETURN(auto objective, f.common.tail.make(in.profile, 0, f.common.max_batch));
  options.objective = objective.get();

  if (f.rate_opt->count() > 0) {
    SERF_ASSIGN_OR_RETURN(SizingResult r,
                          size_for_slo(in.profile, f.rate, f.slo_ms, f.max_nodes, options));
    const io::ObjectiveLabel label = f.common.tail.label(objective);
    std::cout << (f.common.json ? io::sizing_json(r).dump() + "\n"
                                : io::sizing_text(r, in.queue, label, in.profile.illustrative));
    return Status::Ok();
  }
  SERF_ASSIGN_OR_RETURN(std::vector<double> rates, parse_rates_flag(f.rates));
  SERF_ASSIGN_OR_RETURN(auto rows,
                        size_for_rates(in.profile, rates, f.slo_ms, f.max_nodes, options));
  const io::ObjectiveLabel label = f.common.tail.label(objective);
  if (f.common.json) {
    std::cout << io::sizing_rows_json(rows, f.slo_ms, f.max_nodes, in.queue).dump() << "\n";
  } else {
    std::cout << io::sizing_rows_text(rows, f.slo_ms, f.max_nodes, in.queue, label,
                                      in.profile.illustrative);
  }
  size_t infeasible = 0;
  for (const SizingResult& r : rows) infeasible += r.feasible ? 0 : 1;
  if (infeasible == 0) return Status::Ok();
  std::cout.flush();  // the table first, then main's one-line error on stderr
  return Infeasible(std::to_string(infeasible) + " of " + std::to_string(rows.size()) +
                    " load levels cannot meet the SLO with up to " + std::to_string(f.max_nodes) +
                    " nodes (marked infeasible above)");
}

// ---- capacity --------------------------------------------------------------------------------
struct CapacityFlags {
  CommonFlags common;
  double slo_ms = 0;
};

Status run_capacity(const CapacityFlags& f) {
  SERF_ASSIGN_OR_RETURN(CommonFlags::Loaded in, f.common.load());
  SizingOptions options;
  options.queue = in.queue;
  options.max_batch = f.common.max_batch;
  SERF_ASSIGN_OR_RETURN(auto objective,
                        f.common.tail.make(in.profile, in.nodes, f.common.max_batch));
  options.objective = objective.get();
  SERF_ASSIGN_OR_RETURN(CapacityResult r, capacity(in.profile, f.slo_ms, in.nodes, options));
  const io::ObjectiveLabel label = f.common.tail.label(objective);
  std::cout << (f.common.json ? io::capacity_json(r, in.queue, label).dump() + "\n"
                              : io::capacity_text(r, in.queue, label, in.profile.illustrative));
  return Status::Ok();
}

CLI::Option* add_rate(CLI::App* sub, double* rate, const std::string& help) {
  return sub->add_option("--rate", *rate, help)->check(positive_finite());
}

CLI::Option* add_slo(CLI::App* sub, double* slo_ms) {
  return sub
      ->add_option("--slo-ms", *slo_ms,
                   "latency objective in ms (the mean; with --percentile, that percentile)")
      ->check(positive_finite())
      ->required();
}

// serf predict: one configuration's mean latency at a rate.
void register_predict(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<PredictFlags>();
  auto* sub = app.add_subcommand(
      "predict",
      "Predict the mean latency of one configuration (c, K, T) at a cluster arrival rate\n"
      "(exit 3 when the load is unstable)");
  f->common.add(sub, true, true, false);
  f->configuration.add(sub);
  add_rate(sub, &f->rate,
           "cluster-wide arrival rate in requests/s (a unit of K nodes sees R / floor(N/K))")
      ->required();
  f->common.tail.add_percentile(sub);
  registry.add(sub, [f] { return run_predict(*f); });
}

// plan --cost-of-exhaustive and the flags that need it (PlanFlags::cost_flags).
void add_cost_flags(CLI::App* sub, PlanFlags* f) {
  sub->add_flag("--cost-of-exhaustive", f->cost_of_exhaustive,
                "also project what measuring every configuration at every --rates level would "
                "cost (each run to --precision), against the tuple profile (Table II)");
  f->cost_flags.push_back(
      sub->add_option("--precision", f->cost.target.precision,
                      "with --cost-of-exhaustive: the 95% CI half-width each point must reach, a "
                      "fraction of its mean (default 0.03)")
          ->check(finite_range(1e-4, 0.5)));
  f->cost_flags.push_back(
      sub->add_option("--min-duration", f->cost.target.min_duration_s,
                      "with --cost-of-exhaustive: the shortest point, seconds (default 10)")
          ->check(finite_range(0, 86400)));
  f->cost_flags.push_back(
      sub->add_option("--min-requests", f->cost.target.min_requests,
                      "with --cost-of-exhaustive: answers after the warm-up a VALID point needs "
                      "(default 100, as serf profile --exhaustive)")
          ->check(int_range(1, 100000000)));
  f->cost_flags.push_back(
      sub->add_option("--percentile", f->cost.target.percentile,
                      "with --cost-of-exhaustive: the percentile each point must bound, as serf "
                      "profile --exhaustive (default 99: at least 368 answers per point)")
          ->check(finite_range(50, 99.99)));
  f->cost_flags.push_back(
      sub->add_option("--switch-s", f->cost.switch_s,
                      "with --cost-of-exhaustive: reconfiguration time per point, seconds "
                      "(default 0)")
          ->check(finite_range(0, 86400)));
}

// serf plan: the configuration table over load levels.
void register_plan(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<PlanFlags>();
  auto* sub = app.add_subcommand(
      "plan",
      "Build the configuration reference table: the best configuration at each load level\n"
      "(exit 3, after writing the table, when some load levels are unstable)");
  f->common.add(sub, true, false);
  sub->add_option("--rates", f->rates,
                  "cluster-wide load levels in requests/s: a,b,c or start:stop:step (inclusive)")
      ->required();
  sub->add_flag("--all", f->all, "also keep every configuration's predicted latency (for plots)");
  add_cost_flags(sub, f.get());
  add_output(sub, "--out", &f->out,
             "table file to write (serf-table/1 JSON; a CSV is written beside it)", true);
  f->common.tail.add_objective(sub);
  registry.add(sub, [f] { return run_plan(*f); });
}

// serf size: the fewest nodes for an SLO.
void register_size(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<SizeFlags>();
  auto* sub = app.add_subcommand("size",
                                 "Fewest nodes whose best configuration meets a mean-latency SLO "
                                 "at a load (exit 3 if none)");
  f->common.add(sub, false, true);
  f->rate_opt = add_rate(sub, &f->rate, "cluster-wide arrival rate in requests/s");
  f->rates_opt = sub->add_option("--rates", f->rates,
                                 "size for several loads (requests/s): a,b,c or start:stop:step");
  add_slo(sub, &f->slo_ms);
  sub->add_option("--max-nodes", f->max_nodes,
                  "largest cluster to consider, in nodes (default 1024)")
      ->check(int_range(1, kMaxNodes));
  f->common.tail.add_percentile(sub);
  registry.add(sub, [f] { return run_size(*f); });
}

// serf capacity: the highest rate within an SLO.
void register_capacity(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<CapacityFlags>();
  auto* sub = app.add_subcommand(
      "capacity",
      "Highest cluster arrival rate (requests/s) whose best configuration meets the SLO");
  f->common.add(sub, true, true);
  add_slo(sub, &f->slo_ms);
  f->common.tail.add_percentile(sub);
  registry.add(sub, [f] { return run_capacity(*f); });
}

}  // namespace

void register_queue_commands(CLI::App& app, CommandRegistry& registry) {
  register_predict(app, registry);
  register_plan(app, registry);
  register_size(app, registry);
  register_capacity(app, registry);
}

}  // namespace serf::cli
