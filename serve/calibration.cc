#include "serve/calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "serf/core/idle_penalty.h"
#include "serf/core/statistics.h"

namespace serf::serve {

namespace {

// Index of `t` in `p.tuples`, or -1.
int index_of(const Profile& p, const ParallelismTuple& t) {
  const TupleStats* s = p.find(t);
  return s == nullptr ? -1 : static_cast<int>(s - p.tuples.data());
}

double ci95_iid(int64_t n, double sum, double sq) {
  if (n < 2) return 0;
  const double mean = sum / static_cast<double>(n);
  const double var = std::max(0.0, (sq - static_cast<double>(n) * mean * mean) / (n - 1.0));
  return 1.96 * std::sqrt(var / static_cast<double>(n));
}

}  // namespace

nlohmann::json recalibrations_json(const std::vector<Recalibration>& log) {
  nlohmann::json out = nlohmann::json::array();
  for (const Recalibration& r : log) {
    // [i, K, T], with b appended when it is not 1 (serf profile --refresh reads both).
    nlohmann::json tuple = {r.tuple.service, r.tuple.inter, r.tuple.intra};
    if (r.tuple.batch != 1) tuple.push_back(r.tuple.batch);
    nlohmann::json model = nlohmann::json::array();
    for (const auto& [t, mean_ms] : r.model_mean_ms)
      model.push_back({t.service, t.inter, t.intra, t.batch, mean_ms});
    out.push_back(
        {{"at_s", r.at_s},
         {"tuple", tuple},
         {"old_mean_ms", r.old_mean_ms},
         {"new_mean_ms", r.new_mean_ms},
         {"samples", r.samples},
         {"ci95_ms", r.ci95_ms},
         {"replan_ms", r.replan_ms >= 0 ? nlohmann::json(r.replan_ms) : nlohmann::json(nullptr)},
         {"model_mean_ms", model}});
  }
  return out;
}

double closed_loop_service_ms(const Profile& profile, const RequestRecord& r) {
  const double occupancy_ms = (r.done_s - r.dispatch_s) * 1e3;
  if (r.batch != 1 || r.slot_idle_ms < 0) return occupancy_ms;
  const TupleStats* own = profile.find({r.config.service, r.config.inter, r.config.intra, 1});
  if (own == nullptr || own->idle.empty()) return occupancy_ms;
  if (r.opened_period) return r.latency_ms() - idle_delta_ms(own->idle, r.slot_idle_ms);
  return occupancy_ms - busy_delta_ms(own->idle, r.slot_idle_ms);
}

DriftTracker::DriftTracker(Profile profile, DriftRule rule)
    : base_(std::move(profile)), current_(base_), rule_(rule) {
  base_.reindex();
  current_.reindex();
  states_.resize(base_.tuples.size());
  for (size_t k = 0; k < base_.tuples.size(); ++k) {
    const TupleStats& t = base_.tuples[k];
    states_[k].prior_se = std::sqrt(std::max(0.0, t.scv) / std::max(1, rule_.batch));
    reset_reference(&states_[k], t.mean_ms, true);
  }
}

void DriftTracker::reset_reference(State* s, double mean_ms, bool fresh) const {
  s->mu0 = mean_ms;
  s->batch_sum = 0;
  s->batch_n = 0;
  s->s_hi = s->s_lo = 0;
  s->confirming = 0;
  if (!fresh) return;
  s->batches = 0;
  s->last_rel = s->mssd_sum = 0;
}

double DriftTracker::scale_ms(const State& s) const {
  double rel = std::max(s.prior_se, rule_.min_sd_fraction);
  if (s.batches >= 2)
    rel = std::max(rel, std::sqrt(s.mssd_sum / (2.0 * static_cast<double>(s.batches - 1))));
  return std::min(rel, rule_.max_sd_fraction) * s.mu0;
}

void DriftTracker::on_batch(State* s, double xbar, double now_s) {
  const double rel = xbar / s->mu0;
  if (s->batches >= 1) s->mssd_sum += (rel - s->last_rel) * (rel - s->last_rel);
  s->last_rel = rel;
  ++s->batches;
  const double y = std::clamp((xbar - s->mu0) / scale_ms(*s), -rule_.clip, rule_.clip);
  if (s->confirming != 0) {
    ++s->conf_batches;
    s->conf_means.push_back(xbar);
    if (s->confirming * y > rule_.k) ++s->conf_agree;
    return;
  }
  if (s->batches < rule_.min_batches || now_s < s->hold_until_s) return;
  s->s_hi = std::max(0.0, s->s_hi + y - rule_.k);
  s->s_lo = std::max(0.0, s->s_lo - y - rule_.k);
  if (s->s_hi > rule_.h || s->s_lo > rule_.h) {
    ++alarms_;
    s->confirming = s->s_hi > rule_.h ? 1 : -1;  // sustained? confirmed on fresh answers
    s->conf_start_s = now_s;
    s->conf_n = 0;
    s->conf_sum = s->conf_sq = 0;
    s->conf_batches = s->conf_agree = 0;
    s->conf_means.clear();
  }
}

std::optional<Recalibration> DriftTracker::observe(const ParallelismTuple& tuple,
                                                   double occupancy_ms, double now_s) {
  const int k = index_of(base_, tuple);
  if (k < 0 || !(std::isfinite(occupancy_ms) && occupancy_ms > 0)) return std::nullopt;
  State& s = states_[static_cast<size_t>(k)];
  ++s.n;
  const double d = occupancy_ms - s.mean;
  s.mean += d / static_cast<double>(s.n);
  s.m2 += d * (occupancy_ms - s.mean);
  const bool confirming = s.confirming != 0;  // this answer came after the alarm
  if (confirming) {
    ++s.conf_n;
    s.conf_sum += occupancy_ms;
    s.conf_sq += occupancy_ms * occupancy_ms;
  }
  s.batch_sum += occupancy_ms;
  if (++s.batch_n >= rule_.batch) {
    const double xbar = s.batch_sum / s.batch_n;
    s.batch_sum = 0;
    s.batch_n = 0;
    on_batch(&s, xbar, now_s);
  }
  if (!confirming || s.conf_n < rule_.min_samples || now_s - s.conf_start_s < rule_.confirm_s ||
      s.conf_batches < 1)
    return std::nullopt;
  const double precise =
      ci95_iid(s.conf_n, s.conf_sum, s.conf_sq) / (s.conf_sum / static_cast<double>(s.conf_n));
  if (precise > rule_.precision && now_s - s.conf_start_s < rule_.max_confirm_s)
    return std::nullopt;
  return decide(&s, tuple, now_s);
}

std::optional<Recalibration> DriftTracker::decide(State* s, const ParallelismTuple& tuple,
                                                  double now_s) {
  const int64_t n = s->conf_n;
  const double sum = s->conf_sum, sq = s->conf_sq;
  // The batches of a confirmation start with it (an alarm is raised at a batch's end), so its
  // batch means hold only fresh answers; the answers of an unfinished last batch are left out.
  const double new_mean = mean_within_mad(s->conf_means, rule_.outlier_mads);
  const double old_mean = s->mu0;
  const double change = new_mean / old_mean - 1;
  const bool sustained = s->conf_agree >= rule_.confirm_fraction * s->conf_batches;
  const bool material = std::fabs(change) >= rule_.min_change && change * s->confirming > 0;
  if (!sustained || !material) {
    reset_reference(s, old_mean, false);  // a burst, or real but immaterial: keep the model
    return std::nullopt;
  }
  reset_reference(s, new_mean, true);
  s->hold_until_s = now_s + rule_.hold_off_s;
  s->own = true;
  Recalibration r;
  r.at_s = now_s;
  r.tuple = tuple;
  r.old_mean_ms = old_mean;
  r.new_mean_ms = new_mean;
  r.samples = static_cast<int>(n);
  r.ci95_ms = ci95_iid(n, sum, sq);
  log_.push_back(r);
  rebuild_profile();
  return r;
}

double DriftTracker::neighbour_ratio(const ParallelismTuple& tuple) const {
  const int self = index_of(base_, tuple);
  auto ratio = [&](size_t k) { return states_[k].mu0 / base_.tuples[k].mean_ms; };
  if (self >= 0 && states_[static_cast<size_t>(self)].own) return ratio(static_cast<size_t>(self));
  int best = -1, best_distance = 0;
  double log_sum_k = 0, log_sum_all = 0;
  int n_k = 0, n_all = 0;
  for (size_t k = 0; k < base_.tuples.size(); ++k) {
    if (!states_[k].own) continue;
    const ParallelismTuple& t = base_.tuples[k].tuple;
    log_sum_all += std::log(ratio(k));
    ++n_all;
    if (t.inter != tuple.inter || t.batch != tuple.batch) continue;
    log_sum_k += std::log(ratio(k));
    ++n_k;
    if (t.intra != tuple.intra) continue;
    const int distance = std::abs(t.service - tuple.service);
    // Nearest i; on a tie the smaller i (tuples are scanned in any order).
    if (best < 0 || distance < best_distance ||
        (distance == best_distance &&
         t.service < base_.tuples[static_cast<size_t>(best)].tuple.service)) {
      best = static_cast<int>(k);
      best_distance = distance;
    }
  }
  if (best >= 0) return ratio(static_cast<size_t>(best));
  if (n_k > 0) return std::exp(log_sum_k / n_k);
  if (n_all > 0) return std::exp(log_sum_all / n_all);
  return 1;
}

void DriftTracker::rebuild_profile() {
  for (size_t k = 0; k < base_.tuples.size(); ++k) {
    const TupleStats& b = base_.tuples[k];
    TupleStats& c = current_.tuples[k];
    State& s = states_[k];
    if (s.own) {
      c.mean_ms = s.mu0;
    } else {
      c.mean_ms = b.mean_ms * neighbour_ratio(b.tuple);
      // An unobserved tuple's reference follows its neighbours, so that when it is observed it
      // is tested against what the model now assumes. A CUSUM in progress restarts.
      // The scale's statistics (relative) stay: the same answers, a moved reference.
      if (std::fabs(c.mean_ms / s.mu0 - 1) > 1e-12) reset_reference(&s, c.mean_ms, false);
    }
    c.node_ms = b.node_ms * c.mean_ms / b.mean_ms;
  }
  current_.reindex();
}

DriftTracker::Estimate DriftTracker::estimate(const ParallelismTuple& tuple) const {
  Estimate e;
  const int k = index_of(base_, tuple);
  if (k < 0) return e;
  const State& s = states_[static_cast<size_t>(k)];
  e.count = s.n;
  e.mean_ms = s.mean;
  if (s.n >= 2) e.ci95_ms = 1.96 * std::sqrt(s.m2 / (s.n - 1.0) / static_cast<double>(s.n));
  return e;
}

// ---- Replanner -------------------------------------------------------------------------------

Replanner::Replanner(std::vector<double> rates_per_s, PlanOptions options)
    : rates_(std::move(rates_per_s)), options_(options) {}

Replanner::~Replanner() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Replanner::submit(Profile profile, int64_t tag) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.emplace(std::move(profile), tag);
    // Started at the first drift: a service whose model holds runs no extra thread.
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_all();
}

