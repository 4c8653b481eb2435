#include "serf/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "serf/core/queue_model.h"
#include "serf/core/statistics.h"
#include "serf/sim/histogram.h"

namespace serf::sim {

StatusOr<ServiceSemantics> parse_service_semantics(const std::string& name) {
  if (name == "start") return ServiceSemantics::kStart;
  if (name == "shared") return ServiceSemantics::kShared;
  return InvalidArgument("unknown service semantics '" + name + "'; use start or shared");
}

const char* service_semantics_name(ServiceSemantics s) {
  return s == ServiceSemantics::kStart ? "start" : "shared";
}

double offered_utilization(const SimulationOptions& o) {
  if (o.units < 1) return std::numeric_limits<double>::infinity();
  const double lambda_unit_per_ms = o.rate_per_s / 1000.0 / o.units;
  if (o.batching) {
    const ServiceTable& t = *o.batching;
    return lambda_unit_per_ms * t.at(t.service(), t.batch()).mean_ms /
           (static_cast<double>(t.service()) * t.batch());
  }
  if (o.levels.empty()) return std::numeric_limits<double>::infinity();
  const double c = static_cast<double>(o.levels.size());
  return lambda_unit_per_ms * o.levels.back().mean_ms / c;
}

namespace {

using Rng = std::mt19937_64;

// Draws Gamma(mean, scv) times (serf/core/statistics.h): exponential at scv 1, a constant at 0.
class TimeSampler {
 public:
  explicit TimeSampler(ServiceLevel level) : draw_(level.mean_ms, level.scv) {}
  double draw(Rng& rng) { return draw_(rng); }

 private:
  GammaDraw draw_;
};

// Accumulates the measured requests' statistics.
class Recorder {
 public:
  Recorder(int64_t warmup, int64_t measured, int batches)
      : warmup_(warmup),
        batch_size_(std::max<int64_t>(1, measured / batches)),
        batch_sum_(static_cast<size_t>(batches), 0.0),
        batch_n_(static_cast<size_t>(batches), 0) {}

  // Also keep every request's latency, by id (replays).
  void keep_latencies(std::vector<double>* latencies) { latencies_ = latencies; }

  void record(int64_t id, double arrival_ms, double start_ms, double end_ms) {
    if (latencies_ != nullptr) (*latencies_)[static_cast<size_t>(id)] = end_ms - arrival_ms;
    if (id < warmup_) return;
    const double latency = end_ms - arrival_ms, wait = start_ms - arrival_ms;
    latency_hist_.add(latency);
    wait_hist_.add(wait);
    sum_latency_ += latency;
    sum_wait_ += wait;
    waited_ += wait > 0;
    const size_t b = std::min<size_t>(static_cast<size_t>(n_ / batch_size_), batch_sum_.size() - 1);
    batch_sum_[b] += latency;
    ++batch_n_[b];
    ++n_;
  }

  SimulationResult result(double percentile) const {
    SimulationResult r;
    const double n = static_cast<double>(n_);
    r.requests = n_;
    r.latency_ms = sum_latency_ / n;
    r.wait_ms = sum_wait_ / n;
    r.service_ms = r.latency_ms - r.wait_ms;
    r.p50_ms = latency_hist_.quantile(0.50);
    r.p90_ms = latency_hist_.quantile(0.90);
    r.p99_ms = latency_hist_.quantile(0.99);
    r.p999_ms = latency_hist_.quantile(0.999);
    r.wait_p99_ms = wait_hist_.quantile(0.99);
    if (percentile > 0) r.percentile_ms = latency_hist_.quantile(percentile / 100.0);
    r.wait_probability = static_cast<double>(waited_) / n;
    // Batch means: the batches' mean latencies are close to independent when a batch is much
    // longer than the queue's correlation time.
    std::vector<double> means(batch_sum_.size());
    for (size_t k = 0; k < means.size(); ++k) {
      means[k] = batch_sum_[k] / static_cast<double>(batch_n_[k]);
    }
    r.latency_ci95_ms = ci95_half_width(means);
    return r;
  }

 private:
  int64_t warmup_, batch_size_;
  std::vector<double> batch_sum_;
  std::vector<int64_t> batch_n_;
  LatencyHistogram latency_hist_, wait_hist_;
  std::vector<double>* latencies_ = nullptr;
  double sum_latency_ = 0, sum_wait_ = 0;
  int64_t n_ = 0, waited_ = 0;
};

struct Queued {
  double arrival_ms;
  int64_t id;
};

// A FIFO of waiting requests: a vector with a moving head, compacted when half is consumed.
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  const Queued& front() const { return items_[head_]; }
  void push(Queued q) { items_.push_back(q); }
  Queued pop() {
    const Queued q = items_[head_++];
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 4096 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return q;
  }

