#include "cli/serve_calibration.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "serf/io/profile_io.h"

namespace serf::cli {

StatusOr<std::unique_ptr<serve::SelfCalibration>> start_self_calibration(
    const std::string& recalibrate, const std::string& profile_path, RuntimeSession& session,
    const std::shared_ptr<const ConfigurationTable>& table, double min_dwell_s,
    serve::Controller& controller, serve::ServeMetrics* metrics) {
  if (recalibrate != "on" && recalibrate != "off")
    return InvalidArgument("--recalibrate " + recalibrate + ": give on or off");
  if (recalibrate == "off") {
    std::cout << "self-calibration: off (--recalibrate off)\n";
    return std::unique_ptr<serve::SelfCalibration>();
  }
  Profile profile;
  if (!profile_path.empty()) {
    SERF_ASSIGN_OR_RETURN(profile, io::load_profile(profile_path));
  } else if (session.emulation != nullptr) {
    profile = *session.emulation;
  } else {
    std::cout << "self-calibration: off (no tuple profile to calibrate: give --profile FILE)\n";
    return std::unique_ptr<serve::SelfCalibration>();
  }
  PlanOptions plan;
  plan.nodes = session.nodes;
  std::vector<double> rates;
  ConfigurationTable initial;
  // Re-planned only for the objective the planner runs without extra inputs (the mean).
  if (table && table->objective == "mean") {
    plan.queue = table->queue;
    initial = *table;
    for (const TableEntry& e : table->entries) {
      rates.push_back(e.rate_per_s);
      // A table planned with --batch B is re-planned over batches too (its largest b stands for
      // B: the table does not record B itself).
      plan.max_batch = std::max(plan.max_batch, e.config.batch);
    }
  }
  auto cal = std::make_unique<serve::SelfCalibration>(profile, initial, rates, plan,
                                                      serve::DriftRule{}, min_dwell_s);
  const QueueKind queue = table ? table->queue : kDefaultQueue;
  serve::SelfCalibration* c = cal.get();
  const int nodes = session.nodes;
  cal->set_on_recalibration([c, metrics, table, nodes, queue](const serve::Recalibration& r) {
    std::printf("recalibrated %s at %.1f s: mean %.3f -> %.3f ms (%d answers)\n",
                to_string(r.tuple).c_str(), r.at_s, r.old_mean_ms, r.new_mean_ms, r.samples);
    std::fflush(stdout);
    if (metrics == nullptr) return;
    metrics->count_recalibration(r);
    metrics->set_predictor(serve::LatencyPredictor(
        std::make_shared<const Profile>(c->current_profile()), table, nodes, queue));
  });
  controller.add_answer_hook(cal->answer_hook());
  std::cout << "self-calibration: on (" << profile.tuples.size() << " tuples"
            << (rates.empty() ? "; no table to re-plan" : "; the table re-planned on a drift")
            << ")\n";
  return cal;
}

}  // namespace serf::cli
