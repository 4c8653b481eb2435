// The controller's serving loop: admission (inbox and generator), deadlines, the scheduler tick,
// dispatch, answers, and the stop (drain) asked by a signal or a front end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "serve/controller.h"

namespace serf::serve {

namespace {
constexpr double kNever = std::numeric_limits<double>::infinity();
// After a stop signal, how long the controller listens for the nodes' farewells: mpirun sends
// SIGTERM to every rank when it tears the job down, and a live node answers within ~10 ms.
constexpr double kTornDownProbeS = 0.2;
}  // namespace

int64_t Controller::enter(InferRequest request, bool client) {
  RequestRecord rec;
  rec.id = next_id_++;
  rec.arrival_s = to_s(request.arrival);
  rec.client = client;
  records_.push_back(rec);
  ++counts_.received;
  if (!client) ++generated_open_;
  Pending p;
  p.input = request.input ? std::move(request.input) : generator_input_;
  p.done = std::move(request.done);
  p.deadline_s = request.deadline ? to_s(*request.deadline) : kNever;
  p.cancelled = std::move(request.cancelled);
  if (p.cancelled) ++cancellable_;
  pending_.emplace(rec.id, std::move(p));
  return rec.id;
}

void Controller::admit(InferRequest request, bool client) {
  const std::string ended = std::move(request.ended);
  const int64_t id = enter(std::move(request), client);
  if (!ended.empty()) {
    finish(id, Outcome::kTimedOut, ended);  // never queued: its input did not come
    return;
  }
  const int u = std::uniform_int_distribution<int>(0, units_ - 1)(rng_);
  record(id).unit = u;
  auto& q = queues_[static_cast<size_t>(u)];
  // Free slots take requests at once (up to b each): the bound is on requests that would wait.
  const size_t free_slots = static_cast<size_t>(std::max(0, config_.service - running_[u])) *
                            static_cast<size_t>(std::max(config_.batch, 1));
  if (options_.max_queue != kUnboundedQueue && q.size() >= options_.max_queue + free_slots) {
    finish(id, Outcome::kRejected,
           "the queue of unit " + std::to_string(u) + " is full (" +
               std::to_string(options_.max_queue) + " requests waiting; --max-queue)");
    return;
  }
  const double deadline = pending_.at(id).deadline_s;
  if (deadline <= now_s()) {
    finish(id, Outcome::kTimedOut,
           "its timeout of " + timeout_text(id, deadline) + " passed before it was queued");
    return;
  }
  q.push_back(id);
  next_deadline_s_ = std::min(next_deadline_s_, deadline);
}

std::string Controller::timeout_text(int64_t id, double deadline_s) {
  return seconds_text(std::round((deadline_s - record(id).arrival_s) * 1e6)) + " us";
}

void Controller::finish(int64_t id, Outcome outcome, const std::string& reason,
                        std::vector<float> output, std::vector<LayerTiming> layers) {
  RequestRecord& rec = record(id);
  rec.outcome = outcome;
  rec.answered = outcome == Outcome::kAnswered;
  if (!rec.answered) rec.done_s = now_s();  // when it ended
  switch (outcome) {
    case Outcome::kAnswered:
      ++counts_.answered;
      break;
    case Outcome::kRejected:
      ++counts_.rejected;
      break;
    case Outcome::kTimedOut:
      ++counts_.timed_out;
      break;
    case Outcome::kFailed:
      ++counts_.failed;
      break;
  }
  auto it = pending_.find(id);
  Completion done = std::move(it->second.done);
  if (it->second.cancelled) --cancellable_;
  pending_.erase(it);
  if (!rec.client) --generated_open_;
  for (const AnswerHook& hook : answer_hooks_) hook(rec);
  if (done) {
    InferAnswer a;
    a.outcome = outcome;
    a.reason = reason;
    a.output = std::move(output);
    a.layers = std::move(layers);
    if (rec.dispatch_s > 0) {
      a.queue_s = rec.dispatch_s - rec.arrival_s;
      a.compute_s = rec.done_s - rec.dispatch_s;
    } else {
      a.queue_s = rec.done_s - rec.arrival_s;
    }
    a.total_s = rec.done_s - rec.arrival_s;
    a.config = rec.config;
    done(std::move(a));
  }
  trim_records();
}

void Controller::trim_records() {
  if (options_.max_records == 0) return;
  while (records_.size() > options_.max_records && pending_.count(first_id_) == 0) {
    records_.pop_front();
    ++first_id_;
  }
}

void Controller::expire_deadlines(double now) {
  if (now < next_deadline_s_) return;
  next_deadline_s_ = kNever;
  for (auto& q : queues_) {
    for (auto it = q.begin(); it != q.end();) {
      const double deadline = pending_.at(*it).deadline_s;
      if (deadline > now) {
        next_deadline_s_ = std::min(next_deadline_s_, deadline);
        ++it;
        continue;
      }
      const int64_t id = *it;
      it = q.erase(it);
      finish(id, Outcome::kTimedOut,
             "still queued after its timeout of " + timeout_text(id, deadline));
    }
  }
}

bool Controller::drop_if_cancelled(int64_t id) {
  const Pending& p = pending_.at(id);
  if (!p.cancelled || !p.cancelled()) return false;
  // Counted as timed out: the client stopped waiting before the request was dispatched, as when
  // its timeout passes (a gRPC deadline reaches the server as a cancellation too). It was
  // admitted, so not rejected; nothing failed.
  finish(id, Outcome::kTimedOut,
         "its client went away while it was queued (cancelled, or the connection closed); not "
         "computed");
  return true;
}

void Controller::drop_cancelled() {
  if (cancellable_ == 0) return;  // the generator's requests, or clients that cannot go away
  for (auto& q : queues_) {
    std::deque<int64_t> kept;
    for (int64_t id : q) {
      if (!drop_if_cancelled(id)) kept.push_back(id);
    }
    q.swap(kept);
  }
}

void Controller::fail_all(const std::string& reason) {
  for (InferRequest& r : inbox_.close()) admit(std::move(r), true);
  std::vector<int64_t> ids;
  for (const auto& [id, p] : pending_) ids.push_back(id);
  for (auto& q : queues_) q.clear();
  in_flight_.clear();
  batches_.clear();
  for (auto& slots : slot_request_) std::fill(slots.begin(), slots.end(), -1);
  std::fill(running_.begin(), running_.end(), 0);
  for (int64_t id : ids) finish(id, Outcome::kFailed, reason);
}

OutcomeCounts Controller::counts() const {
  OutcomeCounts c = counts_;
  // Requests the inbox refused while stopping were received and rejected at the door.
  const uint64_t refused = inbox_.refused();
  c.received += refused;
  c.rejected += refused;
  return c;
}

void Controller::request_stop() {
  stop_requested_ = true;
  inbox_.wake();
}

bool Controller::stop_asked() const {
  return stop_requested_.load() || (options_.stop != nullptr && options_.stop->load());
}

Status Controller::begin_stop() {
  // mpirun sends SIGTERM to every rank when it tears the job down (a rank died): then the nodes
  // say farewell, and the dead one is named within mpirun's grace second. Otherwise the signal
  // was for the controller alone: drain.
  if (!stop_requested_.load() && transport_.job_torn_down(kTornDownProbeS)) {
    torn_down_ = true;
    return terminated();
  }
  draining_ = true;
  // Requests already in the inbox arrived before the stop: they are served.
  for (InferRequest& r : inbox_.close()) admit(std::move(r), true);
  publish(live().rate_per_s);
  return Status::Ok();
}

size_t Controller::queued() const {
  size_t n = 0;
  for (const auto& q : queues_) n += q.size();
  return n;
}

void Controller::publish(double rate_per_s) {
  std::lock_guard<std::mutex> lock(live_mutex_);
  live_.ready = configured_ && !draining_ && !torn_down_;
  live_.draining = draining_;
  live_.config = config_;
  live_.units = units_;
  live_.queued = queued();
  live_.in_flight = in_flight_requests();
  live_.rate_per_s = rate_per_s;
  live_.switches = switches_.size();
  live_.counts = counts();
}

LiveStatus Controller::live() const {
  std::lock_guard<std::mutex> lock(live_mutex_);
  return live_;
}

Status Controller::tick(const LoopPlan& plan, double t, RateMonitor* monitor, double* next_tick) {
  if (t < *next_tick) return Status::Ok();
  *next_tick = t + options_.tick_s;
  drop_cancelled();
  const double rate = monitor->rate_per_s(t);
  publish(rate);
  if (plan.hook == nullptr || !*plan.hook || draining_) return Status::Ok();
  // No rate on less than a window of arrivals: a partial window reads low, and the table would
  // send a unit started for the load it is about to get to the configuration of a lighter one.
  // The hook still gets the time (a --schedule switches on it); a rate of 0 is "not measured yet",
  // on which the table does not act.
  std::optional<Configuration> want = (*plan.hook)(t, monitor->warm(t) ? rate : 0.0);
  if (want && !(*want == config_)) SERF_RETURN_IF_ERROR(configure(*want));
  return Status::Ok();
}

Status Controller::run_loop(const LoopPlan& plan) {
  if (!configured_) return Internal("serving before configure");
  Status st = loop(plan);
  if (!st.ok()) fail_all(st.message());
  return st;
}

Status Controller::loop(const LoopPlan& plan) {
  RateMonitor monitor(options_.rate_window_s);
  const double start = now_s();
  const std::vector<double> none;
  const std::vector<double>& arrivals = plan.arrival_s != nullptr ? *plan.arrival_s : none;
  size_t next = 0;
  double next_tick = 0;
  std::vector<InferRequest> taken;
  for (;;) {
    if (stop_asked() && !draining_) {
      SERF_RETURN_IF_ERROR(begin_stop());
      next = arrivals.size();  // the generator stops too
    }
    const double t = now_s() - start;
    for (; next < arrivals.size() && arrivals[next] <= t; ++next) {
      InferRequest req;
      req.arrival = epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(start + arrivals[next]));
      monitor.record(arrivals[next]);
      admit(std::move(req), false);
    }
    taken.clear();
    inbox_.take_all(&taken);
    for (InferRequest& r : taken) {
      monitor.record(to_s(r.arrival) - start);
      admit(std::move(r), true);
    }
    expire_deadlines(now_s());
    const bool ticked = t >= next_tick;
    SERF_RETURN_IF_ERROR(tick(plan, t, &monitor, &next_tick));
    if (ticked && plan.enough && next < arrivals.size() && plan.enough()) next = arrivals.size();
    SERF_RETURN_IF_ERROR(dispatch_ready());
    bool progress = false;
    SERF_RETURN_IF_ERROR(poll_results(&progress));
    SERF_RETURN_IF_ERROR(check_timeouts());
    if (plan.done && plan.done()) return Status::Ok();
    const bool idle = queued() == 0 && in_flight_.empty();
    const bool generated_all = next == arrivals.size() && generated_open_ == 0;
    if (idle && (draining_ || (plan.end_with_generator && generated_all))) return Status::Ok();
    if (!progress) {
      double next_event = std::min({start + next_tick, next_deadline_s_, next_batch_due_s_});
      if (next < arrivals.size()) next_event = std::min(next_event, start + arrivals[next]);
      idle_wait(next_event);
    }
  }
}

