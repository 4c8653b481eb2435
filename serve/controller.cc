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

StatusOr<std::pair<double, double>> ServiceSampler::stats(const ParallelismTuple& tuple) const {
  // A measured profile's mean includes the messaging, which the emulated run adds again itself.
  auto mean_of = [](const TupleStats& t) { return t.node_ms > 0 ? t.node_ms : t.mean_ms; };
  if (const TupleStats* t = profile_.find(tuple)) return std::make_pair(mean_of(*t), t->scv);
  // Batch sizes between profiled ones: mean and standard deviation linear in n.
  const TupleStats *below = nullptr, *above = nullptr;
  for (ParallelismTuple at = tuple; at.batch > 1 && below == nullptr;) {
    --at.batch;
    below = profile_.find(at);
  }
  for (ParallelismTuple at = tuple; at.batch < kMaxBatch && above == nullptr;) {
    ++at.batch;
    above = profile_.find(at);
  }
  if (below == nullptr || above == nullptr) {
    return NotFound("emulation profile has no tuple " + to_string(tuple) +
                    " and no batch sizes on both sides of it to interpolate from");
  }
  const double w = static_cast<double>(tuple.batch - below->tuple.batch) /
                   static_cast<double>(above->tuple.batch - below->tuple.batch);
  const double m0 = mean_of(*below), m1 = mean_of(*above);
  const double sd0 = m0 * std::sqrt(std::max(below->scv, 0.0));
  const double sd1 = m1 * std::sqrt(std::max(above->scv, 0.0));
  const double mean = m0 + w * (m1 - m0), sd = sd0 + w * (sd1 - sd0);
  return std::make_pair(mean, mean > 0 ? (sd / mean) * (sd / mean) : 0.0);
}

StatusOr<double> ServiceSampler::sample_ms(const ParallelismTuple& tuple) {
  SERF_ASSIGN_OR_RETURN(auto st, stats(tuple));
  const auto [mean_ms, scv] = st;
  if (!random_ || scv <= 0) return mean_ms;
  GammaDraw draw(mean_ms, scv);
  return std::max(draw(rng_), 1e-3);
}

Status ServiceSampler::check(const Configuration& config) const {
  // A batch of n < b is interpolated between the profiled sizes, so b and 1 bound every n.
  for (int b : {config.batch, 1}) {
    Configuration c = config;
    c.batch = b;
    auto tuples = profile_.tuples_for(c);
    if (!tuples.ok()) {
      return tuples.status().with_context("emulation profile cannot run " + to_string(config));
    }
  }
  return Status::Ok();
}

void RateMonitor::record(double at_s) {
  if (!any_) {
    any_ = true;
    first_s_ = at_s;
  }
  arrivals_.push_back(at_s);
}

double RateMonitor::rate_per_s(double now_s) {
  while (!arrivals_.empty() && arrivals_.front() < now_s - window_s_) arrivals_.pop_front();
  return static_cast<double>(arrivals_.size()) / window_s_;
}

std::optional<std::pair<Configuration, double>> highest_capacity(const ConfigurationTable& table) {
  std::optional<std::pair<Configuration, double>> best;
  auto offer = [&](const Configuration& config, double rate_per_s, const Prediction& p) {
    if (!p.stable || !(p.utilization > 0)) return;
    const double capacity = rate_per_s / p.utilization;
    if (!best || capacity > best->second) best = std::make_pair(config, capacity);
  };
  for (const TableEntry& e : table.entries) {
    if (e.stable) offer(e.config, e.rate_per_s, e.prediction);
  }
  for (size_t k = 0; k < table.configurations.size() && k < table.predictions.size(); ++k) {
    for (size_t r = 0; r < table.entries.size() && r < table.predictions[k].size(); ++r)
      offer(table.configurations[k], table.entries[r].rate_per_s, table.predictions[k][r]);
  }
  return best;
}

double RateBand::half_width(double rate_per_s) const {
  if (!(window_s > 0) || !(sd > 0) || !(rate_per_s > 0)) return 0;
  return sd * std::sqrt(rate_per_s / window_s);
}

namespace {

// Whether the table names `config` at a stable level that a rate in [lo, hi] looks up: from
// lo's level (ConfigurationTable::lookup) to hi's. Above the top level, none but the top one.
bool named_within(const ConfigurationTable& table, double lo, double hi,
                  const Configuration& config) {
  const TableEntry* end = table.entries.data() + table.entries.size();
  for (const TableEntry* e = table.lookup(lo).entry; e != nullptr && e != end; ++e) {
    if (e->stable && e->config == config) return true;
    if (e->rate_per_s >= hi) break;  // the level that `hi` looks up is the last one
  }
  return false;
}

}  // namespace

