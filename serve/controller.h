#pragma once
// The controller (rank 0): request inbox, admission, rate monitor, dispatcher with one FIFO queue
// per serving unit, and the scheduler hook that switches configuration online. Requests come from
// the front ends' threads (through the inbox) and from the built-in generator; both take the same
// path from admission to the answer. Pure logic over a Transport, so it is tested without MPI
// against a fake transport (tests/serve/controller_test.cc).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "serf/core/arrivals.h"
#include "serf/core/planner.h"
#include "serf/core/profile.h"
#include "serf/core/status.h"
#include "serve/inbox.h"
#include "serve/messages.h"
#include "serve/request.h"

namespace serf::serve {

// How the controller reaches the nodes. The MPI implementation is MpiTransport (mpi_transport.h).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int nodes() const = 0;
  // Applies `config` while no request is in flight: stops the old slots, rebuilds communicators
  // on every node and returns when every node is ready (or an error naming the ranks that are not).
  virtual Status configure(const Configuration& config) = 0;
  // What the nodes did for the kernels of the last configure(): the most costly of their
  // preparations (kUnknown when the transport cannot tell).
  virtual Preparation last_preparation() const { return Preparation::kUnknown; }
  // Sends one action to slot `slot` of unit `unit` (and its input payload, possibly empty).
  virtual Status send_run(int unit, const RunAction& action, const std::vector<float>& input) = 0;
  // A finished request if one is ready; never blocks.
  virtual StatusOr<std::optional<RunResult>> poll_result() = 0;
  // The output payload of the result poll_result() returned last (moved out; empty when the
  // workers send none).
  virtual std::vector<float> take_output() { return {}; }
  // The per-layer times of that result (moved out; empty when the workers send none).
  virtual std::vector<LayerTiming> take_layer_timings() { return {}; }
  // Called once a stop was asked by a signal: true when the nodes are being terminated too (mpirun
  // tears the job down after a rank died), found within `window_s`; false when the signal came to
  // the controller alone (an operator stopping the service: drain and finish).
  virtual bool job_torn_down(double window_s) { return false; }
  // Called when a request on unit `unit` is close to the node timeout: asks the unit's ranks
  // whether they are alive, waiting at most `within_s`. Ok when every rank answers (the request
  // itself is slow), else Unavailable naming the unit's ranks and the silent ones.
  virtual Status probe(int unit, double within_s) = 0;
  // Stops every node (after the last request).
  virtual Status shutdown() = 0;
  // Called once the job was terminated (SIGTERM): a line naming the node ranks that died, when
  // the transport can tell.
  virtual std::string diagnose_terminated() {
    return "terminated (SIGTERM): a node rank died or the job was cancelled";
  }
};

// Emulated nodes: the service time of a batch is drawn from the profile's tuple (i, K, T, n).
// A batch size n the profile lacks is interpolated linearly in n between the nearest sizes
// profiled below and above it at the same (i, K, T) (the rule of serf::service_table).
class ServiceSampler {
 public:
  // `random` false: always the tuple's mean; true: a Gamma draw with the tuple's mean and SCV.
  ServiceSampler(Profile profile, bool random, uint64_t seed);
  StatusOr<double> sample_ms(const ParallelismTuple& tuple);
  // NotFound naming the first tuple (1..c, K, T, b) (and with b > 1, (1..c, K, T, 1)) the
  // profile lacks.
  Status check(const Configuration& config) const;

 private:
  // Mean (ms) and SCV of tuple (i, K, T, n), interpolated in n when the profile lacks it.
  StatusOr<std::pair<double, double>> stats(const ParallelismTuple& tuple) const;
  Profile profile_;
  bool random_;
  std::mt19937_64 rng_;
};

// Arrivals per second over a sliding window (the online scheduler's input). Before a whole window
// has passed, the time before the start counts as an empty part of it, as a step up later in the
// run is seen: dividing by the time since the start instead made the estimate hang on when the
// tick came (seed 1's first two arrivals at 4/s, 36 and 73 ms, read 20/s at a tick on time and
// 28/s at one 25 ms late on a loaded host, and a table switched on them).
class RateMonitor {
 public:
  explicit RateMonitor(double window_s) : window_s_(window_s) {}
  void record(double at_s);
  double rate_per_s(double now_s);
  // Whether a whole window has passed since the first arrival: before it the rate is a lower
  // bound (the time before the load began counts as empty), which the scheduler must not switch
  // on. The first arrival, not the service's start: clients connect when they are ready.
  bool warm(double now_s) const { return any_ && now_s - first_s_ >= window_s_; }