Status Controller::run_open_loop(const std::vector<double>& arrival_s, const SchedulerHook& hook) {
  LoopPlan plan;
  plan.arrival_s = &arrival_s;
  plan.hook = &hook;
  plan.end_with_generator = true;
  return run_loop(plan);
}

Status Controller::run_open_loop_until(const std::vector<double>& arrival_s,
                                       const std::function<bool()>& enough) {
  LoopPlan plan;
  plan.arrival_s = &arrival_s;
  plan.end_with_generator = true;
  plan.enough = enough;
  return run_loop(plan);
}

Status Controller::serve(const SchedulerHook& hook, const std::vector<double>* arrival_s) {
  LoopPlan plan;
  plan.arrival_s = arrival_s;
  plan.hook = &hook;
  // With the generator, the run also ends when its requests have (measurement runs).
  plan.end_with_generator = arrival_s != nullptr;
  return run_loop(plan);
}

StatusOr<InferAnswer> Controller::infer_one(std::shared_ptr<const std::vector<float>> input) {
  SERF_ASSIGN_OR_RETURN(std::vector<InferAnswer> answers, infer_all({std::move(input)}));
  return std::move(answers.front());
}

StatusOr<std::vector<InferAnswer>> Controller::infer_all(
    const std::vector<std::shared_ptr<const std::vector<float>>>& inputs) {
  if (!configured_) return Internal("infer_all before configure");
  if (inputs.empty()) return Internal("infer_all without inputs");
  std::vector<std::optional<InferAnswer>> answers(inputs.size());
  size_t answered = 0;
  for (size_t r = 0; r < inputs.size(); ++r) {
    InferRequest req;
    req.input = inputs[r];
    req.arrival = std::chrono::steady_clock::now();
    req.done = [&answers, &answered, r](InferAnswer&& a) {
      answers[r] = std::move(a);
      ++answered;
    };
    admit(std::move(req), true);
  }
  LoopPlan plan;
  plan.done = [&answered, &inputs] { return answered == inputs.size(); };
  SERF_RETURN_IF_ERROR(run_loop(plan));
  std::vector<InferAnswer> out;
  out.reserve(answers.size());
  for (auto& a : answers) out.push_back(std::move(*a));
  return out;
}

}  // namespace serf::serve