SchedulerHook table_hook(TableSource source, double min_dwell_s, OverloadHook on_overload,
                         SwitchFilter filter, RateBand band) {
  struct State {
    double last_switch_s = -1e300;
    std::optional<Configuration> current;
    bool overloaded = false;
    // highest_capacity() of the table last seen: recomputed only when the source gives a new one.
    std::shared_ptr<const ConfigurationTable> table;
    std::optional<std::pair<Configuration, double>> biggest;
  };
  auto state = std::make_shared<State>();
  return [source = std::move(source), min_dwell_s, on_overload = std::move(on_overload),
          filter = std::move(filter), band,
          state](double now_s, double rate_per_s) -> std::optional<Configuration> {
    std::shared_ptr<const ConfigurationTable> table = source();
    if (table == nullptr) return std::nullopt;
    if (table != state->table) {
      state->table = table;
      state->biggest = highest_capacity(*table);
    }
    const auto& biggest = state->biggest;
    if (table->entries.empty() || rate_per_s <= 0) return std::nullopt;
    const TableEntry* entry = table->lookup(rate_per_s).entry;
    if (entry == nullptr) return std::nullopt;
    const bool overloaded = !entry->stable;
    if (overloaded && !state->overloaded && on_overload) {
      OverloadNote note;
      note.at_s = now_s;
      note.rate_per_s = rate_per_s;
      if (biggest) {
        note.config = biggest->first;
        note.capacity_per_s = biggest->second;
      }
      on_overload(note);
    }
    state->overloaded = overloaded;
    if (overloaded && !biggest) return std::nullopt;  // nothing in the table is ever stable
    const Configuration want = overloaded ? biggest->first : entry->config;
    // The rate band: the running configuration is still the table's at a rate the measurement
    // does not rule out above it.
    const bool held =
        !overloaded && state->current &&
        named_within(*table, rate_per_s, rate_per_s + band.half_width(rate_per_s), *state->current);
    const bool differs = !held && (!state->current || !(*state->current == want));
    // Hysteresis against a noisy rate; an overload is no noise: the queue grows meanwhile.
    const bool dwelt = overloaded || now_s - state->last_switch_s >= min_dwell_s;
    if (!overloaded && filter) {
      // Weighed at the load level the table chose at (at or above the measured rate): the same
      // margin the table keeps against a rate that is still rising.
      const double level_rate = std::max(rate_per_s, entry->rate_per_s);
      const bool allowed = filter(now_s, level_rate, want, differs && dwelt);
      if (differs && dwelt && !allowed) return std::nullopt;
    }
    if (!differs || !dwelt) return std::nullopt;
    state->last_switch_s = now_s;
    state->current = want;
    return want;
  };
}

SchedulerHook table_hook(ConfigurationTable table, double min_dwell_s, OverloadHook on_overload,
                         SwitchFilter filter, RateBand band) {
  auto fixed = std::make_shared<const ConfigurationTable>(std::move(table));
  return table_hook([fixed] { return fixed; }, min_dwell_s, std::move(on_overload),
                    std::move(filter), band);
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
      next_batch_due_s_(kNever),
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
  sw.preparation = transport_.last_preparation();
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
  slot_free_s_.assign(static_cast<size_t>(units_),
                      std::vector<double>(static_cast<size_t>(config_.service), -1.0));
  slot_period_idle_ms_ = slot_free_s_;
  std::uniform_int_distribution<int> pick(0, units_ - 1);
  for (int64_t id : waiting) {
    int u = pick(rng_);
    record(id).unit = u;
    queues_[static_cast<size_t>(u)].push_back(id);
  }
}