std::shared_ptr<const ConfigurationTable> Replanner::latest(int64_t* tag) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tag != nullptr) *tag = tag_;
  return table_;
}

void Replanner::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return !pending_ && !busy_; });
}

void Replanner::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || pending_; });
    if (stop_) return;
    auto job = std::move(*pending_);
    pending_.reset();
    busy_ = true;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    auto table = plan_table(job.first, rates_, options_);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    busy_ = false;
    // A profile the planner refuses keeps the old table: the switch logic never goes without one.
    if (table.ok()) {
      table_ = std::make_shared<const ConfigurationTable>(std::move(table).value());
      tag_ = job.second;
      last_plan_ms_ = ms;
      ++plans_;
    }
    if (!pending_) idle_.notify_all();
  }
}

// ---- SelfCalibration -------------------------------------------------------------------------

SelfCalibration::SelfCalibration(Profile profile, ConfigurationTable initial,
                                 std::vector<double> rates_per_s, PlanOptions options,
                                 DriftRule rule, double min_dwell_s)
    : tracker_(profile, rule),
      replan_(!rates_per_s.empty()),
      replanner_(std::move(rates_per_s), options),
      initial_(std::make_shared<const ConfigurationTable>(std::move(initial))),
      min_dwell_s_(min_dwell_s),
      profile_(std::move(profile)) {}

