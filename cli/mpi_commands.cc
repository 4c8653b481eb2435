// serve, profile: the distributed runtime's commands (issue 4). They run under
//   mpirun -np N+1 build/bin/serf COMMAND ...
// rank 0 is the controller, ranks 1..N are nodes. MPI is initialised here only, so every other
// command runs without mpirun. Every rank parses the same flags and files, so bad input is found on
// every rank at once: rank 0 prints one line, every rank exits 2, nothing hangs.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/infer_print.h"
#include "cli/plot.h"
#include "cli/runtime_launch.h"
#include "cli/serve_calibration.h"
#include "cli/serve_frontends.h"
#include "serf/core/arrivals.h"
#include "serf/io/profile_io.h"
#include "serf/io/table_io.h"
#include "serve/run_report.h"
#include "serve/switch_cost.h"

namespace serf::cli {

namespace {

struct ServeOptions {
  RuntimeFlags runtime;
  std::string config = "1,1,1";
  std::string schedule;
  std::string table;
  double min_dwell_s = 1;
  // Hysteresis in rate: standard deviations of the rate estimate a switch to a lighter load's
  // configuration waits for (serve::RateBand); 0: none.
  double rate_band_sd = 2;
  double rate_window_s = 2;
  std::string load;
  ArrivalFlags arrivals;  // --arrivals, --arrival-scv
  double rate_per_s = 0;
  int requests = 100;
  std::string out;
  std::string plot;                // PNG of the run; empty: none
  FrontendFlags frontends;         // --http, --grpc and their limits
  std::string recalibrate = "on";  // online self-calibration (docs/calibration.md)
  // Decline switches that cost more than they gain; off by default: on imagenet1k it kept a
  // slow configuration for a minute (docs/serving.md).
  std::string switch_cost = "off";
  // Real nodes prepare every configuration of the table at the start and hold it: every switch
  // warm (docs/serving.md: start-up time and memory with and without).
  std::string prepare_ahead = "on";
  double ahead_memory_mb = 0;     // what a node rank may hold ahead; 0: MemAvailable alone
  double max_batch_delay_us = 0;  // with b > 1: a free slot waits this long for a full batch
};

// Requests waiting per unit when clients are served and --max-queue is not given.
constexpr size_t kDefaultMaxQueue = 64;
// Finished requests a service keeps in memory for --out.
constexpr size_t kServiceRecords = 20000;

struct ScheduledSwitch {
  double at_s;
  Configuration config;
};

// "2.5:2,1,1;5:1,2,1": at 2.5 s switch to (c=2, K=1, T=1), at 5 s to (1, 2, 1).
StatusOr<std::vector<ScheduledSwitch>> parse_schedule(const std::string& text) {
  std::vector<ScheduledSwitch> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string item, previous;
  while (std::getline(ss, item, ';')) {
    auto colon = item.find(':');
    double at = -1;
    // All of it a finite number: std::stod took "2.5x" as 2.5 and "inf" as a time.
    if (colon == std::string::npos || !parse_finite(item.substr(0, colon), &at) || !(at >= 0)) {
      return InvalidArgument("--schedule: expected \"SECONDS:c,K,T;...\", got \"" + item + "\"");
    }
    SERF_ASSIGN_OR_RETURN(Configuration c,
                          parse_configuration(item.substr(colon + 1), "--schedule"));
    // Out of order, a switch would be passed over silently (the hook takes them in order).
    if (!out.empty() && !(at > out.back().at_s)) {
      return InvalidArgument("--schedule: \"" + item + "\" comes after \"" + previous +
                             "\"; list the switches with strictly ascending seconds");
    }
    out.push_back({at, c});
    previous = item;
  }
  return out;
}

// "0:20;5:80": 20 requests/s from 0 s, 80 from 5 s (the rule serf load shares, cli/flags.h).
StatusOr<std::vector<serve::RateStep>> parse_load(const std::string& text) {
  SERF_ASSIGN_OR_RETURN(std::vector<RateChange> steps, parse_load_steps(text));
  std::vector<serve::RateStep> out;
  for (const RateChange& s : steps) out.push_back({s.from_s, s.rate_per_s});
  return out;
}

// What serve runs, from the flags and files checked on every rank before the first request.
struct ServePlan {
  Configuration first;
  std::vector<ScheduledSwitch> schedule;
  std::vector<serve::RateStep> load;  // empty: clients only (--http/--grpc)
  ArrivalFlags::Resolved arrivals;
  std::shared_ptr<const ConfigurationTable> table;  // --table, or null
};

// The files serve reads: --table (kept in the plan) and --profile (read again where it is used),
// each read before anything needs the node ranks, so a bad file is named without mpirun too.
Status read_serve_files(const ServeOptions& o, ServePlan* plan) {
  if (!o.frontends.profile.empty()) {
    // Read at the start: it was first read after the first request, and a bad file then ended
    // a running job (and an --out over it was not refused).
    SERF_RETURN_IF_ERROR(io::load_profile(o.frontends.profile).status());
  }
  if (o.table.empty()) return Status::Ok();
  SERF_ASSIGN_OR_RETURN(ConfigurationTable loaded, io::load_table(o.table));
  plan->table = std::make_shared<const ConfigurationTable>(std::move(loaded));
  return Status::Ok();
}

// --table: planned for these nodes, and every configuration it may switch to runs here.
Status check_serve_table(const ServeOptions& o, const RuntimeSession& session,
                         const ServePlan& plan) {
  if (!plan.table) return Status::Ok();
  SERF_RETURN_IF_ERROR(session.need_nodes());
  const ConfigurationTable& table = *plan.table;
  if (table.nodes != session.nodes) {
    return InvalidArgument(o.table + ": planned for " + std::to_string(table.nodes) +
                           " nodes but " + std::to_string(session.nodes) +
                           " node ranks run; plan with --nodes " + std::to_string(session.nodes));
  }
  for (const TableEntry& e : table.entries) {
    if (!e.stable) continue;
    SERF_RETURN_IF_ERROR(session.check_configuration(e.config, o.table));
  }
  // A load beyond every entry runs this one (table_hook): it must run too.
  if (const auto biggest = serve::highest_capacity(table)) {
    SERF_RETURN_IF_ERROR(session.check_configuration(biggest->first, o.table));
  }
  return Status::Ok();
}

// --max-batch-delay-us waits for a batch: without a b > 1 anywhere it would be silently ignored.
Status check_batch_delay(const ServeOptions& o, const ServePlan& plan) {
  if (!(o.max_batch_delay_us > 0)) return Status::Ok();
  bool batched = plan.first.batch > 1;
  for (const auto& s : plan.schedule) batched = batched || s.config.batch > 1;
  if (plan.table) {
    for (const TableEntry& e : plan.table->entries) batched = batched || e.config.batch > 1;
  }
  if (batched) return Status::Ok();
  return InvalidArgument("--max-batch-delay-us " + format_g(o.max_batch_delay_us) +
                         ": only with a batch b > 1 in --config, --schedule or --table (a "
                         "batch to wait for)");
}

// Every flag and file of serve, checked on every rank before the first request.
Status plan_serve(const ServeOptions& o, const RuntimeSession& session, ServePlan* plan) {
  SERF_ASSIGN_OR_RETURN(plan->first, parse_configuration(o.config, "--config"));
  SERF_ASSIGN_OR_RETURN(plan->schedule, parse_schedule(o.schedule));
  if (!o.load.empty()) {
    SERF_ASSIGN_OR_RETURN(plan->load, parse_load(o.load));
  } else if (o.rate_per_s > 0) {
    plan->load.push_back({0, o.rate_per_s});
  } else if (!o.frontends.any()) {
    return InvalidArgument(
        "--rate: give the arrival rate in requests/s (> 0), or --load, or serve clients with "
        "--http/--grpc");
  }
  SERF_RETURN_IF_ERROR(check_frontend_flags(o.frontends));
  if (o.requests < 1) return InvalidArgument("--requests: give at least 1");
  std::vector<InputFile> inputs = runtime_inputs(o.runtime);
  inputs.push_back({"--table", o.table});
  inputs.push_back({"--profile", o.frontends.profile});
  if (!o.out.empty()) {
    SERF_RETURN_IF_ERROR(check_output_path("--out", o.out, inputs));
    SERF_RETURN_IF_ERROR(check_output_path("--out", o.out + ".csv", inputs));
  }
  if (!o.plot.empty()) {
    if (o.out.empty()) return InvalidArgument("--plot: needs --out FILE.json (the plot reads it)");
    SERF_RETURN_IF_ERROR(
        check_plot_path("--plot", o.plot, {{"--out", o.out}, {"--out", o.out + ".csv"}}));
    SERF_RETURN_IF_ERROR(check_output_path("--plot", o.plot, inputs));
  }
  SERF_ASSIGN_OR_RETURN(plan->arrivals, o.arrivals.resolve());
  if (!(o.min_dwell_s >= 0)) return InvalidArgument("--min-dwell: must be >= 0 seconds");
  if (!(o.rate_window_s > 0)) return InvalidArgument("--rate-window: must be > 0 seconds");
  if (o.ahead_memory_mb > 0 && o.prepare_ahead != "on") {
    return InvalidArgument(
        "--ahead-memory-mb: only with --prepare-ahead on (it bounds what the "
        "nodes prepare ahead)");
  }
  SERF_RETURN_IF_ERROR(read_serve_files(o, plan));
  SERF_RETURN_IF_ERROR(session.check_configuration(plan->first, "--config"));
  for (const auto& s : plan->schedule) {
    SERF_RETURN_IF_ERROR(session.check_configuration(s.config, "--schedule"));
  }
  SERF_RETURN_IF_ERROR(check_serve_table(o, session, *plan));
  return check_batch_delay(o, *plan);
}

// What the nodes prepare ahead with --prepare-ahead on: --config and every configuration the
// table may run (its stable entries and the one of highest capacity, as load_serve_table checks).
std::vector<Configuration> ahead_configurations(const ServeOptions& o, const ServePlan& plan) {
  std::vector<Configuration> out;
  if (o.prepare_ahead != "on" || !plan.table) return out;
  out.push_back(plan.first);
  for (const TableEntry& e : plan.table->entries) {
    if (e.stable) out.push_back(e.config);
  }
  if (const auto biggest = serve::highest_capacity(*plan.table)) out.push_back(biggest->first);
  return out;
}

// The controller's limits: rate window, batch delay, queue bound, records kept.
void set_serve_limits(const ServeOptions& o, serve::Controller& controller) {
  controller.set_rate_window_s(o.rate_window_s);
  controller.set_max_batch_delay_s(o.max_batch_delay_us * 1e-6);
  const bool clients = o.frontends.any();
  if (o.frontends.max_queue >= 0 || clients) {
    controller.set_max_queue(o.frontends.max_queue >= 0 ? static_cast<size_t>(o.frontends.max_queue)
                                                        : kDefaultMaxQueue);
  }
  // A service runs for days: keep its newest requests for --out (the journal has them all).
  if (clients) controller.set_max_records(kServiceRecords);
}

void print_overload(const serve::OverloadNote& n, const std::string& table) {
  std::printf("load %.1f requests/s at %.2f s exceeds every configuration of %s: ", n.rate_per_s,
              n.at_s, table.c_str());
  if (n.capacity_per_s > 0) {
    std::printf("running the one of highest capacity, %s (%.1f requests/s)\n",
                to_string(n.config).c_str(), n.capacity_per_s);
  } else {
    std::printf("the table has no stable configuration at all\n");
  }
  std::fflush(stdout);
}

// --switch-cost on: the gate that weighs each switch the table asks for (serve/switch_cost.h),
// predicting from the calibrated profile, the --profile or --emulate one, else the table; null
// without a table or with --switch-cost off.
StatusOr<serve::SwitchFilter> switch_gate(const ServeOptions& o, const ServePlan& plan,
                                          const RuntimeSession& session,
                                          serve::SelfCalibration* calibration,
                                          serve::Controller& controller,
                                          serve::ServeMetrics* metrics) {
  if (!plan.table || o.switch_cost == "off") return serve::SwitchFilter();
  const QueueKind queue = plan.table->queue;
  serve::SwitchPredictor predict;
  if (calibration != nullptr) {
    predict = serve::profile_predictor(
        [calibration] { return std::make_shared<const Profile>(calibration->current_profile()); },
        session.nodes, queue);
  } else if (!o.frontends.profile.empty() || session.emulation != nullptr) {
    std::shared_ptr<const Profile> profile;
    if (!o.frontends.profile.empty()) {
      SERF_ASSIGN_OR_RETURN(Profile p, io::load_profile(o.frontends.profile));
      profile = std::make_shared<const Profile>(std::move(p));
    } else {
      profile = std::make_shared<const Profile>(*session.emulation);
    }
    predict = serve::profile_predictor([profile] { return profile; }, session.nodes, queue);
  } else {
    predict = serve::table_predictor(plan.table);
  }
  auto gate = std::make_shared<serve::SwitchGate>(std::move(predict));
  if (!session.emulation) gate->prepared_ahead(session.prepare_ahead);
  if (metrics != nullptr) metrics->set_switch_gate(gate);
  return serve::switch_filter(
      gate, controller,
      [&controller](double, const Configuration& from, const Configuration& to,
                    const serve::SwitchVerdict& v) {
        std::printf("switch %s -> %s declined at %.2f s: %s\n", to_string(from).c_str(),
                    to_string(to).c_str(), controller.now_s(), v.reason.c_str());
        std::fflush(stdout);
      });
}

// The run's Status once it ended: a journal write error, a fault (with the partial measurements
// written), or the report's own.
Status serve_outcome(const ServeOptions& o, const serve::Controller& controller, const Status& run,
                     const serve::RunJournal* journal, const Status& written) {
  if (run.ok() && journal != nullptr && !journal->status().ok()) {
    // The journal stays as it was cut (whole rows) when the report could not replace it.
    return Status(journal->status().code(),
                  journal->status().message() + "; the run stopped there" +
                      (written.ok() ? "; wrote " + o.out + " and " + o.out + ".csv"
                                    : "; " + written.message()));
  }
  if (!run.ok()) {
    if (o.out.empty() || !written.ok()) return run;
    size_t answered = 0;
    for (const serve::RequestRecord& r : controller.records()) answered += r.answered ? 1 : 0;
    return Status(run.code(), run.message() + "; wrote partial measurements of " +
                                  std::to_string(answered) + " answered requests to " + o.out +
                                  " and " + o.out + ".csv");
  }
  return written;
}

// Rank 0's run: journal, front ends, self-calibration, the scheduler hook, the run itself, the
// report and the summary.
Status serve_on_controller(const ServeOptions& o, const ServePlan& plan, RuntimeSession& session,
                           serve::Controller& controller) {
  set_serve_limits(o, controller);
  const bool clients = o.frontends.any();
  SERF_ASSIGN_OR_RETURN(std::shared_ptr<serve::RunJournal> journal, serve::RunJournal::Open(o.out));
  if (journal) {
    // A write error (a full disk) is found at the row that failed: the run stops taking
    // requests there (those queued and running finish) instead of running on unrecorded.
    controller.add_answer_hook([journal, &controller](const serve::RequestRecord& r) {
      if (journal->status().ok() && !journal->add(r)) controller.request_stop();
    });
  }
  SERF_RETURN_IF_ERROR(controller.configure(plan.first));
  if (!session.emulation) std::cout << session.placement();
  std::unique_ptr<ServeFrontends> frontends;
  if (clients) {
    SERF_ASSIGN_OR_RETURN(
        frontends, ServeFrontends::Start(o.frontends, o.runtime, session, controller, plan.table));
  }
  SERF_ASSIGN_OR_RETURN(
      std::unique_ptr<serve::SelfCalibration> calibration,
      start_self_calibration(o.recalibrate, o.frontends.profile, session, plan.table, o.min_dwell_s,
                             controller, frontends ? frontends->metrics() : nullptr));
  size_t next = 0;
  serve::SchedulerHook hook = [&](double now_s, double) -> std::optional<Configuration> {
    std::optional<Configuration> want;
    while (next < plan.schedule.size() && plan.schedule[next].at_s <= now_s) {
      want = plan.schedule[next++].config;
    }
    return want;
  };
  std::vector<serve::OverloadNote> overloads;
  serve::OverloadHook on_overload = [&](const serve::OverloadNote& note) {
    serve::OverloadNote n = note;
    n.at_s = controller.now_s();  // the clock of the switches in --out
    overloads.push_back(n);
    print_overload(n, o.table);
  };
  if (plan.table) {
    // Self-calibrating: the newest table re-planned in the background; else the one given.
    // Both switch by table_hook's rule, overloads included, through the switch gate.
    SERF_ASSIGN_OR_RETURN(serve::SwitchFilter gate,
                          switch_gate(o, plan, session, calibration.get(), controller,
                                      frontends ? frontends->metrics() : nullptr));
    const serve::RateBand band{o.rate_window_s, o.rate_band_sd};
    hook = calibration && plan.table->objective == "mean"
               ? calibration->scheduler_hook(on_overload, gate, band)
               : serve::table_hook(*plan.table, o.min_dwell_s, on_overload, gate, band);
  }
  std::vector<serve::Recalibration> recalibrations;
  auto report = [&] {
    if (calibration) recalibrations = calibration->recalibrations();
    return serve::write_run_report(controller, o.out, session.model_name, overloads,
                                   calibration ? &recalibrations : nullptr);
  };
  std::vector<double> arrival_s;
  if (!plan.load.empty()) {
    SERF_ASSIGN_OR_RETURN(arrival_s,
                          serve::stepped_arrivals(plan.load, o.requests, o.runtime.seed,
                                                  plan.arrivals.kind, plan.arrivals.scv));
  }
  // On a fault too, and first thing on SIGTERM: the measurements so far go to disk before
  // mpirun's SIGKILL can come.
  std::optional<Status> written;
  controller.set_terminated_hook([&] { written = report(); });
  Status run = clients ? controller.serve(hook, plan.load.empty() ? nullptr : &arrival_s)
                       : controller.run_open_loop(arrival_s, hook);
  if (frontends) frontends->stop();  // every request they handed over has ended
  controller.set_terminated_hook(nullptr);
  if (!written) written = report();
  serve::print_run_summary(controller, std::cout);
  SERF_RETURN_IF_ERROR(serve_outcome(o, controller, run, journal.get(), *written));
  if (o.plot.empty()) return Status::Ok();
  std::cout.flush();
  return run_plot_script("plot_serve.py", {o.out, o.plot});
}

Status run_serve(const ServeOptions& o) {
  // Flags are checked inside the runtime, on every rank, so only rank 0 prints the error.
  return end_runtime(launch_runtime(o.runtime, [&](RuntimeSession& session) -> Status {
    ServePlan plan;
    SERF_RETURN_IF_ERROR(plan_serve(o, session, &plan));
    session.prepare_ahead = ahead_configurations(o, plan);
    session.ahead_memory_bytes = o.ahead_memory_mb * (1 << 20);
    return session.run_controller([&](serve::Controller& controller) -> Status {
      return serve_on_controller(o, plan, session, controller);
    });
  }));
}

// One timed run's answers (b rows, in order) into `p`: the batch's service time, its per-layer
// times (the same batch for every row) and the rows' outputs one after another.
Status add_infer_run(const std::vector<serve::InferAnswer>& answers, double service_ms,
                     size_t out_floats, bool timed, InferPrint* p) {
  const size_t layers = p->layer_names.size();
  std::vector<float> output;
  for (const serve::InferAnswer& answer : answers) {
    if (answer.outcome != serve::Outcome::kAnswered) return Internal(answer.reason);
    if (answer.output.size() != out_floats || answer.layers.size() != layers) {
      return Internal("the unit leader returned " + std::to_string(answer.output.size()) +
                      " output values and " + std::to_string(answer.layers.size()) +
                      " layer times, expected " + std::to_string(out_floats) + " and " +
                      std::to_string(layers));
    }
    output.insert(output.end(), answer.output.begin(), answer.output.end());
  }
  if (!timed) return Status::Ok();
  p->total_ms.push_back(service_ms);
  const serve::InferAnswer& first = answers.front();
  for (size_t i = 0; i < layers; ++i) {
    p->compute_ms[i].push_back(first.layers[i].compute_ms);
    p->exchange_ms[i].push_back(first.layers[i].exchange_ms);
    p->fused[i] = first.layers[i].fused != 0 ? 1 : 0;
  }
  p->output = std::move(output);
  return Status::Ok();
}

}  // namespace

Status run_infer_inter(const RuntimeFlags& flags, const Configuration& config, int repeat,
                       bool json, const std::string& output_out) {
  return end_runtime(launch_runtime(flags, [&](RuntimeSession& session) -> Status {
    SERF_RETURN_IF_ERROR(session.check_configuration(config, "--inter"));
    if (config.inter != session.nodes) {
      return InvalidArgument("--inter " + std::to_string(config.inter) +
                             ": run it under mpirun -np " + std::to_string(config.inter + 1) +
                             " (one controller and K nodes); this job has " +
                             std::to_string(session.nodes) + " node rank(s)");
    }
    return session.run_controller([&](serve::Controller& controller) -> Status {
      SERF_RETURN_IF_ERROR(controller.configure(config));
      InferPrint p;
      p.model = session.model_name;
      p.backend = session.backend_name;
      p.threads = config.intra;
      p.inter = config.inter;
      p.inter_kind = "MPI nodes";
      p.repeat = repeat;
      p.batch = config.batch;
      p.output_out = output_out;
      p.layer_names = session.layer_names;
      p.layer_types = session.layer_types;
      const size_t layers = p.layer_names.size();
      p.compute_ms.assign(layers, {});
      p.exchange_ms.assign(layers, {});
      p.fused.assign(layers, 0);
      // The b rows of the session's input, each its own request, queued together: one batch.
      const size_t rows = static_cast<size_t>(config.batch);
      const size_t row = session.input.size() / rows;
      std::vector<std::shared_ptr<const std::vector<float>>> inputs;
      for (size_t r = 0; r < rows; ++r) {
        const auto first = session.input.begin() + static_cast<std::ptrdiff_t>(r * row);
        inputs.push_back(std::make_shared<const std::vector<float>>(
            first, first + static_cast<std::ptrdiff_t>(row)));
      }
      for (int r = 0; r <= repeat; ++r) {  // run 0 warms up, as in the single-process command
        SERF_ASSIGN_OR_RETURN(std::vector<serve::InferAnswer> answers,
                              controller.infer_all(inputs));
        SERF_RETURN_IF_ERROR(add_infer_run(answers, controller.records().back().service_ms,
                                           static_cast<size_t>(session.output_floats), r > 0, &p));
      }
      return print_infer(p, json);
    });
  }));
}

namespace {

// serve's workload: the initial configuration and its switches (--schedule, or --table by the
// measured rate), and the generated arrivals (--rate or --load). Returns the --table option.
CLI::Option* add_serve_workload_flags(CLI::App* sub, ServeOptions* serve) {
  sub->add_option(
      "--config", serve->config,
      "initial configuration c,K,T or c,K,T,b (batches at once, nodes per batch, threads per "
      "node, requests per batch at most; b defaults to 1)");
  sub->add_option("--schedule", serve->schedule,
                  "switches \"SECONDS:c,K,T[,b];...\" (seconds from the start of the run)");
  sub->add_option("--max-batch-delay-us", serve->max_batch_delay_us,
                  "with b > 1: a free slot with fewer than b requests waiting waits until b "
                  "wait or the oldest has waited this long, microseconds (default 0: takes what "
                  "waits, never waits)")
      ->check(finite_range(0, 60e6));
  auto* rate = sub->add_option("--rate", serve->rate_per_s,
                               "arrival rate over the whole cluster, requests/s (Poisson)")
                   ->check(positive_finite());
  auto* load = sub->add_option("--load", serve->load,
                               "a load that changes: \"SECONDS:RATE;...\" from 0 s (requests/s)");
  rate->excludes(load);
  auto* table =
      sub->add_option("--table", serve->table,
                      "configuration table (serf-table/1, from `serf plan`): switch online "
                      "to the table's configuration for the measured arrival rate");
  table->excludes("--schedule");
  serve->arrivals.add(sub, "");
  return table;
}

// What --table switching may do (each needs --table: alone it would be silently ignored).
void add_serve_table_flags(CLI::App* sub, ServeOptions* serve, CLI::Option* table) {
  sub->add_option("--switch-cost", serve->switch_cost,
                  "with --table: on: take a switch only when the latency it saves over its "
                  "expected dwell exceeds the wait its measured drain and reconfiguration add "
                  "(docs/serving.md); off: every switch the table names (default off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->needs(table);
  sub->add_option("--prepare-ahead", serve->prepare_ahead,
                  "with --table: on: real nodes prepare the kernels of every configuration of the "
                  "table at the start and hold them, so no switch prepares any (while memory "
                  "allows; docs/serving.md); off: each at its first switch (default on)")
      ->check(CLI::IsMember({"on", "off"}))
      ->needs(table);
  sub->add_option("--ahead-memory-mb", serve->ahead_memory_mb,
                  "with --prepare-ahead on: MiB of weights each node rank may hold ahead, for a "
                  "machine shared with other jobs: a (K, T, b) is prepared ahead only while this "
                  "less what the rank holds is at least twice what it may add, as MemAvailable "
                  "must be; the rest at their first switch (default: MemAvailable alone)")
      ->check(finite_range(0.001, 1 << 30))
      ->needs(table);
  sub->add_option("--min-dwell", serve->min_dwell_s,
                  "with --table: seconds at least between two switches (hysteresis)")
      ->check(finite_range(0, 86400))
      ->needs(table);
  sub->add_option("--rate-band", serve->rate_band_sd,
                  "with --table: standard deviations of the measured rate (a Poisson count over "
                  "--rate-window) by which the rate must fall below every level naming the "
                  "running configuration before the table switches to a lighter load's; switches "
                  "to a heavier load's do not wait; 0: none (default 2; docs/runtime.md)")
      ->check(finite_range(0, 10))
      ->needs(table);
}

// The rate monitor, the self-calibration, the generated requests' count and the files serve writes.
void add_serve_output_flags(CLI::App* sub, ServeOptions* serve) {
  sub->add_option("--recalibrate", serve->recalibrate,
                  "on: follow the machine's service time while serving (a CUSUM per tuple; a "
                  "sustained drift updates the profile and re-plans the --table in the "
                  "background; docs/calibration.md); off: keep the profile as given (default on)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--rate-window", serve->rate_window_s,
                  "seconds of arrivals the rate monitor averages over")
      ->check(positive_finite());
  // Clients of --http/--grpc alone send their own requests: nothing is generated.
  const std::string generated = " (the generated requests; clients send their own)";
  sub->add_option("--requests", serve->requests, "with --rate or --load: requests to send (count)")
      ->check(at_least(1))
      ->check(only_with(sub, {"--rate", "--load"}, generated));
  for (CLI::Option* o : {serve->arrivals.kind_opt, serve->arrivals.scv_opt})
    o->check(only_with(sub, {"--rate", "--load"}, generated));
  add_output(sub, "--out", &serve->out,
             "measurements: JSON here and CSV beside it (FILE.csv, also written row by row as "
             "results arrive, so a fault leaves it); none when not given",
             false);
  add_output(sub, "--plot", &serve->plot,
             "also draw latency over time, the arrival rate and every switch to this PNG "
             "(scripts/plot_serve.py; needs --out)",
             false);
}

}  // namespace

void register_mpi_commands(CLI::App& app, CommandRegistry& registry) {
  auto serve = std::make_shared<ServeOptions>();
  auto* sub = app.add_subcommand(
      "serve",
      "Serve Poisson arrivals on N nodes under mpirun (rank 0 controls, ranks 1..N compute), "
      "switching\n"
      "configuration online per --schedule; writes every request's latency (from its scheduled "
      "arrival).\n"
      "  mpirun -np 5 serf serve --emulate profile.json --config 1,1,1 --rate 50 --requests 500");
  add_runtime_flags(sub, &serve->runtime);
  serve->runtime.graceful_stop = true;
  // serve --emulate P --model M: emulated nodes, the front ends take M's tensor shapes.
  sub->get_option("--model")->remove_excludes(sub->get_option("--emulate"));
  sub->get_option("--emulate")->remove_excludes(sub->get_option("--model"));
  add_frontend_flags(sub, &serve->frontends);
  CLI::Option* table = add_serve_workload_flags(sub, serve.get());
  add_serve_table_flags(sub, serve.get(), table);
  add_serve_output_flags(sub, serve.get());
  registry.add(
      sub, [serve] { return run_serve(*serve); }, [] { return true; });

  register_profile_command(app, registry);
}

}  // namespace serf::cli