 private:
  std::vector<Queued> items_;
  size_t head_ = 0;
};

// kStart: the service time is fixed at start, so a request's latency is known when it starts and
// the unit only has to remember its slots' end times (a min-heap).
class StartUnit {
 public:
  explicit StartUnit(const std::vector<TimeSampler>& samplers) : samplers_(samplers) {
    ends_.reserve(samplers_.size());
  }

  void arrive(double t, int64_t id, Rng& rng, Recorder& rec) {
    advance(t, rng, rec);
    if (ends_.size() < samplers_.size()) {
      start({t, id}, t, rng, rec);
    } else {
      queue_.push({t, id});
    }
  }
  void drain(Rng& rng, Recorder& rec) {
    advance(std::numeric_limits<double>::infinity(), rng, rec);
  }

 private:
  void advance(double t, Rng& rng, Recorder& rec) {
    while (!ends_.empty() && ends_.front() <= t) {
      const double done = ends_.front();
      std::pop_heap(ends_.begin(), ends_.end(), std::greater<>());
      ends_.pop_back();
      if (!queue_.empty()) start(queue_.pop(), done, rng, rec);
    }
  }
  void start(Queued q, double now, Rng& rng, Recorder& rec) {
    const double end = now + samplers_[ends_.size()].draw(rng);  // level: running incl. itself
    ends_.push_back(end);
    std::push_heap(ends_.begin(), ends_.end(), std::greater<>());
    rec.record(q.id, q.arrival_ms, now, end);
  }

  std::vector<TimeSampler> samplers_;
  std::vector<double> ends_;
  Fifo queue_;
};

// Batching (start semantics): a free slot takes up to b waiting requests as one batch, whose
// service time is fixed at its start; slot end times in a min-heap as in StartUnit, plus the
// batch-delay timer (the oldest waiting request's arrival + D) while a slot is free.
class BatchUnit {
 public:
  BatchUnit(const ServiceTable& table, double max_delay_ms)
      : c_(static_cast<size_t>(table.service())),
        b_(static_cast<size_t>(table.batch())),
        delay_ms_(max_delay_ms) {
    for (int i = 1; i <= table.service(); ++i) {
      for (int n = 1; n <= table.batch(); ++n) samplers_.emplace_back(table.at(i, n));
    }
    ends_.reserve(c_);
  }

  void arrive(double t, int64_t id, Rng& rng, Recorder& rec) {
    advance(t, rng, rec);
    queue_.push({t, id});
    dispatch(t, rng, rec);
  }
  void drain(Rng& rng, Recorder& rec) {
    advance(std::numeric_limits<double>::infinity(), rng, rec);
  }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Starts batches while a slot is free and the queue may go (full batch, no delay, or timed out).
  void dispatch(double now, Rng& rng, Recorder& rec) {
    while (ends_.size() < c_ && !queue_.empty()) {
      if (queue_.size() < b_ && delay_ms_ > 0 && now < queue_.front().arrival_ms + delay_ms_) {
        return;
      }
      start(now, rng, rec);
    }
  }
  void advance(double t, Rng& rng, Recorder& rec) {
    for (;;) {
      const double next_end = ends_.empty() ? kNever : ends_.front();
      const double timer =
          ends_.size() < c_ && !queue_.empty() ? queue_.front().arrival_ms + delay_ms_ : kNever;
      const double next = std::min(next_end, timer);
      if (next > t || next == kNever) return;  // (drain passes t = kNever)
      if (next_end <= timer) {
        std::pop_heap(ends_.begin(), ends_.end(), std::greater<>());
        ends_.pop_back();
      }
      dispatch(next, rng, rec);
    }
  }
  void start(double now, Rng& rng, Recorder& rec) {
    const size_t n = std::min(queue_.size(), b_);
    const double end = now + samplers_[ends_.size() * b_ + (n - 1)].draw(rng);
    ends_.push_back(end);
    std::push_heap(ends_.begin(), ends_.end(), std::greater<>());
    for (size_t k = 0; k < n; ++k) {
      const Queued q = queue_.pop();
      rec.record(q.id, q.arrival_ms, now, end);
    }
  }

