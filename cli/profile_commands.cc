// serf profile: tuple profiling and the exhaustive baseline under mpirun (issue 4).
//   mpirun -np N+1 serf profile --model FILE --cores-per-node F [--inter LIST] --out profile.json
//   mpirun -np N+1 serf profile --emulate P --exhaustive --rates 10,20 --requests 200 --out ex.json
//   mpirun -np N+1 serf profile --model FILE --refresh old.json --drift run.json --out new.json
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/flags.h"
#include "cli/plot.h"
#include "cli/progress.h"
#include "cli/runtime_launch.h"
#include "profiler/profile_refresh.h"
#include "profiler/profile_report.h"
#include "profiler/tuple_profiler.h"
#include "serf/core/arrivals.h"
#include "serf/core/rate_spec.h"
#include "serf/io/json_fields.h"
#include "serf/io/profile_io.h"

namespace serf::cli {

namespace {

struct ProfileFlags {
  RuntimeFlags runtime;
  std::string inter;
  std::string batches = "1";  // --batches: b of the tuples (i, K, T, b)
  int samples = 10;
  int passes = 1;
  bool side_by_side = false;      // --side-by-side: each tuple on every unit of K nodes at once
  std::string idle_probe = "on";  // --idle-probe: each tuple's idle-arrival penalty measured
  int warmup = -1;                // < 0: the mode's default
  std::string out;
  bool exhaustive = false;
  std::string rates;
  std::string utilizations;
  std::string capacity_profile;
  int requests = 100;
  int fresh_tuples = 0;  // --fresh-tuples N: the tuples re-measured before each point
  // --precision: every point runs until its mean's 95 % CI is within the target (or a cap).
  PrecisionFlags precision;  // off: fixed --requests
  int max_requests = 20000;
  double max_duration_s = 300;
  const CLI::Option* requests_flag = nullptr;
  const CLI::Option* warmup_flag = nullptr;
  ArrivalFlags arrivals;     // --arrivals, --arrival-scv (with --exhaustive)
  ProgressOptions progress;  // --quiet, --progress-every
  std::string refresh;       // --refresh OLD: re-measure some of its tuples
  std::string drift;         // --drift RUN: the tuples its recalibrations name
  const CLI::Option* inter_flag = nullptr;
  const CLI::Option* batches_flag = nullptr;
};

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

// The tuples of `old` to measure again: those --drift's run recalibrated, else those --inter and
// --batches select (all by default). Empty: nothing to refresh (said on stdout).
StatusOr<std::vector<ParallelismTuple>> refresh_selection(const ProfileFlags& f, const Profile& old,
                                                          std::string* why) {
  if (!f.drift.empty()) {
    if (given(f.inter_flag) || given(f.batches_flag))
      return InvalidArgument(
          "--inter/--batches: with --drift the run names the tuples to "
          "re-measure; give one or the other");
    SERF_ASSIGN_OR_RETURN(nlohmann::json run, io::read_json_file(f.drift));
    SERF_ASSIGN_OR_RETURN(auto tuples, profiler::drifted_tuples(run, f.drift, old));
    *why = "the drift seen in " + f.drift;
    return tuples;
  }
  std::vector<int> inter, batches;
  if (given(f.inter_flag)) {
    SERF_ASSIGN_OR_RETURN(inter, profiler::parse_int_list(f.inter, "--inter"));
  }
  if (given(f.batches_flag)) {
    SERF_ASSIGN_OR_RETURN(batches, profiler::parse_int_list(f.batches, "--batches"));
  }
  auto tuples = profiler::select_tuples(old, inter, batches);
  if (tuples.empty())
    return InvalidArgument("--inter/--batches: no tuple of " + f.refresh +
                           " has the K and b given; give values its tuples have");
  *why = inter.empty() && batches.empty() ? "all tuples" : "the tuples --inter/--batches select";
  return tuples;
}

// serf profile --refresh OLD [--drift RUN]: re-measure on the nodes only the tuples whose drift
// was seen; keep the others scaled by their neighbours' drift (docs/calibration.md).
Status run_refresh(const ProfileFlags& f, RuntimeSession& session, int warmup) {
  if (f.refresh.empty()) return InvalidArgument("--drift: only with --refresh OLD_PROFILE");
  if (f.exhaustive || f.precision.on())
    return InvalidArgument("--refresh: re-measures tuples; not with --exhaustive or --precision");
  std::vector<InputFile> inputs = runtime_inputs(f.runtime);
  inputs.push_back({"--refresh", f.refresh});
  inputs.push_back({"--drift", f.drift});
  SERF_RETURN_IF_ERROR(check_output_path("--out", f.out, inputs));
  SERF_ASSIGN_OR_RETURN(Profile old, io::load_profile(f.refresh));
  if (old.model != session.model_name)
    return InvalidArgument("--refresh " + f.refresh + ": profiled model \"" + old.model +
                           "\", this run has \"" + session.model_name +
                           "\"; refresh it with the model it was profiled on");
  // The files first (the --drift run names tuples of `old`), then the nodes they run on.
  std::string why;
  SERF_ASSIGN_OR_RETURN(std::vector<ParallelismTuple> tuples, refresh_selection(f, old, &why));
  SERF_RETURN_IF_ERROR(session.need_nodes());
  const Hardware hw{session.nodes, session.cores_per_node};
  if (old.hardware.nodes != hw.nodes || old.hardware.cores_per_node != hw.cores_per_node)
    return InvalidArgument("--refresh " + f.refresh + ": profiled on " +
                           std::to_string(old.hardware.nodes) + " node(s) x " +
                           std::to_string(old.hardware.cores_per_node) + " core(s), this run has " +
                           std::to_string(hw.nodes) + " x " + std::to_string(hw.cores_per_node) +
                           "; refresh it on the hardware it was profiled on");
  if (tuples.empty()) {  // a run that saw no drift: nothing is wrong, nothing to do
    if (session.rank == 0)
      std::cout << "nothing to refresh: " << f.drift
                << " has no recalibrations (the run saw no drift); " << f.out << " not written\n";
    return Status::Ok();
  }
  return session.run_controller([&](serve::Controller& controller) -> Status {
    profiler::TupleProfileOptions o{session.model_name, hw, {}, f.samples, warmup, f.passes};
    o.tuples = tuples;
    o.side_by_side = f.side_by_side;
    o.idle_probe = f.idle_probe == "on";
    Profile measured;
    SERF_RETURN_IF_ERROR(
        profiler::run_tuple_profile(controller, o, make_progress("refresh", f.progress), &measured)
            .status());
    profiler::RefreshSummary sum;
    SERF_ASSIGN_OR_RETURN(Profile fresh,
                          profiler::merge_refresh(old, measured, utc_now(), why, &sum));
    profiler::print_refresh_table(old, measured, fresh, sum);
    SERF_RETURN_IF_ERROR(io::save_profile(fresh, f.out));
    std::cout << "wrote " << f.out << "\n";
    return Status::Ok();
  });
}

// --precision and its companions; --requests and --warmup belong to fixed-count points.
Status check_precision_flags(const ProfileFlags& f) {
  if (!f.precision.on()) return Status::Ok();
  if (f.requests_flag != nullptr && f.requests_flag->count() > 0)
    return InvalidArgument(
        "--requests: with --precision each point runs until precise (caps: --max-requests, "
        "--max-duration); give one or the other");
  if (f.warmup_flag != nullptr && f.warmup_flag->count() > 0)
    return InvalidArgument(
        "--warmup: with --precision the warm-up is cut from the data (MSER-5); give one or the "
        "other");
  const profiler::PrecisionTarget& t = f.precision.target;
  if (f.max_requests < t.min_requests)
    return InvalidArgument("--max-requests " + std::to_string(f.max_requests) +
                           ": must be >= --min-requests " + std::to_string(t.min_requests));
  if (f.max_duration_s < t.min_duration_s)
    return InvalidArgument("--max-duration " + std::to_string(f.max_duration_s) +
                           ": must be >= --min-duration " + std::to_string(t.min_duration_s));
  return Status::Ok();
}

// What a run measures, from the flags checked on every rank before the first request.
struct ProfilePlan {
  int warmup = 0;
  std::vector<double> rates, utilizations;    // --exhaustive: one of them
  std::unique_ptr<Profile> capacity_profile;  // with --utilizations
  std::vector<int> inter, batches;
};

// --rates or --utilizations (with --capacity-profile), --requests, --precision and arrivals.
Status check_exhaustive_flags(const ProfileFlags& f, ProfilePlan* plan) {
  if (!f.exhaustive) {
    if (f.precision.on())
      return InvalidArgument("--precision " + std::to_string(f.precision.precision) +
                             ": only with --exhaustive (the tuple profile counts --samples)");
    return Status::Ok();
  }
  if (f.rates.empty() == f.utilizations.empty())
    return InvalidArgument(
        "--exhaustive needs either --rates SPEC (requests/s, e.g. 5,10,20 or 5:50:5) or "
        "--utilizations LIST with --capacity-profile FILE");
  auto parsed = parse_rate_spec(f.rates.empty() ? f.utilizations : f.rates);
  const std::string flag = f.rates.empty() ? "--utilizations" : "--rates";
  if (!parsed.ok()) return parsed.status().with_context(flag);
  (f.rates.empty() ? plan->utilizations : plan->rates) = std::move(parsed).value();
  if (!plan->utilizations.empty()) {
    if (f.capacity_profile.empty())
      return InvalidArgument("--utilizations needs --capacity-profile FILE (a serf-profile/1)");
    SERF_ASSIGN_OR_RETURN(Profile p, io::load_profile(f.capacity_profile));
    plan->capacity_profile = std::make_unique<Profile>(std::move(p));
  }
  if (f.requests < 1) return InvalidArgument("--requests: give at least 1");
  SERF_RETURN_IF_ERROR(check_precision_flags(f));
  return f.arrivals.resolve().status();
}

// --batches: sizes in 1..kMaxBatch, sorted, each once; batch 1 only with --exhaustive.
StatusOr<std::vector<int>> parse_batches(const ProfileFlags& f) {
  SERF_ASSIGN_OR_RETURN(std::vector<int> batches, profiler::parse_int_list(f.batches, "--batches"));
  for (int b : batches) {
    if (b < 1 || b > kMaxBatch)
      return InvalidArgument("--batches: " + std::to_string(b) + " is not a batch size; give " +
                             "sizes in 1.." + std::to_string(kMaxBatch) + " (e.g. 1,2,4,8)");
  }
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  // --exhaustive --batches: every configuration (c, K, T) with each b, its batches dispatched by
  // the controller as serf serve dispatches them; the points carry "batch".
  return batches;
}

// Every flag of a measuring run, checked on every rank before the first request: outputs,
// the exhaustive flags, --inter, --batches, and every tuple or configuration the run will switch
// to (emulated nodes need the emulation profile's tuples of each).
Status plan_profile(const ProfileFlags& f, RuntimeSession& session, ProfilePlan* plan) {
  std::vector<InputFile> inputs = runtime_inputs(f.runtime);
  inputs.push_back({"--capacity-profile", f.capacity_profile});
  SERF_RETURN_IF_ERROR(check_output_path("--out", f.out, inputs));
  if (f.exhaustive) SERF_RETURN_IF_ERROR(check_output_path("--out", f.out + ".csv", inputs));
  SERF_RETURN_IF_ERROR(check_exhaustive_flags(f, plan));
  SERF_RETURN_IF_ERROR(session.need_nodes());  // the files above are named without mpirun
  if (f.inter.empty()) {
    for (int k = 1; k <= session.nodes; k *= 2) plan->inter.push_back(k);
  } else {
    SERF_ASSIGN_OR_RETURN(plan->inter, profiler::parse_int_list(f.inter, "--inter"));
    for (int k : plan->inter)
      SERF_RETURN_IF_ERROR(session.check_configuration({1, k, 1}, "--inter"));
  }
  SERF_ASSIGN_OR_RETURN(plan->batches, parse_batches(f));
  if (!session.emulation) return Status::Ok();
  const std::string flag = "--emulate " + f.runtime.emulate;
  // NOLINTNEXTLINE(bugprone-branch-clone): two loops over different types, alike once expanded
  if (f.exhaustive) {
    for (const Configuration& c : profiler::all_configurations(
             session.nodes, session.cores_per_node, plan->inter, plan->batches))
      SERF_RETURN_IF_ERROR(session.check_configuration(c, flag));
  } else {
    for (const ParallelismTuple& t :
         profiler::profile_tuples(session.nodes, session.cores_per_node, plan->inter))
      SERF_RETURN_IF_ERROR(session.check_configuration({t.service, t.inter, t.intra}, flag));
  }
  return Status::Ok();
}

// The profile's note: how it was measured, and the total wall time.
std::string tuple_profile_note(const ProfileFlags& f, const ProfilePlan& plan, int nodes,
                               double total_s) {
  std::string note = "measured by serf profile on " + std::to_string(nodes) + " node(s), ";
  if (f.passes > 1) {
    note += std::to_string(f.samples) + " samples per tuple in " + std::to_string(f.passes) +
            " passes, each after " + std::to_string(plan.warmup) +
            " warm-up (disturbed passes left out)";
  } else {
    note += std::to_string(plan.warmup) + " warm-up + " + std::to_string(f.samples) +
            " samples per tuple";
  }
  // A tuple (i, K, T, b) is measured with i full batches of b running (closed loop).
  if (plan.batches != std::vector<int>{1}) note += "; full batches of b = " + f.batches;
  if (f.side_by_side) note += "; side by side: each tuple on all floor(N/K) units at once";
  char wall[64];
  std::snprintf(wall, sizeof(wall), "; total wall time %.3f s", total_s);
  return note + wall;
}

// The tuple profile: measures, prints the table, writes what finished (all of it, or the tuples
// measured before a fault, marked incomplete).
Status measure_tuples(const ProfileFlags& f, const ProfilePlan& plan, RuntimeSession& session,
                      serve::Controller& controller) {
  const Hardware hw{session.nodes, session.cores_per_node};
  profiler::TupleProfileOptions o{session.model_name, hw,       plan.inter,  f.samples,
                                  plan.warmup,        f.passes, plan.batches};
  o.side_by_side = f.side_by_side;
  o.idle_probe = f.idle_probe == "on";
  Profile partial;
  auto save_finished = [&](const std::string& note) {
    if (partial.tuples.empty()) return;
    Profile done = partial;
    done.note = "incomplete: " + note;
    done.incomplete = true;
    done.reindex();
    (void)io::save_profile(done, f.out);
  };
  // The finished tuples reach the disk as each one ends, marked incomplete until the last: a rank
  // 0 killed outright (Ctrl-C to mpirun: its SIGKILL follows within milliseconds) left nothing.
  const ProgressFn shown = make_progress("profile", f.progress);
  auto progress = [&](size_t done, size_t total, const std::string& what) {
    if (shown) shown(done, total, what);
    if (done < total)
      save_finished("measuring: " + std::to_string(done) + " of " + std::to_string(total) +
                    " steps finished");
  };
  // First thing on SIGTERM (a node died, the job is cancelled): the finished tuples go to disk
  // before mpirun's SIGKILL can come. Overwritten below when there is time.
  controller.set_terminated_hook([&] { save_finished("the job was terminated"); });
  auto profile = profiler::run_tuple_profile(controller, o, progress, &partial);
  controller.set_terminated_hook(nullptr);
  double total = 0;
  for (const TupleStats& t : partial.tuples) total += t.wall_s;
  const std::string note = tuple_profile_note(f, plan, hw.nodes, total);
  partial.note = profile.ok() ? note : "incomplete: " + profile.status().message();
  partial.incomplete = !profile.ok();
  profiler::print_tuple_table(partial, f.passes > 1, total);
  if (!partial.tuples.empty()) SERF_RETURN_IF_ERROR(io::save_profile(partial, f.out));
  if (!profile.ok()) {
    if (partial.tuples.empty()) return profile.status();
    return Status(profile.status().code(), profile.status().message() + "; wrote the " +
                                               std::to_string(partial.tuples.size()) +
                                               " finished tuple(s) to " + f.out);
  }
  std::cout << "wrote " << f.out << "\n";
  return Status::Ok();
}

// The exhaustive baseline: every configuration at every rate; the finished points are written
// (JSON and CSV) even after a fault.
Status measure_exhaustive(const ProfileFlags& f, const ProfilePlan& plan, RuntimeSession& session,
                          serve::Controller& controller) {
  const ArrivalFlags::Resolved arrivals = *f.arrivals.resolve();  // checked by plan_profile
  const Hardware hw{session.nodes, session.cores_per_node};
  profiler::ExhaustiveOptions o;
  o.hardware = hw;
  o.inter = plan.inter;
  o.batches = plan.batches;
  o.rates_per_s = plan.rates;
  o.utilizations = plan.utilizations;
  o.capacity_profile = plan.capacity_profile.get();
  o.requests = f.requests;
  o.seed = f.runtime.seed;
  o.warmup = plan.warmup;
  o.arrivals = arrivals.kind;
  o.arrival_scv = arrivals.scv;
  o.precision_driven = f.precision.on();
  o.target = f.precision.target_of();
  o.max_requests = f.max_requests;
  o.max_duration_s = f.max_duration_s;
  o.fresh_samples = f.fresh_tuples;
  profiler::ExhaustiveReport partial;
  auto write = [&] {
    SERF_RETURN_IF_ERROR(
        io::write_text_file(f.out, profiler::exhaustive_json(partial, session.model_name, hw)));
    return io::write_text_file(f.out + ".csv", profiler::exhaustive_csv(partial));
  };
  // As for the tuples: the finished points reach the disk first thing on SIGTERM.
  controller.set_terminated_hook([&] { (void)write(); });
  auto report =
      profiler::run_exhaustive(controller, o, make_progress("exhaustive", f.progress), &partial);
  controller.set_terminated_hook(nullptr);
  SERF_RETURN_IF_ERROR(write());
  if (!report.ok()) {
    return Status(report.status().code(),
                  report.status().message() + "; wrote the " + std::to_string(partial.rows.size()) +
                      " finished point(s) to " + f.out + " and " + f.out + ".csv");
  }
  if (plan.utilizations.empty()) profiler::print_best_per_rate(partial);
  if (o.precision_driven) profiler::print_verdicts(partial, o.target);
  std::cout << std::fixed << std::setprecision(3) << "exhaustive profiling: " << partial.rows.size()
            << " (configuration, rate) points, wall time " << partial.total_wall_s << " s\nwrote "
            << f.out << " and " << f.out << ".csv\n";
  return Status::Ok();
}

// A refresh's files (--refresh, --drift), read and parsed before the nodes load the model (their
// fields against each other and the model: run_refresh, in that order).
Status read_refresh_files(const ProfileFlags& f) {
  if (f.refresh.empty()) return Status::Ok();  // --drift alone: refused in run_refresh
  SERF_RETURN_IF_ERROR(io::load_profile(f.refresh).status());
  if (f.drift.empty()) return Status::Ok();
  return io::read_json_file(f.drift).status();
}

Status run_profile(const ProfileFlags& f) {
  // Flags are checked inside the runtime, on every rank, so only rank 0 prints the error.
  return end_runtime(launch_runtime(
      f.runtime,
      [&](RuntimeSession& session) -> Status {
        if (f.samples < 1)
          return InvalidArgument("--samples: give at least 1 measured request per tuple");
        if (f.passes < 1 || f.passes > f.samples)
          return InvalidArgument("--passes: give 1.." + std::to_string(f.samples) +
                                 " (each pass measures at least one of the --samples)");
        ProfilePlan plan;
        // Tuples: 2 closed-loop requests; exhaustive: 10% of --requests more, left out of the
        // stats.
        plan.warmup = f.warmup >= 0 ? f.warmup : f.exhaustive ? f.requests / 10 : 2;
        if (!f.refresh.empty() || !f.drift.empty()) return run_refresh(f, session, plan.warmup);
        SERF_RETURN_IF_ERROR(plan_profile(f, session, &plan));
        return session.run_controller([&](serve::Controller& controller) -> Status {
          return f.exhaustive ? measure_exhaustive(f, plan, session, controller)
                              : measure_tuples(f, plan, session, controller);
        });
      },
      [&] { return read_refresh_files(f); }));
}

// The exhaustive run's flags: each only with --exhaustive (alone it would be silently ignored).
void add_exhaustive_flags(CLI::App* sub, ProfileFlags* f, CLI::Option* exhaustive) {
  sub->add_option("--rates", f->rates,
                  "with --exhaustive: total arrival rates, requests/s (\"5,10,20\" or \"5:50:5\")")
      ->needs(exhaustive);
  auto* utilizations =
      sub->add_option("--utilizations", f->utilizations,
                      "with --exhaustive, instead of --rates: fractions of each configuration's "
                      "capacity (unitless, e.g. 0.2,0.5,0.9), the capacity predicted from "
                      "--capacity-profile")
          ->needs(exhaustive);
  sub->add_option("--capacity-profile", f->capacity_profile,
                  "serf-profile/1 file the --utilizations capacities come from (floor(N/K) c mu_c)")
      ->needs(utilizations);
  f->requests_flag =
      sub->add_option("--requests", f->requests,
                      "with --exhaustive: measured Poisson requests per (configuration, rate) "
                      "point (count; the warm-up comes on top)")
          ->needs(exhaustive);
  sub->add_option("--fresh-tuples", f->fresh_tuples,
                  "with --exhaustive: before each point, measure its configuration's tuples (1..c, "
                  "K, T) closed-loop, this many samples each, so that serf validate also predicts "
                  "from service times seconds old (batch 1 points; count)")
      ->check(CLI::Range(1, 100000))
      ->needs(exhaustive);
  f->precision.add(sub,
                   "with --exhaustive, instead of --requests: each point VALID or INVALID with "
                   "the reason");
  f->precision.needs_precision(
      sub->add_option("--max-requests", f->max_requests,
                      "with --precision: cap on the arrivals of a point (count)")
          ->check(at_least(1)));
  f->precision.needs_precision(
      sub->add_option("--max-duration", f->max_duration_s,
                      "with --precision: cap on how long arrivals come to a point (seconds)")
          ->check(finite_range(0.001, 86400)));
}

}  // namespace

void register_profile_command(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<ProfileFlags>();
  auto* sub = app.add_subcommand(
      "profile",
      "Measure the service time of every tuple (i, K, T) with i*T <= F, K <= N under mpirun "
      "(closed loop:\n"
      "exactly i requests running on one unit) and write a serf-profile/1 file; or, with "
      "--exhaustive,\n"
      "measure the mean latency of every configuration at every load (the baseline SERF avoids).\n"
      "  mpirun -np 3 serf profile --model m.json --cores-per-node 2 --out profile.json");
  add_runtime_flags(sub, &f->runtime);
  f->inter_flag = sub->add_option(
      "--inter", f->inter,
      "K values to profile, e.g. 1,2,4 (nodes per request; default powers of 2 <= N)");
  f->batches_flag = sub->add_option(
      "--batches", f->batches,
      "batch sizes b to profile, e.g. 1,2,4,8: tuples (i, K, T, b), each the time of "
      "a batch of b with i batches running (\"batch\": b in the profile; default 1) "
      "(--exhaustive: every configuration with each b, batches dispatched as serf serve does)");
  auto* samples = sub->add_option("--samples", f->samples, "measured requests per tuple (count)")
                      ->check(at_least(1));
  auto* passes =
      sub->add_option("--passes", f->passes,
                      "measure every tuple in this many passes over all tuples, --samples split "
                      "between them; passes disturbed by other load (mean beyond 5 % and 3 MADs of "
                      "the median pass) are left out (count; 1: each tuple once)")
          ->check(at_least(1));
  auto* side_by_side = sub->add_flag(
      "--side-by-side", f->side_by_side,
      "measure each tuple of K nodes on all floor(N/K) units at once, pooling their "
      "samples (about N/K times faster; warm-up per unit). Only where each node is its "
      "own machine: units on one host share its cores and would slow each other");
  auto* idle_probe =
      sub->add_option(
             "--idle-probe", f->idle_probe,
             "on (default) or off: after the closed loop, send each tuple of batch 1 a few "
             "requests open loop after idle gaps of 0.1-10 ms and record what they pay "
             "beyond the closed-loop time (\"idle\" in the profile; the queue model adds it "
             "for arrivals that find a free slot; about 1 s per tuple; tuples whose noise would "
             "hide a 0.1 ms penalty, or of about 150 ms and more, are not probed)")
          ->check(CLI::IsMember({"on", "off"}));
  f->warmup_flag =
      sub->add_option("--warmup", f->warmup,
                      "requests run before measuring (count): per tuple and pass (default 2); with "
                      "--exhaustive, extra first arrivals of each point left out of its statistics "
                      "(default 10% of --requests)")
          ->check(at_least(0));
  add_output(sub, "--out", &f->out,
             "output file: serf-profile/1 JSON (with --exhaustive: JSON, and CSV at FILE.csv)",
             true);
  auto* exhaustive = sub->add_flag("--exhaustive", f->exhaustive,
                                   "exhaustive baseline: every configuration at every rate");
  // The tuple profile's counts are not the exhaustive run's, and the other way round: a flag of
  // the other kind would be silently ignored.
  samples->excludes(exhaustive);
  passes->excludes(exhaustive);
  side_by_side->excludes(exhaustive);  // an exhaustive point runs on the whole cluster
  idle_probe->excludes(exhaustive);
  add_exhaustive_flags(sub, f.get(), exhaustive);
  sub->add_option("--refresh", f->refresh,
                  "serf-profile/1 to refresh: re-measure some of its tuples on these nodes (the "
                  "ones --drift names, else those --inter/--batches select, else all), keep the "
                  "others scaled by their neighbours' drift, write the new profile to --out");
  sub->add_option("--drift", f->drift,
                  "with --refresh: a serf serve --out run (serf-run/1) whose recalibrations name "
                  "the tuples to re-measure");
  f->arrivals.add(sub, "with --exhaustive: ");
  f->arrivals.kind_opt->needs(exhaustive);
  f->arrivals.scv_opt->needs(exhaustive);
  add_progress_flags(sub, &f->progress);
  registry.add(
      sub, [f] { return run_profile(*f); }, [] { return true; });
}

}  // namespace serf::cli