 private:
  double window_s_;
  bool any_ = false;    // an arrival was recorded
  double first_s_ = 0;  // the first one's time (before the service's start for an early client)
  std::deque<double> arrivals_;
};

// The scheduler hook: asked periodically; returns a configuration to switch to, or nothing.
using SchedulerHook = std::function<std::optional<Configuration>(double now_s, double rate_per_s)>;

// The table scheduler's word that the measured load exceeds every configuration of its table.
struct OverloadNote {
  double at_s = 0;            // the hook's now_s
  double rate_per_s = 0;      // the measured arrival rate
  Configuration config;       // the configuration of highest capacity in the table, switched to
  double capacity_per_s = 0;  // its capacity as the table predicts it (rate / utilization)
};
using OverloadHook = std::function<void(const OverloadNote&)>;

// The configuration of highest predicted capacity among the table's stable predictions (its
// entries, and every configuration's when planned with keep_all); nullopt when none is stable.
std::optional<std::pair<Configuration, double>> highest_capacity(const ConfigurationTable& table);

// SERF's online scheduler: looks the measured rate up in the configuration reference table (the
// nearest load level at or above it) and switches when the table names another configuration and
// the last switch is at least `min_dwell_s` ago (hysteresis: a noisy rate estimate near a level
// boundary must not make the cluster flap). A level where no configuration is stable means the
// load exceeds them all: the hook switches at once to the one of highest capacity and, once per
// such episode, tells `on_overload`.
// Where the hook reads its table at each call: a fixed table, or the newest re-planned one
// (self-calibration); never null.
using TableSource = std::function<std::shared_ptr<const ConfigurationTable>()>;
// Asked at every call of the hook outside an overload with the table's configuration and the rate
// of its load level (the nearest at or above the measured rate, as the table looks it up);
// `would_switch`: it differs from the running one and the dwell time passed. Returns whether to
// switch (read only when would_switch): a switch that costs more than it gains is declined
// (SwitchGate, serve/switch_cost.h). An overload switches without asking.
using SwitchFilter = std::function<bool(double now_s, double rate_per_s,
                                        const Configuration& wanted, bool would_switch)>;
// Hysteresis in rate. The measured rate is a count of arrivals over `window_s`: at rate r its
// standard deviation is sqrt(r / window_s) for Poisson arrivals. A switch away from a running
// configuration that the table names at a level within `sd` of those deviations above the rate
// (so: to a lighter load's configuration, on a rate that may have dipped by chance) waits until
// the rate is lower; a switch to a heavier load's configuration does not wait, too few servers
// cost more than too many. sd = 0 or window_s = 0: no band.
struct RateBand {
  double window_s = 0;
  double sd = 0;
  double half_width(double rate_per_s) const;  // sd standard deviations at rate_per_s
};
SchedulerHook table_hook(TableSource source, double min_dwell_s, OverloadHook on_overload = nullptr,
                         SwitchFilter filter = nullptr, RateBand band = {});
SchedulerHook table_hook(ConfigurationTable table, double min_dwell_s,
                         OverloadHook on_overload = nullptr, SwitchFilter filter = nullptr,
                         RateBand band = {});