  size_t c_, b_;
  double delay_ms_;
  std::vector<TimeSampler> samplers_;  // level (i, n) at (i - 1) * b + (n - 1)
  std::vector<double> ends_;
  Fifo queue_;
};

// kShared: every running request advances at rate 1/mean_ms(n). All share that rate, so a
// virtual clock V (work done by any request running since V = 0) orders departures: a request
// that starts at V0 with work w leaves when V reaches V0 + w.
class SharedUnit {
 public:
  SharedUnit(const std::vector<ServiceLevel>& levels, TimeSampler work)
      : levels_(levels), work_(work) {
    running_.reserve(levels_.size());
  }

  void arrive(double t, int64_t id, Rng& rng, Recorder& rec) {
    advance(t, rng, rec);
    if (running_.size() < levels_.size()) {
      start({t, id}, t, rng);
    } else {
      queue_.push({t, id});
    }
  }
  void drain(Rng& rng, Recorder& rec) {
    advance(std::numeric_limits<double>::infinity(), rng, rec);
  }

 private:
  struct Running {
    double v_end;  // virtual time of departure
    double arrival_ms, start_ms;
    int64_t id;
    bool operator>(const Running& o) const { return v_end > o.v_end; }
  };

  void advance(double t, Rng& rng, Recorder& rec) {
    while (!running_.empty()) {
      const double mean = levels_[running_.size() - 1].mean_ms;
      const Running& next = running_.front();
      const double done = now_ + (next.v_end - v_) * mean;
      if (done > t) {
        v_ += (t - now_) / mean;
        now_ = t;
        return;
      }
      v_ = next.v_end;
      now_ = done;
      rec.record(next.id, next.arrival_ms, next.start_ms, done);
      std::pop_heap(running_.begin(), running_.end(), std::greater<>());
      running_.pop_back();
      if (!queue_.empty()) start(queue_.pop(), done, rng);
    }
    now_ = t;  // idle: the virtual clock stands still
  }
  void start(Queued q, double now, Rng& rng) {
    running_.push_back({v_ + work_.draw(rng), q.arrival_ms, now, q.id});
    std::push_heap(running_.begin(), running_.end(), std::greater<>());
  }

