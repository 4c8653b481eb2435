#pragma once
// Online self-calibration: the controller's model follows the machine. Every answer's service
// time (dispatch to answer, the slot's occupancy, as the profiler measures it) updates a running
// estimate of its tuple (i at dispatch, K, T); a CUSUM on standardized batch means tells a drift
// from noise; a sustained drift updates the tuple's mean, unobserved tuples are scaled by the
// drift seen on their neighbours, and the configuration table is re-planned on a background
// thread, so the dispatcher never waits for the planner. docs/serving.md, "Self-calibration".

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "serf/core/planner.h"
#include "serf/core/profile.h"
#include "serve/controller.h"

namespace serf::serve {

// The drift rule, with an explicit time scale: it follows drifts that last tens of seconds and
// ignores what lasts a few (docs/calibration.md, "The drift rule").
// - Observations of a tuple are grouped in batches of `batch`. The scale s of a batch mean is
//   measured, not assumed: the profile's SCV describes a quiet machine, while a shared host's batch
//   means wander far more. s = sqrt(MSSD / 2) over the batch means since the tuple's reference was
//   set (the mean squared successive difference: the short-term noise, barely moved by a level
//   shift), at least the profile's i.i.d. standard error and min_sd_fraction mu0, at most
//   max_sd_fraction mu0 (so that a 20 % shift is always at least one s).
// - y = (xbar - mu0) / s, capped at +-clip (one batch, an outlier or a burst, moves the CUSUM by at
//   most clip - k: at least ceil(h / (clip - k)) batches raise an alarm). A two-sided CUSUM,
//   S+ = max(0, S+ + y - k), S- = max(0, S- - y - k), alarms when a side passes h; only once
//   min_batches batches were seen since the reference was set, and not within hold_off_s after
//   the tuple's last recalibration. For Gaussian batch means, k = 0.5, h = 8 is a two-sided
//   in-control run length of about 9,500 batches (Siegmund's approximation).
// - Sustained: an alarm is confirmed on the fresh answers of the next confirm_s seconds (at least
//   min_samples of them; longer, up to max_confirm_s, until their mean's 95 % CI half-width is
//   within `precision` of it, so that a noisy host's new mean is not itself noise): at least
//   confirm_fraction of their batch means must lie beyond mu0 +- k s on the alarm's side (a burst
//   shorter than about a third of confirm_s cannot), and their mean must differ from mu0 by at
//   least min_change. The new mean is the mean of their batch means within outlier_mads robust
//   standard deviations of their median (mean_within_mad: a stall of a second or two, which
//   fills a batch or two, is no drift and stays out of the model; the answers that raised the
//   alarm are not used either: they were selected for lying high or low). Otherwise the alarm is
//   dropped and the CUSUM restarts with the same reference.
struct DriftRule {
  int batch = 20;
  int min_batches = 5;
  double k = 0.5;
  double h = 8;
  double clip = 4;
  double min_sd_fraction = 0.02;
  double max_sd_fraction = 0.2;
  int min_samples = 60;
  double confirm_s = 10;
  double precision = 0.03;    // ... and until their mean's 95 % CI is within 3 % (i.i.d.) ...
  double max_confirm_s = 15;  // ... or this long
  double confirm_fraction = 2.0 / 3.0;
  double min_change = 0.05;
  double hold_off_s = 30;
  double outlier_mads = 5;  // the confirmation's batch means beyond this are left out
};

// One update of the model: logged, counted in /metrics and written to serve --out.
struct Recalibration {
  double at_s = 0;  // controller clock
  ParallelismTuple tuple;
  double old_mean_ms = 0;
  double new_mean_ms = 0;
  int samples = 0;        // observations of the confirmation (its batch means give the new mean)
  double ci95_ms = 0;     // their plain mean's 95 % CI half-width (i.i.d.)
  double replan_ms = -1;  // how long the background re-plan took (-1: not yet, or none)
  // Every tuple's mean in the model after this update (the recalibrated one and those scaled by
  // its drift), so that a run file can replay what the controller predicted over time.
  std::vector<std::pair<ParallelismTuple, double>> model_mean_ms;
};

// The run file's "recalibrations" (serf-run/1; docs/calibration.md): one object per update, its
// tuple [i, K, T] with b appended when it is not 1, and model_mean_ms as [i, K, T, b, mean_ms].
nlohmann::json recalibrations_json(const std::vector<Recalibration>& log);

// What an answered request says about its tuple's closed-loop service time (ms), the quantity the
// profile's mean_ms holds: its occupancy (dispatch to answer) less the open-loop penalty the model
// charges its arrival (serf/core/idle_penalty.h, by the idle points of its configuration's tuple
// (c, K, T) in `profile`). A request that opened its slot's busy period: its latency less delta
// at its slot's idle time (delta is measured from the arrival, so the controller's lateness in
// dispatching it is part of it); one that queued: its occupancy less busy at the idle time before
// the period. Without idle points, for batches (b > 1: the model has no penalty there) and when the
// slot's idle time is unknown: the occupancy. Without this, recalibration at low load would move a
// tuple's mean up by the penalty, which the model then adds again (docs/calibration.md).
double closed_loop_service_ms(const Profile& profile, const RequestRecord& r);

// The running estimates and the drift rule over a profile. Not thread-safe: the controller's
// thread calls observe() (through the answer hook); its cost is O(1) per answer.
class DriftTracker {
 public:
  DriftTracker(Profile profile, DriftRule rule);
  // One answered request's service time; a Recalibration when the rule fires for its tuple.
  // Tuples the profile lacks are ignored (the controller only runs profiled configurations).
  std::optional<Recalibration> observe(const ParallelismTuple& tuple, double occupancy_ms,
                                       double now_s);
  // The profile as the model should now see it: recalibrated tuples at their new means, the
  // others scaled by their neighbours' drift (neighbour_ratio).
  const Profile& profile() const { return current_; }
  // The drift ratio a tuple takes: its own (new / profiled) when it was recalibrated; else that
  // of the nearest recalibrated tuple with the same K and T (nearest i, the smaller on a tie);
  // else the geometric mean of the recalibrated tuples with the same K; else of all; else 1.
  double neighbour_ratio(const ParallelismTuple& tuple) const;
  // Every answer seen per tuple since the start: count, mean, 95 % CI (i.i.d.).
  struct Estimate {
    int64_t count = 0;
    double mean_ms = 0;
    double ci95_ms = 0;
  };
  Estimate estimate(const ParallelismTuple& tuple) const;
  const std::vector<Recalibration>& recalibrations() const { return log_; }
  // CUSUM alarms raised, confirmed or not (each confirmed one is a recalibration).
  int64_t alarms() const { return alarms_; }

