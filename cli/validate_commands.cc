// validate: the queueing model's predictions against an exhaustive measurement.
//   serf validate --profile P.json --measured EX.json [--queue NAME|all] [--nodes N] --out R.json
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/plot.h"
#include "profiler/cost.h"
#include "profiler/validation_io.h"
#include "serf/core/statistics.h"
#include "serf/io/json_fields.h"
#include "serf/io/profile_io.h"

namespace serf::cli {
namespace {

struct ValidateFlags {
  std::string profile;
  std::vector<std::string> measured;
  std::string queue = "md-interf";
  int nodes = 0;  // 0: the measurement's (or the profile's) node count
  std::string out;
  std::string plot;              // PNG; empty: none
  bool include_invalid = false;  // also compare points the measurement judged INVALID
};

// What the measured files hold besides their points: their cost, and the points left out.
struct MeasuredTotals {
  int points = 0;                                // all points in the files
  double wall_s = 0;                             // what measuring them cost
  bool wall_known = true;                        // every file says what it cost
  int judged = 0;                                // points with a verdict (precision-driven)
  std::vector<profiler::MeasuredPoint> invalid;  // left out (or compared: --include-invalid)
};

// The calibration cost (the paper's Table II), printed; the JSON block for the report.
nlohmann::json print_cost(const Profile& profile, const MeasuredTotals& totals,
                          const profiler::ModelValidation& first) {
  const profiler::CalibrationCost c = profiler::calibration_cost(
      profile, totals.points, totals.wall_known ? totals.wall_s : 0, first);
  std::printf("calibration cost (the paper's Table II):\n");
  std::printf("  tuple profile            %10.1f s  (%d tuples)\n", c.profile_wall_s, c.tuples);
  std::printf("  exhaustive measurement   %10.1f s  (%d points)\n", c.exhaustive_wall_s, c.points);
  if (c.ratio > 0) {
    std::printf("  ratio                    %10.1fx\n", c.ratio);
  } else {
    std::printf("  ratio                    unknown (a file does not record its wall time)\n");
  }
  std::printf("  same best configuration  %d/%d rates exactly, %d/%d within the measured CI (%s)\n",
              c.same_best, c.rates, c.same_best_within_ci, c.rates, to_string(first.queue));
  return {{"tuples", c.tuples},
          {"profile_wall_s", c.profile_wall_s},
          {"exhaustive_points", c.points},
          {"exhaustive_wall_s", c.exhaustive_wall_s},
          {"ratio", c.ratio > 0 ? nlohmann::json(c.ratio) : nlohmann::json(nullptr)},
          {"queue", to_string(first.queue)},
          {"rates_compared", c.rates},
          {"same_best", c.same_best},
          {"same_best_within_ci", c.same_best_within_ci}};
}

// "validated ... (3 INVALID points left out: ...)".
void print_invalid(const MeasuredTotals& totals, bool included) {
  if (totals.judged == 0) {
    std::printf(
        "points: none judged VALID/INVALID (fixed request counts; measure with "
        "serf profile --exhaustive --precision P to judge them)\n");
    return;
  }
  std::printf(
      "points: %d of %d judged VALID; %zu INVALID %s\n",
      totals.judged - static_cast<int>(totals.invalid.size()), totals.judged, totals.invalid.size(),
      included ? "compared too (--include-invalid)" : "left out (--include-invalid compares them)");
  for (const profiler::MeasuredPoint& p : totals.invalid) {
    std::printf("  INVALID %s at %g/s: %s\n", to_string(p.config).c_str(), p.rate_per_s,
                p.verdict.c_str());
  }
}

std::string hw_text(const Hardware& h) {
  return std::to_string(h.nodes) + " nodes x " + std::to_string(h.cores_per_node) + " cores";
}

// REPORT.json -> REPORT.csv; any other name gets ".csv" appended.
std::string csv_path(const std::string& out) {
  const std::string ext = ".json";
  if (out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0) {
    return out.substr(0, out.size() - ext.size()) + ".csv";
  }
  return out + ".csv";
}

// One row per queue model of the summary `which`; with_ci adds the "in 95% CI" column.
void print_error_table(const profiler::ValidationReport& report,
                       profiler::ErrorSummary profiler::ModelValidation::*which, bool with_ci) {
  std::printf("%-14s %6s %7s %7s %7s %7s", "queue", "points", "mean", "median", "p95", "max");
  std::printf(with_ci ? " %10s\n" : "\n", "in 95% CI");
  for (const profiler::ModelValidation& mv : report.models) {
    const profiler::ErrorSummary& t = mv.*which;
    std::printf("%-14s %6d %7s %7s %7s %7s", to_string(mv.queue), t.count,
                format_percent(t.mean).c_str(), format_percent(t.median).c_str(),
                format_percent(t.p95).c_str(), format_percent(t.max).c_str());
    const std::string ci = std::to_string(t.within_ci95) + "/" + std::to_string(t.count);
    std::printf(with_ci ? " %10s\n" : "\n", ci.c_str());
  }
}

Status run_validate(const ValidateFlags& f) {
  std::vector<InputFile> files{{"--profile", f.profile}};
  for (const std::string& m : f.measured) files.push_back({"--measured", m});
  SERF_RETURN_IF_ERROR(check_output_path("--out", f.out, files));
  SERF_RETURN_IF_ERROR(check_output_path("--out", csv_path(f.out), files));
  if (!f.plot.empty()) SERF_RETURN_IF_ERROR(check_output_path("--plot", f.plot, files));
  if (!f.plot.empty()) SERF_RETURN_IF_ERROR(check_plot_path("--plot", f.plot));
  std::vector<QueueKind> queues;
  if (f.queue == "all") {
    queues = {QueueKind::kMdInterf, QueueKind::kMmInterf,     QueueKind::kMdc,
              QueueKind::kMmc,      QueueKind::kAllenCunneen, QueueKind::kMdcExact};
  } else {
    auto q = parse_queue_kind(f.queue);
    if (!q.ok()) return q.status().with_context("--queue (or 'all')");
    queues = {*q};
  }
  SERF_ASSIGN_OR_RETURN(Profile profile, io::load_profile(f.profile));

  // Every measured file must be of the profile's model and hardware.
  std::vector<profiler::MeasuredPoint> points;
  MeasuredTotals totals;
  int nodes = f.nodes;
  for (const std::string& path : f.measured) {
    SERF_ASSIGN_OR_RETURN(profiler::MeasuredSet m, profiler::load_measured(path));
    if (m.model != profile.model) {
      return InvalidArgument(path + ": measured model '" + m.model + "' but " + f.profile +
                             " profiles '" + profile.model + "'; validate a model's own profile");
    }
    if (m.has_hardware) {
      if (m.hardware.cores_per_node != profile.hardware.cores_per_node ||
          (f.nodes == 0 && m.hardware.nodes != profile.hardware.nodes)) {
        return InvalidArgument(path + ": measured on " + hw_text(m.hardware) + " but " + f.profile +
                               " was profiled on " + hw_text(profile.hardware) +
                               (m.hardware.cores_per_node == profile.hardware.cores_per_node
                                    ? "; give --nodes to validate at another node count"
                                    : "; profile the hardware you measure on"));
      }
      if (nodes != 0 && m.hardware.nodes != nodes) {
        return InvalidArgument(path + ": measured on " + std::to_string(m.hardware.nodes) +
                               " nodes, not " + std::to_string(nodes) +
                               (f.nodes ? " (--nodes)" : " (the other --measured files)"));
      }
      nodes = m.hardware.nodes;
    }
    double file_wall = m.total_wall_s;
    if (file_wall < 0) {
      file_wall = 0;
      for (const profiler::MeasuredPoint& p : m.points) file_wall += p.wall_s;
    }
    totals.wall_known = totals.wall_known && file_wall > 0;
    totals.wall_s += file_wall;
    for (profiler::MeasuredPoint& p : m.points) {
      ++totals.points;
      if (p.valid >= 0) ++totals.judged;
      if (p.valid == 0) totals.invalid.push_back(p);
      if (p.valid != 0 || f.include_invalid) points.push_back(p);
    }
  }
  if (points.empty()) {
    return InvalidArgument("--measured: all " + std::to_string(totals.points) +
                           " points are INVALID (give --include-invalid to compare them anyway)");
  }
  if (nodes == 0) nodes = profile.hardware.nodes;

  SERF_ASSIGN_OR_RETURN(profiler::ValidationReport report,
                        profiler::validate_predictions(profile, points, nodes, queues));
  const profiler::ValidationInputs inputs{f.profile, f.measured, profile.model};
  nlohmann::json doc = profiler::validation_json(report, inputs);

  std::printf("validated %zu measured points of %s on %d nodes x %d cores against %s\n",
              points.size(), profile.model.c_str(), nodes, profile.hardware.cores_per_node,
              f.profile.c_str());
  print_invalid(totals, f.include_invalid);
  doc["points_measured"] = totals.points;
  doc["points_judged"] = totals.judged;
  doc["points_invalid"] = totals.invalid.size();
  doc["invalid_compared"] = f.include_invalid;
  std::printf("relative error |predicted - measured| / measured of the mean latency:\n");
  std::printf("%-14s %6s %8s %7s %7s %7s %7s %10s %10s %16s\n", "queue", "points", "unstable",
              "mean", "median", "p95", "max", "in 95% CI", "planner", "penalty mean/max");
  for (const profiler::ModelValidation& mv : report.models) {
    const profiler::ErrorSummary& s = mv.summary;
    const std::string ci =
        s.with_ci95 ? std::to_string(s.within_ci95) + "/" + std::to_string(s.with_ci95) : "-";
    const std::string planner = std::to_string(mv.matches) + "/" + std::to_string(mv.rates.size());
    const std::string penalty =
        mv.rates.empty() ? "-"
                         : format_percent(mv.mean_penalty) + "/" + format_percent(mv.max_penalty);
    std::printf("%-14s %6d %8d %7s %7s %7s %7s %10s %10s %16s\n", to_string(mv.queue), s.count,
                s.unstable, format_percent(s.mean).c_str(), format_percent(s.median).c_str(),
                format_percent(s.p95).c_str(), format_percent(s.max).c_str(), ci.c_str(),
                planner.c_str(), penalty.c_str());
  }
  std::printf(
      "the same over the points whose measured service time is within %.0f%% of the profile's "
      "(the machine as profiled):\n",
      100 * profiler::kMaxServiceDrift);
  print_error_table(report, &profiler::ModelValidation::steady_summary, false);
  std::printf(
      "the queue model alone: each prediction re-made with the configuration's service times "
      "scaled to the point's measured service time (the profile's error taken out):\n");
  print_error_table(report, &profiler::ModelValidation::rescaled_summary, false);
  if (report.models.front().adjusted_summary.count > 0) {
    std::printf(
        "against the sample-path estimate: each measured mean corrected by replaying its own "
        "arrivals through the model's queue (measured - replay + the replay's long-run mean; "
        "arrival luck cancels):\n");
    print_error_table(report, &profiler::ModelValidation::adjusted_summary, true);
  }
  std::printf("relative error of the p99 (tail approximation; points of >= %d requests):\n",
              profiler::kMinRequestsForP99);
  print_error_table(report, &profiler::ModelValidation::p99_summary, false);
  const profiler::ErrorSummary& first = report.models.front().summary;
  if (first.with_ci95 > 0) {
    std::printf("measurement: mean 95%% CI half-width %s of the measured mean (batch means)\n",
                format_percent(first.mean_ci95_rel).c_str());
  }
  std::printf(
      "planner: rates measured on 2+ configurations where the lowest predicted mean is the "
      "measured best; penalty = measured latency of that pick / measured best - 1\n");
  if (report.models.front().adjusted_rates > 0) {
    std::printf(
        "planner against the sample-path estimates (the best by estimate, not by raw mean):");
    for (const profiler::ModelValidation& mv : report.models) {
      std::printf(" %s %d/%d;", to_string(mv.queue), mv.adjusted_matches, mv.adjusted_rates);
    }
    std::printf("\n");
  }
  if (first.unstable > 0) {
    std::printf("skipped as unstable under %s (predicted utilization >= 1):",
                to_string(report.models.front().queue));
    for (const auto& r : report.models.front().points) {
      if (!r.prediction.stable) {
        std::printf(" %s at %g/s;", to_string(r.measured.config).c_str(), r.measured.rate_per_s);
      }
    }
    std::printf("\n");
  }
  doc["cost"] = print_cost(profile, totals, report.models.front());
  if (profile.illustrative) std::printf("note: this profile is illustrative, not measured\n");
  SERF_RETURN_IF_ERROR(io::write_text_file(f.out, doc.dump(1) + "\n"));
  SERF_RETURN_IF_ERROR(io::write_text_file(csv_path(f.out), profiler::validation_csv(report)));
  std::printf("wrote %s %s\n", f.out.c_str(), csv_path(f.out).c_str());
  if (!f.plot.empty()) {
    std::fflush(stdout);
    SERF_RETURN_IF_ERROR(run_plot_script("plot_validation.py", {f.out, f.plot}));
  }
  return Status::Ok();
}

}  // namespace

void register_validate_commands(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<ValidateFlags>();
  auto* sub = app.add_subcommand(
      "validate",
      "Compare the queueing model's predicted mean latency with an exhaustive measurement\n"
      "(mpirun ... serf profile --exhaustive) at every measured (configuration, rate) point:\n"
      "relative errors, their mean/median/p95/max, and whether the planner picks the measured "
      "best.\n"
      "  serf validate --profile p.json --measured ex.json --queue all --out report.json");
  sub->add_option("--profile", f->profile, "serf-profile/1 file the predictions come from")
      ->check(non_empty_path())
      ->required();
  sub->add_option("--measured", f->measured,
                  "serf-exhaustive/1 file(s) of measured mean latencies (repeat the flag for more)")
      ->required();
  add_queue(sub, &f->queue, /*allow_all=*/true);
  sub->add_flag("--include-invalid", f->include_invalid,
                "also compare the points the measurement judged INVALID (serf profile "
                "--exhaustive --precision); by default only VALID (and unjudged) points");
  add_nodes(sub, &f->nodes,
            "cluster size N, nodes (default: the measurement's, else the profile's)");
  add_output(sub, "--out", &f->out,
             "report: serf-validation/1 JSON at FILE, one CSV row per point at FILE with .csv "
             "for .json",
             true);
  add_output(sub, "--plot", &f->plot,
             "also draw predicted against measured latency and the error against utilization to "
             "this PNG (scripts/plot_validation.py)",
             false);
  registry.add(sub, [f] { return run_validate(*f); });
}

}  // namespace serf::cli
