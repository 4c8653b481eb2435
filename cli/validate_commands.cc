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
  std::string queue = to_string(kDefaultQueue);
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

// --queue NAME, or "all": every queue model.
StatusOr<std::vector<QueueKind>> parse_queues(const std::string& name) {
  if (name == "all") return all_queue_kinds();
  auto q = parse_queue_kind(name);
  if (!q.ok()) return q.status().with_context("--queue (or 'all')");
  return std::vector<QueueKind>{*q};
}

// Reads the --measured files: every one must be of the profile's model and hardware. `points`
// gets what is compared (INVALID ones only with --include-invalid), `nodes` the node count.
Status load_points(const ValidateFlags& f, const Profile& profile,
                   std::vector<profiler::MeasuredPoint>* points, MeasuredTotals* totals,
                   int* nodes_out) {
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
    totals->wall_known = totals->wall_known && file_wall > 0;
    totals->wall_s += file_wall;
    for (profiler::MeasuredPoint& p : m.points) {
      ++totals->points;
      if (p.valid >= 0) ++totals->judged;
      if (p.valid == 0) totals->invalid.push_back(p);
      if (p.valid != 0 || f.include_invalid) points->push_back(p);
    }
  }
  if (points->empty()) {
    return InvalidArgument("--measured: all " + std::to_string(totals->points) +
                           " points are INVALID (give --include-invalid to compare them anyway)");
  }
  *nodes_out = nodes == 0 ? profile.hardware.nodes : nodes;
  return Status::Ok();
}

Status run_validate(const ValidateFlags& f) {
  std::vector<InputFile> files{{"--profile", f.profile}};
  for (const std::string& m : f.measured) files.push_back({"--measured", m});
  SERF_RETURN_IF_ERROR(check_output_path("--out", f.out, files));
  SERF_RETURN_IF_ERROR(check_output_path("--out", csv_path(f.out), files));
  if (!f.plot.empty()) SERF_RETURN_IF_ERROR(check_output_path("--plot", f.plot, files));
  if (!f.plot.empty()) {
    SERF_RETURN_IF_ERROR(
        check_plot_path("--plot", f.plot, {{"--out", f.out}, {"--out", csv_path(f.out)}}));
  }
  SERF_ASSIGN_OR_RETURN(std::vector<QueueKind> queues, parse_queues(f.queue));
  SERF_ASSIGN_OR_RETURN(Profile profile, io::load_profile(f.profile));

  std::vector<profiler::MeasuredPoint> points;
  MeasuredTotals totals;
  int nodes = 0;
  SERF_RETURN_IF_ERROR(load_points(f, profile, &points, &totals, &nodes));

  auto validated = profiler::validate_predictions(profile, points, nodes, queues);
  if (!validated.ok()) {  // a point the profile cannot predict: name the file(s) it came from
    std::string files;
    for (const std::string& m : f.measured) files += (files.empty() ? "" : ", ") + m;
    return validated.status().with_context("--measured " + files);
  }
  profiler::ValidationReport report = std::move(validated).value();
  const profiler::ValidationInputs inputs{f.profile, f.measured, profile.model};
  nlohmann::json doc = profiler::validation_json(report, inputs);

  std::printf("validated %zu measured points of %s on %d nodes x %d cores against %s\n",
              points.size(), profile.model.c_str(), nodes, profile.hardware.cores_per_node,
              f.profile.c_str());
  profiler::print_invalid_points(stdout, totals.judged, totals.invalid, f.include_invalid);
  doc["points_measured"] = totals.points;
  doc["points_judged"] = totals.judged;
  doc["points_invalid"] = totals.invalid.size();
  doc["invalid_compared"] = f.include_invalid;
  profiler::print_validation_tables(stdout, report);
  const profiler::ModelValidation& first = report.models.front();
  const profiler::CalibrationCost cost = profiler::calibration_cost(
      profile, totals.points, totals.wall_known ? totals.wall_s : 0, first);
  profiler::print_calibration_cost(stdout, cost, first.queue);
  doc["cost"] = profiler::calibration_cost_json(cost, first.queue);
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