 private:
  struct State {
    double mu0 = 0;       // the reference the CUSUM tests against (the model's mean)
    double prior_se = 0;  // the profile's i.i.d. standard error of a batch mean, relative to mu0
    double batch_sum = 0;
    int batch_n = 0;
    // Batch means since the reference was set (a recalibration): count, the last one relative
    // to mu0, the sum of squared successive differences (relative), for the scale s.
    int64_t batches = 0;
    double last_rel = 0, mssd_sum = 0;
    double s_hi = 0, s_lo = 0;  // CUSUM sides
    double hold_until_s = 0;    // no alarm before (a recalibration's hold-off)
    // All observations (Welford).
    int64_t n = 0;
    double mean = 0, m2 = 0;
    bool own = false;  // recalibrated from its own observations
    // After an alarm (side +1 or -1): fresh observations, whose mean (free of the CUSUM's
    // selection) is the new mean once the confirmation holds.
    int confirming = 0;
    double conf_start_s = 0;
    int64_t conf_n = 0;
    double conf_sum = 0, conf_sq = 0;
    int conf_batches = 0, conf_agree = 0;
    std::vector<double> conf_means;  // the confirmation's batch means (ms)
  };
  // The scale s of a batch mean of `s` in ms (see DriftRule).
  double scale_ms(const State& s) const;
  // A completed batch mean: the scale's statistics, then the CUSUM or the confirmation's count.
  void on_batch(State* s, double xbar, double now_s);
  std::optional<Recalibration> decide(State* s, const ParallelismTuple& tuple, double now_s);
  // A new reference: the CUSUM and any confirmation restart; `fresh` (a recalibration) also
  // restarts the scale's statistics (the machine's noise may have changed with its speed).
  void reset_reference(State* s, double mean_ms, bool fresh) const;
  void rebuild_profile();

