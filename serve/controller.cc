#include "serve/controller.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>

#include "serf/core/statistics.h"

namespace serf::serve {

namespace {
constexpr double kNever = std::numeric_limits<double>::infinity();
}  // namespace

void PollPlanner::answered(double occupancy_s) {
  if (!(occupancy_s > 0)) return;
  recent_.push_back(occupancy_s);
  if (recent_.size() > kRecent) recent_.pop_front();
}

double PollPlanner::sleep_s(double now_s, double oldest_dispatch_s, double next_event_s) const {
  double wait = std::min(kCoarseS, next_event_s - now_s);  // an arrival is sent on time
  if (std::isfinite(oldest_dispatch_s)) {
    double answer = kFineS;  // too few answers to know the configuration's pace yet
    if (recent_.size() >= 4) {
      const double shortest = *std::min_element(recent_.begin(), recent_.end());
      answer = std::max(kFineS, oldest_dispatch_s + 0.8 * shortest - now_s);
    }
    wait = std::min(wait, answer);
  }
  return std::max(wait, 0.0);
}

ServiceSampler::ServiceSampler(Profile profile, bool random, uint64_t seed)
    : profile_(std::move(profile)), random_(random) {
  std::seed_seq seq{seed, uint64_t{0x73657276}};
  rng_.seed(seq);
  profile_.reindex();
}

StatusOr<double> ServiceSampler::sample_ms(const ParallelismTuple& tuple) {
  const TupleStats* stats = profile_.find(tuple);
  if (stats == nullptr) {
    return NotFound("emulation profile has no tuple " + to_string(tuple));
  }
  // A measured profile's mean includes the messaging, which the emulated run adds again itself.
  const double mean_ms = stats->node_ms > 0 ? stats->node_ms : stats->mean_ms;
  if (!random_ || stats->scv <= 0) return mean_ms;
  GammaDraw draw(mean_ms, stats->scv);
  return std::max(draw(rng_), 1e-3);
}

Status ServiceSampler::check(const Configuration& config) const {
  auto tuples = profile_.tuples_for(config);
  if (!tuples.ok()) {
    return tuples.status().with_context("emulation profile cannot run " + to_string(config));
  }
  return Status::Ok();
}

void RateMonitor::record(double at_s) { arrivals_.push_back(at_s); }

double RateMonitor::rate_per_s(double now_s) {
  while (!arrivals_.empty() && arrivals_.front() < now_s - window_s_) arrivals_.pop_front();
  double span = std::min(window_s_, std::max(now_s, 1e-9));
  return static_cast<double>(arrivals_.size()) / span;
}

SchedulerHook table_hook(ConfigurationTable table, double min_dwell_s) {
  auto last_switch_s = std::make_shared<double>(-1e300);
  auto current = std::make_shared<std::optional<Configuration>>();
  return [table = std::move(table), min_dwell_s, last_switch_s, current](
             double now_s, double rate_per_s) -> std::optional<Configuration> {
    if (table.entries.empty() || rate_per_s <= 0) return std::nullopt;
    const TableEntry* entry = table.lookup(rate_per_s).entry;
    if (entry == nullptr || !entry->stable) return std::nullopt;
    if (*current && **current == entry->config) return std::nullopt;
    if (now_s - *last_switch_s < min_dwell_s) return std::nullopt;
    *last_switch_s = now_s;
    *current = entry->config;
    return entry->config;
  };
}

std::vector<double> poisson_arrivals(double rate_per_s, int count, uint64_t seed) {
  auto at = stepped_arrivals({{0, rate_per_s}}, count, seed);
  return at.ok() ? std::move(at).value() : std::vector<double>();
}

StatusOr<std::vector<double>> stepped_arrivals(const std::vector<RateStep>& steps, int count,
                                               uint64_t seed, ArrivalKind kind, double scv) {
  // The last step lasts until `count` arrived: long enough at any rate the steps allow.
  constexpr double kOpenEnded_s = 1e9;
  std::vector<RateSegment> segments;
  for (size_t k = 0; k < steps.size(); ++k) {
    const double until =
        k + 1 < steps.size() ? steps[k + 1].from_s : steps[k].from_s + kOpenEnded_s;
    segments.push_back({until - steps[k].from_s, steps[k].rate_per_s});
  }
  SERF_ASSIGN_OR_RETURN(ArrivalProcess process,
                        ArrivalProcess::CreateSchedule(kind, std::move(segments), scv));
  std::mt19937_64 rng(seed);
  std::vector<double> at;
  at.reserve(static_cast<size_t>(std::max(count, 0)));
  for (int i = 0; i < count; ++i) {
    const double t = process.next_s(rng);
    if (!std::isfinite(t)) break;
    at.push_back(t);
  }
  return at;
}

Controller::Controller(Transport& transport, ControllerOptions options)
    : transport_(transport),
      options_(std::move(options)),
      next_deadline_s_(kNever),
      rng_(),
      epoch_(std::chrono::steady_clock::now()) {
  // Not the arrival generator's stream: with one seed, short gaps would all pick unit 0.
  std::seed_seq seq{options_.seed, uint64_t{0x756e6974}};
  rng_.seed(seq);
  generator_input_ = std::make_shared<const std::vector<float>>(options_.input);
  // Wake-ups on time: the default 50 us timer slack would delay each arrival's dispatch.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

double Controller::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

double Controller::to_s(SteadyTime t) const {
  return std::chrono::duration<double>(t - epoch_).count();
}

Status Controller::configure(const Configuration& config) {
  SERF_RETURN_IF_ERROR(validate(config, {transport_.nodes(), options_.cores_per_node}));
  if (sampler_ != nullptr) SERF_RETURN_IF_ERROR(sampler_->check(config));
  SwitchRecord sw;
  sw.at_s = now_s();
  sw.from = config_;
  sw.to = config;
  double t0 = now_s();
  if (configured_) SERF_RETURN_IF_ERROR(drain());
  double t1 = now_s();
  Status applied = transport_.configure(config);
  if (!applied.ok() && !interrupted()) {
    applied = applied.with_context(configured_
                                       ? "switch " + to_string(config_) + " -> " + to_string(config)
                                       : "start " + to_string(config));
  }
  SERF_RETURN_IF_ERROR(checked(applied));
  double t2 = now_s();
  sw.drain_ms = (t1 - t0) * 1e3;
  sw.configure_ms = (t2 - t1) * 1e3;
  if (configured_) switches_.push_back(sw);
  configured_ = true;
  config_ = config;
  planner_.reset();
  ++generation_;
  units_ = transport_.nodes() / config.inter;
  requeue_all();
  publish(live().rate_per_s);
  return Status::Ok();
}

void Controller::requeue_all() {
  // Queued requests keep their arrival order and are split again over the new units.
  std::vector<int64_t> waiting;
  for (auto& q : queues_) waiting.insert(waiting.end(), q.begin(), q.end());
  std::sort(waiting.begin(), waiting.end());
  queues_.assign(static_cast<size_t>(units_), {});
  slot_request_.assign(static_cast<size_t>(units_),
                       std::vector<int64_t>(static_cast<size_t>(config_.service), -1));
  running_.assign(static_cast<size_t>(units_), 0);
  std::uniform_int_distribution<int> pick(0, units_ - 1);
  for (int64_t id : waiting) {
    int u = pick(rng_);
    record(id).unit = u;
    queues_[static_cast<size_t>(u)].push_back(id);
  }
}

Status Controller::dispatch(int unit, int slot, int64_t id) {
  RequestRecord& rec = record(id);
  auto u = static_cast<size_t>(unit);
  ++running_[u];
  slot_request_[u][static_cast<size_t>(slot)] = id;
  rec.unit = unit;
  rec.slot = slot;
  rec.running = running_[u];
  rec.config = config_;
  rec.generation = generation_;
  RunAction action;
  action.kind = ActionKind::kRun;
  action.slot = slot;
  action.request_id = rec.id;
  action.running = rec.running;
  const std::vector<float>& input = *pending_.at(id).input;
  action.payload_floats = static_cast<int32_t>(input.size());
  if (sampler_ != nullptr) {
    SERF_ASSIGN_OR_RETURN(action.emulated_ms,
                          sampler_->sample_ms({rec.running, config_.inter, config_.intra}));
  }
  rec.dispatch_s = now_s();
  in_flight_[rec.id] = rec.dispatch_s;
  return checked(transport_.send_run(unit, action, input));
}

Status Controller::dispatch_ready() {
  for (int u = 0; u < units_; ++u) {
    auto& q = queues_[static_cast<size_t>(u)];
    auto& slots = slot_request_[static_cast<size_t>(u)];
    for (int s = 0; s < config_.service && !q.empty(); ++s) {
      if (slots[static_cast<size_t>(s)] >= 0) continue;
      int64_t id = q.front();
      q.pop_front();
      SERF_RETURN_IF_ERROR(dispatch(u, s, id));
    }
  }
  return Status::Ok();
}

Status Controller::poll_results(bool* progress) {
  for (;;) {
    if (interrupted()) return Status::Ok();  // check_timeouts() reports it, nothing more is handled
    auto polled = transport_.poll_result();
    if (!polled.ok()) return checked(polled.status());
    std::optional<RunResult> result = std::move(polled).value();
    if (!result) return Status::Ok();
    *progress = true;
    auto it = in_flight_.find(result->request_id);
    if (it == in_flight_.end()) {
      return Internal("rank " + std::to_string(result->leader_rank) + " answered request " +
                      std::to_string(result->request_id) + ", which is not in flight");
    }
    in_flight_.erase(it);
    probed_.erase(result->request_id);
    const int64_t id = result->request_id;
    RequestRecord& rec = record(id);
    rec.done_s = now_s();
    rec.service_ms = result->service_ms;
    auto u = static_cast<size_t>(rec.unit);
    --running_[u];
    slot_request_[u][static_cast<size_t>(rec.slot)] = -1;
    const bool waited_for = static_cast<bool>(pending_.at(id).done);
    if (!result->ok) {
      const std::string why = "rank " + std::to_string(result->leader_rank) + " failed request " +
                              std::to_string(id) + ": " + result->message;
      // A client hears of its own request's failure; a generated request's failure is a fault.
      finish(id, Outcome::kFailed, why);
      if (!waited_for) return Internal(why);
      continue;
    }
    planner_.answered(rec.done_s - rec.dispatch_s);
    if (waited_for) {
      finish(id, Outcome::kAnswered, "", transport_.take_output(), transport_.take_layer_timings());
    } else {
      finish(id, Outcome::kAnswered, "");
    }
  }
}

std::string seconds_text(double s) { return format_g(s); }

std::string accounting_line(const OutcomeCounts& c) {
  return "received " + std::to_string(c.received) + " = answered " + std::to_string(c.answered) +
         " + rejected " + std::to_string(c.rejected) + " + timed out " +
         std::to_string(c.timed_out) + " + failed " + std::to_string(c.failed);
}

Status Controller::checked(Status st) {
  if (st.ok() || !interrupted()) return st;
  return terminated();
}

Status Controller::terminated() {
  if (terminated_hook_) {
    auto hook = std::move(terminated_hook_);
    terminated_hook_ = nullptr;
    hook();
  }
  return Unavailable(transport_.diagnose_terminated());
}

Status Controller::check_timeouts() {
  if (interrupted()) return terminated();
  const double timeout = options_.node_timeout_s;
  const double probe_within = probe_s(timeout);
  for (const auto& [id, dispatched_s] : in_flight_) {
    const int unit = record(id).unit;
    const std::string what =
        "request " + std::to_string(id) + " on unit " + std::to_string(unit) + " not answered";
    if (now_s() - dispatched_s > timeout - probe_within && probed_.count(id) == 0) {
      Status alive = transport_.probe(unit, probe_within);
      if (interrupted()) return terminated();
      if (!alive.ok()) {
        char after[32];
        std::snprintf(after, sizeof(after), "%.1f", now_s() - dispatched_s);
        return Unavailable(what + " after " + after + " s (node timeout " + seconds_text(timeout) +
                           " s): " + alive.message());
      }
      probed_.insert(id);
    }
    if (now_s() - dispatched_s > timeout) {
      return Unavailable(what + " within " + seconds_text(timeout) + " s: every rank of unit " +
                         std::to_string(unit) +
                         " answered a ping, so the request itself is too slow (raise "
                         "--node-timeout)");
    }
  }
  return Status::Ok();
}

Status Controller::drain() {
  while (!in_flight_.empty()) {
    bool progress = false;
    SERF_RETURN_IF_ERROR(poll_results(&progress));
    SERF_RETURN_IF_ERROR(check_timeouts());
    if (!progress) idle_wait(kNever);
  }
  return Status::Ok();
}

void Controller::idle_wait(double next_event_s) {
  double oldest = kNever;
  for (const auto& [id, dispatched_s] : in_flight_) oldest = std::min(oldest, dispatched_s);
  const double wait = planner_.sleep_s(now_s(), oldest, next_event_s);
  // A new request wakes the wait at once; with none, this sleeps as the planner said.
  inbox_.wait(wait);
}

StatusOr<std::vector<double>> Controller::run_closed_loop(int warmup, int samples,
                                                          std::vector<double>* occupancy_ms) {
  if (occupancy_ms != nullptr) occupancy_ms->clear();
  if (!configured_) return Internal("run_closed_loop before configure");
  const int c = config_.service;
  std::vector<double> measured;
  int finished = 0;
  std::vector<int64_t> ids;  // this loop's requests, consumed ones set to -1
  auto submit = [&](int slot) {
    InferRequest req;
    req.input = generator_input_;
    req.arrival = std::chrono::steady_clock::now();
    const int64_t id = enter(std::move(req), false);  // not queued: straight to `slot`
    ids.push_back(id);
    return dispatch(0, slot, id);
  };
  for (int s = 0; s < c; ++s) SERF_RETURN_IF_ERROR(submit(s));
  while (static_cast<int>(measured.size()) < samples) {
    bool progress = false;
    SERF_RETURN_IF_ERROR(poll_results(&progress));
    SERF_RETURN_IF_ERROR(check_timeouts());
    if (!progress) {
      idle_wait(kNever);
      continue;
    }
    for (size_t k = 0; k < ids.size(); ++k) {
      if (ids[k] < 0) continue;
      const RequestRecord& rec = record(ids[k]);
      if (!rec.answered) continue;
      // A finished request: measure it if the loop was full when it ran, refill its slot.
      ids[k] = -1;
      ++finished;
      if (finished > warmup && rec.running == c && static_cast<int>(measured.size()) < samples) {
        measured.push_back(rec.service_ms);
        if (occupancy_ms != nullptr) occupancy_ms->push_back((rec.done_s - rec.dispatch_s) * 1e3);
      }
      if (static_cast<int>(measured.size()) < samples) SERF_RETURN_IF_ERROR(submit(rec.slot));
    }
  }
  SERF_RETURN_IF_ERROR(drain());
  return measured;
}

}  // namespace serf::serve