struct RequestRecord {
  int64_t id = -1;
  double arrival_s = 0;   // arrival (scheduled for generated load), on the controller's clock
  double dispatch_s = 0;  // sent to a unit leader
  double done_s = 0;      // result received by the controller
  double service_ms = 0;  // measured on the unit leader
  int unit = -1;
  int slot = -1;
  int running = 0;    // i at dispatch: batches running in the unit, this one's included
  int batch = 1;      // requests in the batch it was served in (1..b)
  int batch_row = 0;  // its row in that batch (0: the first, which the batch's counts use)
  int generation = 0;
  // Its slot's idle time before the busy period it ran in (ms): from the slot's last answer to
  // the arrival of the period's first request; -1 for the slot's first period since the
  // configuration was set. `opened_period`: it arrived to an idle slot (or one that never ran)
  // and began that period; else it arrived before the slot's last answer and queued. What the
  // idle-arrival penalty of the model depends on (serf/core/idle_penalty.h), and what
  // self-calibration takes off its observation.
  double slot_idle_ms = -1;
  bool opened_period = false;
  Configuration config;
  bool answered = false;  // outcome == kAnswered
  Outcome outcome = Outcome::kFailed;
  bool client = false;  // sent by a client of a front end (not the built-in generator)
  double latency_ms() const { return (done_s - arrival_s) * 1e3; }  // from the scheduled arrival
};

struct SwitchRecord {
  double at_s = 0;
  Configuration from, to;
  double drain_ms = 0;      // waiting for in-flight requests
  double configure_ms = 0;  // stop, rebuild communicators on every node, ready
  Preparation preparation = Preparation::kUnknown;  // the nodes' kernels: held, warm or cold
  double total_ms() const { return drain_ms + configure_ms; }
};

inline constexpr size_t kUnboundedQueue = static_cast<size_t>(-1);

struct ControllerOptions {
  int cores_per_node = 1024;  // F: configure() refuses a configuration with c*T > F (validate())
  // A request not answered in this long is a fault, reported within this long too: the unit is
  // probed (pinged) at most kProbeMaxS (and at most half of it) plus a report margin before the
  // timeout, so a dead or hung node is named before the timeout passes, not a ping window after
  // it; a unit that answers the ping is reported when the timeout passes.
  double node_timeout_s = 10;
  double tick_s = 0.05;  // how often the scheduler hook is asked
  double rate_window_s = 2;
  uint64_t seed = 1;
  std::vector<float> input;  // the generator's requests carry it (empty for emulated nodes)
  // Requests waiting in one unit's queue at most (beyond its free slots); one more is rejected.
  size_t max_queue = kUnboundedQueue;
  // With batches (b > 1): a free slot with fewer than b requests waiting waits until b wait or
  // the oldest has waited this long (0: never waits, takes what is there).
  double max_batch_delay_s = 0;
  // Finished requests kept in records() at most, the oldest dropped first (0: all). A service
  // that runs for days keeps its memory flat; the journal (answer hook) sees every request.
  size_t max_records = 0;
  // Set from outside (a SIGTERM from mpirun after a node died): stop, keep what was measured.
  const std::atomic<bool>* interrupted = nullptr;
  // Set from outside (SIGINT, SIGTERM or SIGUSR1 to rank 0 while serving): stop taking requests,
  // finish the queued and running ones, return.
  const std::atomic<bool>* stop = nullptr;
};

// Called on rank 0 for each request as it ends, whatever its outcome (the run journal, metrics).
using AnswerHook = std::function<void(const RequestRecord&)>;

// How many requests ended how, since the controller started.
struct OutcomeCounts {
  uint64_t received = 0, answered = 0, rejected = 0, timed_out = 0, failed = 0;
  bool balanced() const { return received == answered + rejected + timed_out + failed; }
};
// "received 10 = answered 7 + rejected 1 + timed out 1 + failed 1"
std::string accounting_line(const OutcomeCounts& counts);

// How long the controller may sleep before it looks for answers again. Each wake-up costs a node
// sharing its core time (measured on a 2-core VM: polling every 100 us slowed a request on the
// same core by 40 %, every 1 ms by nothing measurable). An answer comes no sooner than the
// shortest dispatch-to-answer time seen in this configuration, so until 80 % of it has passed
// after the oldest dispatch the controller sleeps in steps of up to kCoarseS, then polls every
// kFineS: about 20 wake-ups per request instead of one per 100 us.
class PollPlanner {
 public:
  static constexpr double kFineS = 100e-6;
  static constexpr double kCoarseS = 5e-3;
  void reset() { recent_.clear(); }
  void answered(double occupancy_s);
  // `oldest_dispatch_s`: the earliest dispatch among requests in flight (or +inf: none);
  // `next_event_s`: the next arrival or scheduler tick (or +inf). Times on the controller's clock.
  double sleep_s(double now_s, double oldest_dispatch_s, double next_event_s) const;