  Profile base_;     // as profiled
  Profile current_;  // as the model sees it now
  DriftRule rule_;
  std::vector<State> states_;  // parallel to base_.tuples
  std::vector<Recalibration> log_;
  int64_t alarms_ = 0;
};

// Re-plans the configuration table on its own thread (started by the first submit): submit()
// hands a profile over and returns at once (the newest wins when several wait); latest() gives the
// newest table.
class Replanner {
 public:
  Replanner(std::vector<double> rates_per_s, PlanOptions options);
  ~Replanner();
  Replanner(const Replanner&) = delete;
  Replanner& operator=(const Replanner&) = delete;
  void submit(Profile profile, int64_t tag);
  // The newest table (nullptr before the first plan finished) and the tag it was submitted with.
  std::shared_ptr<const ConfigurationTable> latest(int64_t* tag = nullptr) const;
  // Blocks until every submitted profile was planned (tests, and the end of a run).
  void wait_idle();
  double last_plan_ms() const { return last_plan_ms_.load(); }
  int plans() const { return plans_.load(); }

 private:
  void run();

  std::vector<double> rates_;
  PlanOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::optional<std::pair<Profile, int64_t>> pending_;
  bool busy_ = false;
  bool stop_ = false;
  std::shared_ptr<const ConfigurationTable> table_;
  int64_t tag_ = -1;
  std::atomic<double> last_plan_ms_{0};
  std::atomic<int> plans_{0};
  std::thread thread_;
};

// The controller side of self-calibration: an answer hook feeding the tracker and a scheduler
// hook switching by the newest table with table_hook's rule (the table's configuration at the
// observed rate, at least min_dwell_s between switches; a load beyond every entry runs the table's
// configuration of highest capacity).
class SelfCalibration {
 public:
  SelfCalibration(Profile profile, ConfigurationTable initial, std::vector<double> rates_per_s,
                  PlanOptions options, DriftRule rule, double min_dwell_s);
  // Attach with controller.add_answer_hook(calibration.answer_hook()).
  AnswerHook answer_hook();
  // on_overload: as table_hook's, for the table in use at that moment.
  // filter: as table_hook's (the switch gate).
  // band: as table_hook's (hysteresis in rate).
  SchedulerHook scheduler_hook(OverloadHook on_overload = nullptr, SwitchFilter filter = nullptr,
                               RateBand band = {});
  // Called (on the controller's thread) after each recalibration, e.g. to log it.
  void set_on_recalibration(std::function<void(const Recalibration&)> f) {
    on_recalibration_ = std::move(f);
  }
  // Thread-safe snapshots for /metrics and --out.
  std::vector<Recalibration> recalibrations() const;
  Profile current_profile() const;
  Replanner& replanner() { return replanner_; }

 private:
  DriftTracker tracker_;
  bool replan_;  // load levels to re-plan at (none: the profile recalibrates, no table)
  Replanner replanner_;
  std::shared_ptr<const ConfigurationTable> initial_;
  double min_dwell_s_;
  std::function<void(const Recalibration&)> on_recalibration_;
  mutable std::mutex mutex_;  // guards log_ and profile_ (read by other threads)
  std::vector<Recalibration> log_;
  Profile profile_;
};

}  // namespace serf::serve