AnswerHook SelfCalibration::answer_hook() {
  return [this](const RequestRecord& r) {
    // One observation per batch (its first row): a batch of n is tuple (i, K, T, n).
    if (!r.answered || r.dispatch_s <= 0 || r.batch_row != 0) return;
    const ParallelismTuple t{r.running, r.config.inter, r.config.intra, r.batch};
    // Less the open-loop penalty the model adds itself (a value <= 0, noise, is not observed).
    auto rec = tracker_.observe(t, closed_loop_service_ms(tracker_.profile(), r), r.done_s);
    if (!rec) return;
    for (const TupleStats& s : tracker_.profile().tuples)
      rec->model_mean_ms.emplace_back(s.tuple, s.mean_ms);
    int64_t tag = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      log_.push_back(*rec);
      profile_ = tracker_.profile();
      tag = static_cast<int64_t>(log_.size());
    }
    // Returns at once: planned on the Replanner's thread. Without load levels there is no table.
    if (replan_) replanner_.submit(tracker_.profile(), tag);
    if (on_recalibration_) on_recalibration_(*rec);
  };
}

SchedulerHook SelfCalibration::scheduler_hook(OverloadHook on_overload, SwitchFilter filter,
                                              RateBand band) {
  TableSource newest = [this]() -> std::shared_ptr<const ConfigurationTable> {
    int64_t tag = 0;
    std::shared_ptr<const ConfigurationTable> table = replanner_.latest(&tag);
    if (table == nullptr) return initial_;
    std::lock_guard<std::mutex> lock(mutex_);
    if (tag >= 1 && static_cast<size_t>(tag) <= log_.size() && log_[tag - 1].replan_ms < 0)
      log_[tag - 1].replan_ms = replanner_.last_plan_ms();
    return table;
  };
  return table_hook(std::move(newest), min_dwell_s_, std::move(on_overload), std::move(filter),
                    band);
}

std::vector<Recalibration> SelfCalibration::recalibrations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_;
}

Profile SelfCalibration::current_profile() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return profile_;
}

}  // namespace serf::serve