 private:
  std::deque<double> recent_;  // the last kRecent dispatch-to-answer times, seconds
  static constexpr size_t kRecent = 32;
};

// What the controller is doing, for the front ends' health and metrics (read from their threads).
struct LiveStatus {
  bool ready = false;     // every node prepared the model and the controller takes requests
  bool draining = false;  // a stop was asked: queued and running requests finish, new ones 503
  Configuration config;
  int units = 0;
  size_t queued = 0;      // waiting in the units' queues
  size_t in_flight = 0;   // dispatched, not answered
  double rate_per_s = 0;  // arrivals over the rate window, as the scheduler sees them
  size_t switches = 0;
  OutcomeCounts counts;
};

class Controller {
 public:
  // How long a ping has to be answered before the node timeout (ControllerOptions::node_timeout_s):
  // half of it, at most 2 s (the default 10 s: pinged at 8 s). An early ping costs nothing, a
  // short one names a live node: at 0.2 of a 2 s timeout, a live node rank inside a collective
  // missed its 0.4 s ping at load 14 and was named with the hung one
  // (test_mpi_cli_fault_stop_switch).
  static constexpr double kProbeMaxS = 2.0;
  static double probe_s(double node_timeout_s) {
    return std::min(kProbeMaxS, 0.5 * node_timeout_s);
  }
  // How much earlier still an unanswered request's unit is probed: the report (partial results
  // written, the summary, the error line) takes up to this long on a loaded machine, and a hung
  // node must be named within the node timeout in total (10 s by default: probed at 6 s, the ping
  // given up at 8 s, then the report). Probed exactly probe_s() before the timeout, the line came
  // 10.07 s after a SIGSTOP; with a 0.5 s margin still 10.07 s once in 5 beside two busy loops;
  // with 1 s, 10.34 s once at load 17. An early ping costs nothing: a live node answers it.
  static double report_margin_s(double node_timeout_s) {
    return std::min(2.0, 0.2 * node_timeout_s);
  }
  Controller(Transport& transport, ControllerOptions options);
  // Emulated nodes: each action carries a service time drawn here. Without it nodes compute.
  void set_sampler(ServiceSampler* sampler) { sampler_ = sampler; }
  void set_rate_window_s(double window_s) { options_.rate_window_s = window_s; }
  void set_max_queue(size_t max_queue) { options_.max_queue = max_queue; }
  void set_max_batch_delay_s(double delay_s) { options_.max_batch_delay_s = delay_s; }
  void set_max_records(size_t max_records) { options_.max_records = max_records; }
  void set_answer_hook(AnswerHook hook) { answer_hooks_ = {std::move(hook)}; }
  void add_answer_hook(AnswerHook hook) { answer_hooks_.push_back(std::move(hook)); }
  // Called once when the job is being torn down (SIGTERM), before the transport spends part of
  // mpirun's grace time naming the dead node: save what was measured now.
  void set_terminated_hook(std::function<void()> hook) { terminated_hook_ = std::move(hook); }

  // Switches to `config` (drains first). The first call starts the nodes.
  Status configure(const Configuration& config);
  const Configuration& config() const { return config_; }
  int units() const { return units_; }

  // Where the front ends' threads hand requests over (thread-safe).
  RequestInbox& inbox() { return inbox_; }
  // Thread-safe: asks a running serve() to drain and return (as the `stop` option does).
  void request_stop();
  LiveStatus live() const;  // thread-safe

