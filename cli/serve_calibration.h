#pragma once
// `serf serve --recalibrate on|off`: online self-calibration (serve/calibration.h) wired to a
// running controller, its metrics and its log.

#include <memory>
#include <string>

#include "cli/runtime_launch.h"
#include "serf/core/planner.h"
#include "serve/calibration.h"
#include "serve/controller.h"
#include "serve/metrics.h"

namespace serf::cli {

// nullptr (and a line saying why) when it is off: --recalibrate off, or no tuple profile to
// calibrate (--profile, or the --emulate profile). With a table planned for the mean latency the
// table is re-planned after each recalibration; the caller then switches by scheduler_hook().
// `metrics` (may be null) counts the recalibrations and predicts from the recalibrated profile.
StatusOr<std::unique_ptr<serve::SelfCalibration>> start_self_calibration(
    const std::string& recalibrate, const std::string& profile_path, RuntimeSession& session,
    const std::shared_ptr<const ConfigurationTable>& table, double min_dwell_s,
    serve::Controller& controller, serve::ServeMetrics* metrics);

}  // namespace serf::cli