  std::vector<ServiceLevel> levels_;
  TimeSampler work_;
  std::vector<Running> running_;
  Fifo queue_;
  double v_ = 0, now_ = 0;
};

template <typename Unit>
SimulationResult run(const SimulationOptions& o, ArrivalProcess arrivals, std::vector<Unit> units,
                     int64_t warmup) {
  Rng rng(o.seed);
  Recorder rec(warmup, o.requests - warmup, o.batches);
  std::uniform_int_distribution<int> route(0, o.units - 1);
  double t_ms = 0;
  for (int64_t id = 0; id < o.requests; ++id) {
    t_ms = arrivals.next_s(rng) * 1000.0;
    const int u = o.units == 1 ? 0 : route(rng);
    units[static_cast<size_t>(u)].arrive(t_ms, id, rng, rec);
  }
  for (Unit& u : units) u.drain(rng, rec);
  SimulationResult r = rec.result(o.percentile);
  r.simulated_s = t_ms / 1000.0;
  r.utilization = offered_utilization(o);
  return r;
}

// Calls fn(units): `n` units of the semantics' kind, serving `levels`.
template <typename Fn>
auto with_units(ServiceSemantics semantics, const std::vector<ServiceLevel>& levels, size_t n,
                Fn&& fn) {
  if (semantics == ServiceSemantics::kStart) {
    std::vector<TimeSampler> samplers(levels.begin(), levels.end());
    return fn(std::vector<StartUnit>(n, StartUnit(samplers)));
  }
  const TimeSampler work(ServiceLevel{1.0, levels.front().scv});
  return fn(std::vector<SharedUnit>(n, SharedUnit(levels, work)));
}

template <typename Unit>
std::vector<double> replay_path(std::vector<Unit> units, const std::vector<double>& arrival_ms,
                                const std::vector<int>& unit_of, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = static_cast<int64_t>(arrival_ms.size());
  std::vector<double> latencies(arrival_ms.size(), 0.0);
  Recorder rec(0, n, 1);
  rec.keep_latencies(&latencies);
  for (int64_t id = 0; id < n; ++id) {
    const size_t k = static_cast<size_t>(id);
    units[static_cast<size_t>(unit_of[k])].arrive(arrival_ms[k], id, rng, rec);
  }
  for (Unit& u : units) u.drain(rng, rec);
  return latencies;
}

Status check_levels(const std::vector<ServiceLevel>& levels) {
  if (levels.empty())
    return InvalidArgument("simulation needs at least one service level (c >= 1)");
  for (size_t i = 0; i < levels.size(); ++i) {
    const ServiceLevel& l = levels[i];
    if (!std::isfinite(l.mean_ms) || l.mean_ms <= 0 || !std::isfinite(l.scv) || l.scv < 0) {
      return InvalidArgument("service level " + std::to_string(i + 1) +
                             ": mean_ms must be finite and > 0, scv finite and >= 0");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<double>> replay_latencies(const std::vector<ServiceLevel>& levels,
                                               ServiceSemantics semantics, int units,
                                               const std::vector<double>& arrival_ms,
                                               const std::vector<int>& unit_of, uint64_t seed) {
  SERF_RETURN_IF_ERROR(check_levels(levels));
  if (units < 1) return InvalidArgument("the cluster needs at least one serving unit");
  if (arrival_ms.size() != unit_of.size()) {
    return InvalidArgument("replay: " + std::to_string(arrival_ms.size()) + " arrivals but " +
                           std::to_string(unit_of.size()) + " unit indices");
  }
  for (size_t k = 0; k < arrival_ms.size(); ++k) {
    if (!std::isfinite(arrival_ms[k]) || (k > 0 && arrival_ms[k] < arrival_ms[k - 1])) {
      return InvalidArgument("replay: arrival " + std::to_string(k) +
                             " is not finite or comes before the one before it");
    }
    if (unit_of[k] < 0 || unit_of[k] >= units) {
      return InvalidArgument("replay: arrival " + std::to_string(k) + " goes to unit " +
                             std::to_string(unit_of[k]) + " of " + std::to_string(units));
    }
  }
  return with_units(semantics, levels, static_cast<size_t>(units), [&](auto servers) {
    return replay_path(std::move(servers), arrival_ms, unit_of, seed);
  });
}

StatusOr<SimulationResult> simulate(const SimulationOptions& o) {
  if (o.batching) {
    if (o.semantics != ServiceSemantics::kStart) {
      return InvalidArgument("batching is simulated with start semantics only");
    }
    if (!std::isfinite(o.max_batch_delay_ms) || o.max_batch_delay_ms < 0) {
      return InvalidArgument("the max batch delay must be finite and >= 0 ms");
    }
  } else {
    SERF_RETURN_IF_ERROR(check_levels(o.levels));
    if (o.max_batch_delay_ms != 0) {
      return InvalidArgument("a max batch delay needs batching (b > 1)");
    }
  }
  if (o.units < 1) return InvalidArgument("the cluster needs at least one serving unit");
  if (o.batches < 2) return InvalidArgument("batch means need at least 2 batches");
  if (!(o.percentile >= 0 && o.percentile < 100)) {
    return InvalidArgument("percentile must be in (0, 100), or 0 for none");
  }
  const int64_t warmup = o.warmup < 0 ? o.requests / 10 : o.warmup;
  if (o.requests - warmup < 10LL * o.batches) {
    return InvalidArgument("too few requests: " + std::to_string(o.requests) + " with warm-up " +
                           std::to_string(warmup) + " leaves fewer than " +
                           std::to_string(10 * o.batches) + " to measure; raise --requests");
  }
  SERF_ASSIGN_OR_RETURN(ArrivalProcess arrivals,
                        ArrivalProcess::Create(o.arrival_kind, o.rate_per_s, o.arrival_scv));
  const double rho = offered_utilization(o);
  if (!stable_at(rho)) {
    return UnstableLoad("utilization rho = lambda_unit / (c mu_c) = " + std::to_string(rho) +
                        " >= 1, the queue grows without bound and there is no steady state; "
                        "lower the rate or add nodes");
  }
  const SimulationResult r =
      o.batching
          ? run(o, std::move(arrivals),
                std::vector<BatchUnit>(static_cast<size_t>(o.units),
                                       BatchUnit(*o.batching, o.max_batch_delay_ms)),
                warmup)
          : with_units(o.semantics, o.levels, static_cast<size_t>(o.units), [&](auto servers) {
              return run(o, std::move(arrivals), std::move(servers), warmup);
            });
  if (!std::isfinite(r.latency_ms) || !std::isfinite(r.latency_ci95_ms) ||
      !std::isfinite(r.simulated_s)) {
    return InvalidArgument(
        "the simulation has no finite result: the rate or the service times are out of range "
        "(simulated time " +
        std::to_string(r.simulated_s) + " s)");
  }
  return r;
}

}  // namespace serf::sim