  // Open loop: requests arrive at `arrival_s` (seconds from now, ascending), are split at random
  // over units and wait in the unit's FIFO queue; `hook` may switch configuration while they run.
  // Client requests in the inbox are served alongside. Returns when every generated request has
  // ended; on a fault the records so far stay in records().
  Status run_open_loop(const std::vector<double>& arrival_s, const SchedulerHook& hook);
  // The same, but the generator stops early once `enough()` (asked every tick_s on this thread)
  // says so: the requests that arrived finish, the rest never arrive. Measurement runs that stop
  // when they are precise (serf profile --exhaustive --precision).
  Status run_open_loop_until(const std::vector<double>& arrival_s,
                             const std::function<bool()>& enough);
  // The service: takes requests from the inbox (and from `arrival_s` when given, as run_open_loop)
  // until a stop is asked, then stops taking requests, finishes the queued and running ones and
  // returns. Without `arrival_s` it runs until the stop.
  Status serve(const SchedulerHook& hook, const std::vector<double>* arrival_s = nullptr);
  // One request with `input`, served now (serf infer --inter).
  StatusOr<InferAnswer> infer_one(std::shared_ptr<const std::vector<float>> input);
  // Requests with these inputs, all queued before any is dispatched, served now: with c = 1 and
  // b >= inputs.size() they run as one batch (serf infer --inter K --batch b). Answers in order.
  StatusOr<std::vector<InferAnswer>> infer_all(
      const std::vector<std::shared_ptr<const std::vector<float>>>& inputs);
  // Closed loop on units 0..units-1 (1: unit 0 alone; at most units()): keeps exactly c batches
  // of b requests running on each (b = 1: c requests) until `samples` batches have been measured
  // over all of them, the first `warmup` to finish on each unit left out; returns the service
  // times (ms) the nodes measured for the measured ones and, when `occupancy_ms` is given, how
  // long each held its slot as the controller sees it (dispatch to answer: the nodes' time plus
  // the messaging), which is the service time the queue model needs. Several units measure the
  // same tuple side by side on disjoint nodes (serf profile --side-by-side).
  StatusOr<std::vector<double>> run_closed_loop(int warmup, int samples,
                                                std::vector<double>* occupancy_ms = nullptr,
                                                int units = 1);

  Status shutdown() { return checked(transport_.shutdown()); }

  // Requests in id order (the oldest may be dropped: ControllerOptions::max_records).
  const std::deque<RequestRecord>& records() const { return records_; }
  const std::vector<SwitchRecord>& switches() const { return switches_; }
  OutcomeCounts counts() const;
  double now_s() const;
  double to_s(SteadyTime t) const;

 private:
  // What a queued or running request carries besides its record.
  struct Pending {
    std::shared_ptr<const std::vector<float>> input;
    Completion done;
    double deadline_s = 0;            // +inf: none
    std::function<bool()> cancelled;  // InferRequest::cancelled
  };
  struct LoopPlan {
    const std::vector<double>* arrival_s = nullptr;  // the generator's arrivals, or none
    const SchedulerHook* hook = nullptr;
    // Ends once every generated request ended and nothing is queued or running; otherwise the
    // loop ends when `done` says so or after a stop, once drained.
    bool end_with_generator = false;
    std::function<bool()> done;
    std::function<bool()> enough;  // asked every tick: true stops the generator (drains)
  };
  // loop(), then every request still queued or running fails with the loop's error.
  Status run_loop(const LoopPlan& plan);
  Status loop(const LoopPlan& plan);
  // Asks the scheduler hook (every tick_s); switches when it names another configuration.
  Status tick(const LoopPlan& plan, double t, RateMonitor* monitor, double* next_tick);
  // Records a new request (received); returns its id.
  int64_t enter(InferRequest request, bool client);
  // Admission: a request is queued on a random unit, or ends now (queue full, stopping, expired).
  void admit(InferRequest request, bool client);
  void admit_inbox();
  // Ends request `id` with `outcome`: its completion, the answer hooks, the counts.
  void finish(int64_t id, Outcome outcome, const std::string& reason,
              std::vector<float> output = {}, std::vector<LayerTiming> layers = {});
  // "20000 us": a request's timeout, as its client gave it.
  std::string timeout_text(int64_t id, double deadline_s);
  // Queued requests whose deadline passed end kTimedOut.
  void expire_deadlines(double now);
  // Whether queued request `id`'s client went away; if so it ends kTimedOut (not computed).
  bool drop_if_cancelled(int64_t id);
  // Every queued request whose client went away ends kTimedOut (asked every tick).
  void drop_cancelled();
  // Every queued and running request ends kFailed (the run ended on a fault).
  void fail_all(const std::string& reason);
  // A stop was asked: the job being torn down (a fault) or an operator's stop (drain).
  Status begin_stop();
  bool stop_asked() const;
  RequestRecord& record(int64_t id) { return records_[static_cast<size_t>(id - first_id_)]; }
  void trim_records();
  void publish(double rate_per_s);
  // Fills free slots from their unit's queue, up to b requests each (the batch rule above);
  // sets next_batch_due_s_.
  Status dispatch_ready();
  // Sends the requests `ids` (1..b, in arrival order) as one batch to slot `slot` of `unit`.
  Status dispatch(int unit, int slot, const std::vector<int64_t>& ids);
  // Ends the batch led by `lead` (its result came): every member's record and answer.
  Status answer_batch(const RunResult& result);
  size_t in_flight_requests() const;
  // Handles every result that is ready; `progress` is set when one was.
  Status poll_results(bool* progress);
  // Fails a request older than the node timeout; probes the unit of one close to it.
  Status check_timeouts();
  bool interrupted() const {
    return options_.interrupted != nullptr && options_.interrupted->load();
  }
  // A transport error after SIGTERM is the job being torn down: say which node died instead.
  Status checked(Status st);
  Status terminated();
  Status drain();
  void requeue_all();
  size_t queued() const;
  // Sleeps as planner_ says, waking at once on a new request; `next_event_s` as
  // PollPlanner::sleep_s.
  void idle_wait(double next_event_s);