Status Controller::dispatch(int unit, int slot, const std::vector<int64_t>& ids) {
  const int64_t lead = ids.front();
  auto u = static_cast<size_t>(unit);
  ++running_[u];
  slot_request_[u][static_cast<size_t>(slot)] = lead;
  const int rows = static_cast<int>(ids.size());
  // A lead that arrived after its slot's last answer (or to a slot that never ran) found it idle
  // and opens a busy period; one that arrived before it queued behind that answer.
  const double free_s = slot_free_s_[u][static_cast<size_t>(slot)];
  double& period_idle_ms = slot_period_idle_ms_[u][static_cast<size_t>(slot)];
  const double lead_arrival_s = record(lead).arrival_s;
  const bool opened = free_s < 0 || lead_arrival_s >= free_s;
  if (opened) period_idle_ms = free_s < 0 ? -1.0 : (lead_arrival_s - free_s) * 1e3;
  for (size_t r = 0; r < ids.size(); ++r) {
    RequestRecord& rec = record(ids[r]);
    rec.slot_idle_ms = period_idle_ms;
    rec.opened_period = opened;
    rec.batch_row = static_cast<int>(r);
    rec.unit = unit;
    rec.slot = slot;
    rec.running = running_[u];
    rec.batch = rows;
    rec.config = config_;
    rec.generation = generation_;
  }
  RunAction action;
  action.kind = ActionKind::kRun;
  action.slot = slot;
  action.request_id = lead;
  action.running = running_[u];
  action.rows = rows;
  // One request's input goes as it is; a batch's inputs are sent one after the other.
  std::vector<float> joined;
  const std::vector<float>* input = pending_.at(lead).input.get();
  if (rows > 1) {
    for (int64_t id : ids) {
      const std::vector<float>& in = *pending_.at(id).input;
      joined.insert(joined.end(), in.begin(), in.end());
    }
    input = &joined;
  }
  action.payload_floats = static_cast<int32_t>(input->size());
  if (sampler_ != nullptr) {
    SERF_ASSIGN_OR_RETURN(action.emulated_ms, sampler_->sample_ms({action.running, config_.inter,
                                                                   config_.intra, rows}));
  }
  const double now = now_s();
  for (int64_t id : ids) record(id).dispatch_s = now;
  in_flight_[lead] = now;
  batches_[lead] = ids;
  return checked(transport_.send_run(unit, action, *input));
}

Status Controller::dispatch_ready() {
  next_batch_due_s_ = kNever;
  const auto b = static_cast<size_t>(std::max(config_.batch, 1));
  // Waiting for a batch to fill only while requests keep coming: a stop dispatches what is there.
  const double delay = draining_ ? 0 : options_.max_batch_delay_s;
  for (int u = 0; u < units_; ++u) {
    auto& q = queues_[static_cast<size_t>(u)];
    auto& slots = slot_request_[static_cast<size_t>(u)];
    for (int s = 0; s < config_.service && !q.empty(); ++s) {
      if (slots[static_cast<size_t>(s)] >= 0) continue;
      if (q.size() < b && delay > 0) {
        const double due = record(q.front()).arrival_s + delay;
        if (now_s() < due) {
          next_batch_due_s_ = std::min(next_batch_due_s_, due);
          break;
        }
      }
      std::vector<int64_t> ids;
      while (ids.size() < b && !q.empty()) {
        const int64_t id = q.front();
        q.pop_front();
        if (!drop_if_cancelled(id)) ids.push_back(id);
      }
      if (ids.empty()) break;  // every request left was cancelled: the queue is empty
      SERF_RETURN_IF_ERROR(dispatch(u, s, ids));
    }
  }
  return Status::Ok();
}

size_t Controller::in_flight_requests() const {
  size_t n = 0;
  for (const auto& [lead, ids] : batches_) n += ids.size();
  return n;
}

Status Controller::poll_results(bool* progress) {
  for (;;) {
    if (interrupted()) return Status::Ok();  // check_timeouts() reports it, nothing more is handled
    auto polled = transport_.poll_result();
    if (!polled.ok()) return checked(polled.status());
    std::optional<RunResult> result = std::move(polled).value();
    if (!result) return Status::Ok();
    *progress = true;
    SERF_RETURN_IF_ERROR(answer_batch(*result));
  }
}