  Transport& transport_;
  ControllerOptions options_;
  ServiceSampler* sampler_ = nullptr;
  std::vector<AnswerHook> answer_hooks_;
  std::function<void()> terminated_hook_;
  Configuration config_;
  bool configured_ = false;
  int generation_ = 0;
  int units_ = 0;
  std::shared_ptr<const std::vector<float>> generator_input_;
  RequestInbox inbox_;
  std::vector<std::deque<int64_t>> queues_;         // per unit: request ids
  std::vector<std::vector<int64_t>> slot_request_;  // per unit, per slot: batch lead id or -1
  std::vector<int> running_;                        // per unit: batches running
  // Per unit, per slot: when its last batch was answered (-1: none since the configuration) and
  // the idle time before its current busy period (ms; RequestRecord::slot_idle_ms).
  std::vector<std::vector<double>> slot_free_s_, slot_period_idle_ms_;
  std::map<int64_t, double> in_flight_;              // batch lead id -> dispatch time
  std::map<int64_t, std::vector<int64_t>> batches_;  // batch lead id -> its requests, in order
  std::set<int64_t> probed_;                         // in flight, their unit answered a probe
  std::map<int64_t, Pending> pending_;               // queued or running requests
  std::deque<RequestRecord> records_;
  int64_t first_id_ = 0;  // id of records_.front()
  int64_t next_id_ = 0;
  int64_t generated_open_ = 0;  // generated requests received and not ended
  size_t cancellable_ = 0;      // pending requests whose client may go away (drop_cancelled)
  OutcomeCounts counts_;
  double next_deadline_s_;   // earliest deadline among queued requests (+inf: none)
  double next_batch_due_s_;  // a slot waiting for a batch to fill dispatches then (+inf: none)
  bool draining_ = false;
  bool torn_down_ = false;  // the stop was mpirun tearing the job down
  std::atomic<bool> stop_requested_{false};
  std::vector<SwitchRecord> switches_;
  PollPlanner planner_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point epoch_;
  mutable std::mutex live_mutex_;
  LiveStatus live_;
};

// "2", "0.5": seconds for messages.
std::string seconds_text(double s);

// Poisson arrival times (seconds from 0) of `count` requests at `rate_per_s`.
std::vector<double> poisson_arrivals(double rate_per_s, int count, uint64_t seed);

// A load that changes over time: `steps` are (from_s, rate_per_s), ascending from 0, the last one
// lasting until `count` requests arrived. Gaps come from serf::ArrivalProcess (Poisson, or Gamma
// with `scv` for bursty traffic), time-changed through the rate steps.
struct RateStep {
  double from_s = 0;
  double rate_per_s = 0;
};
StatusOr<std::vector<double>> stepped_arrivals(const std::vector<RateStep>& steps, int count,
                                               uint64_t seed,
                                               ArrivalKind kind = ArrivalKind::kPoisson,
                                               double scv = 1.0);

}  // namespace serf::serve