Status Controller::answer_batch(const RunResult& result) {
  const int64_t lead = result.request_id;
  auto it = in_flight_.find(lead);
  if (it == in_flight_.end()) {
    return Internal("rank " + std::to_string(result.leader_rank) + " answered request " +
                    std::to_string(lead) + ", which is not in flight");
  }
  in_flight_.erase(it);
  probed_.erase(lead);
  auto members = batches_.find(lead);
  const std::vector<int64_t> ids = std::move(members->second);
  batches_.erase(members);
  const double done_s = now_s();
  bool any_waited = false, all_waited = true;
  for (int64_t id : ids) {
    RequestRecord& rec = record(id);
    rec.done_s = done_s;
    rec.service_ms = result.service_ms;
    const bool waited = static_cast<bool>(pending_.at(id).done);
    any_waited = any_waited || waited;
    all_waited = all_waited && waited;
  }
  const RequestRecord& first = record(lead);
  auto u = static_cast<size_t>(first.unit);
  --running_[u];
  slot_request_[u][static_cast<size_t>(first.slot)] = -1;
  slot_free_s_[u][static_cast<size_t>(first.slot)] = done_s;
  if (!result.ok) {
    const std::string why =
        "rank " + std::to_string(result.leader_rank) + " failed request " + std::to_string(lead) +
        (ids.size() > 1 ? " (a batch of " + std::to_string(ids.size()) + ")" : std::string()) +
        ": " + result.message;
    // A client hears of its own request's failure; a generated request's failure is a fault.
    for (int64_t id : ids) finish(id, Outcome::kFailed, why);
    if (!all_waited) return Internal(why);
    return Status::Ok();
  }
  planner_.answered(done_s - first.dispatch_s);
  if (!any_waited) {
    for (int64_t id : ids) finish(id, Outcome::kAnswered, "");
    return Status::Ok();
  }
  std::vector<float> output = transport_.take_output();
  std::vector<LayerTiming> layers = transport_.take_layer_timings();
  if (ids.size() == 1) {
    finish(lead, Outcome::kAnswered, "", std::move(output), std::move(layers));
    return Status::Ok();
  }
  // Row r of the output answers the batch's request r.
  if (output.size() % ids.size() != 0) {
    return Internal("rank " + std::to_string(result.leader_rank) + " answered a batch of " +
                    std::to_string(ids.size()) + " requests with " + std::to_string(output.size()) +
                    " output values (not whole rows)");
  }
  const size_t row = output.size() / ids.size();
  for (size_t r = 0; r < ids.size(); ++r) {
    const auto from = output.begin() + static_cast<std::ptrdiff_t>(r * row);
    finish(ids[r], Outcome::kAnswered, "",
           std::vector<float>(from, from + static_cast<std::ptrdiff_t>(row)), layers);
  }
  return Status::Ok();
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
  const double probe_at = timeout - probe_within - report_margin_s(timeout);
  for (const auto& [id, dispatched_s] : in_flight_) {
    const int unit = record(id).unit;
    const std::string what =
        "request " + std::to_string(id) + " on unit " + std::to_string(unit) + " not answered";
    if (now_s() - dispatched_s > probe_at && probed_.count(id) == 0) {
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
                                                          std::vector<double>* occupancy_ms,
                                                          int units) {
  if (occupancy_ms != nullptr) occupancy_ms->clear();
  if (!configured_) return Internal("run_closed_loop before configure");
  if (units < 1 || units > units_) {
    return InvalidArgument("closed loop on " + std::to_string(units) +
                           " unit(s): " + to_string(config_) + " has " + std::to_string(units_));
  }
  const int c = config_.service;
  std::vector<double> measured;
  std::vector<int> finished(static_cast<size_t>(units), 0);  // per unit
  std::vector<int64_t> ids;  // this loop's requests, consumed ones set to -1
  // A full batch of b each time: the tuple (i, K, T, b) is the time of a batch of b.
  auto submit = [&](int unit, int slot) {
    std::vector<int64_t> batch;
    for (int r = 0; r < std::max(config_.batch, 1); ++r) {
      InferRequest req;
      req.input = generator_input_;
      req.arrival = std::chrono::steady_clock::now();
      batch.push_back(enter(std::move(req), false));  // not queued: straight to `slot`
    }
    ids.push_back(batch.front());  // the batch ends with its first request
    return dispatch(unit, slot, batch);
  };
  const auto want = static_cast<size_t>(samples);
  for (int u = 0; u < units; ++u)
    for (int s = 0; s < c; ++s) SERF_RETURN_IF_ERROR(submit(u, s));
  while (measured.size() < want) {
    bool progress = false;
    SERF_RETURN_IF_ERROR(poll_results(&progress));
    SERF_RETURN_IF_ERROR(check_timeouts());
    if (!progress) {
      idle_wait(kNever);
      continue;
    }
    // By index: submit() below appends to `ids`, which a reference into it would not survive.
    for (size_t k = 0; k < ids.size(); ++k) {  // NOLINT(modernize-loop-convert)
      if (ids[k] < 0) continue;
      const RequestRecord& rec = record(ids[k]);
      if (!rec.answered) continue;
      // A finished request: measure it if its unit was full when it ran, refill its slot.
      ids[k] = -1;
      const int done_on_unit = ++finished[static_cast<size_t>(rec.unit)];
      if (done_on_unit > warmup && rec.running == c && measured.size() < want) {
        measured.push_back(rec.service_ms);
        if (occupancy_ms != nullptr) occupancy_ms->push_back((rec.done_s - rec.dispatch_s) * 1e3);
      }
      if (measured.size() < want) SERF_RETURN_IF_ERROR(submit(rec.unit, rec.slot));
    }
  }
  SERF_RETURN_IF_ERROR(drain());
  return measured;
}

}  // namespace serf::serve
