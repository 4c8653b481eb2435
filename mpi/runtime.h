#pragma once
// The distributed runtime under mpirun: rank 0 is the controller (Controller over MpiTransport),
// ranks 1..N are nodes (run_node). A configuration (c, K, T) cuts the nodes into floor(N/K) units
// of K consecutive ranks; each unit has c slots, each slot a thread with its own duplicated
// communicator, so concurrent requests never mix messages. mpi.h stays inside mpi/*.cc.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mpi/communicator.h"
#include "mpi/environment.h"
#include "serf/core/profile.h"
#include "serve/controller.h"
#include "serve/messages.h"

namespace serf::mpi {

// The node side speaks serve's contract (serve/messages.h) and implements its Transport.
using serve::ActionKind;
using serve::ControlKind;
using serve::ControlMessage;
using serve::kControlTag;
using serve::kMaxSlots;
using serve::kPingTag;
using serve::kReplyTag;
using serve::kResultPayloadTag;
using serve::kResultTag;
using serve::LayerTiming;
using serve::NodeReply;
using serve::Preparation;
using serve::ReplyKind;
using serve::RunAction;
using serve::RunResult;
using serve::Transport;

// What the leader of a unit returns for one request.
struct SlotOutput {
  std::vector<float> values;        // the output tensor (empty for emulated nodes)
  std::vector<LayerTiming> layers;  // per-layer times (real nodes)
};

// What a slot of one node computes. serve() runs on every node of the unit at once, with the
// same action and input; the leader's `out` is returned to the controller.
class SlotWorker {
 public:
  virtual ~SlotWorker() = default;
  virtual Status serve(const RunAction& action, const std::vector<float>& input,
                       SlotOutput* out) = 0;
};

struct SlotContext {
  const Communicator* comm = nullptr;  // the slot's communicator (K ranks, unit order)
  Configuration config;
  int slot = 0;
  int unit = 0;
  // Out (null: not asked): the factory raises it to what it did for the slot's kernels (held,
  // warm or cold; serve/messages.h), which the node's ready reply carries.
  Preparation* preparation = nullptr;
};

// Builds the worker of one slot when a configuration is applied (engine Executables are rebuilt).
using SlotWorkerFactory = std::function<StatusOr<std::unique_ptr<SlotWorker>>(const SlotContext&)>;

// Emulated node: sleeps action.emulated_ms, then meets the unit's other nodes (a barrier, standing
// in for the last layer's all-gather).
SlotWorkerFactory emulated_worker_factory();

// Communicators every rank creates together at start (collective over MPI_COMM_WORLD).
struct RuntimeComms {
  Communicator control;  // controller <-> every node: configure, ping, shutdown
  Communicator work;     // controller <-> unit leaders: actions and results
};
// `timeout_s` (> 0) bounds rank 0's wait for the others.
StatusOr<RuntimeComms> make_runtime_comms(double timeout_s = 0);

// An idle slot's longest sleep between polls after a request that took `last_service_s` on it,
// on a node pinned to cores of its own (NodeOptions::pin; else always the maximum):
// NodeOptions::slot_idle_poll_s (`max_sleep_s`), but at most 4 % of that service time and never
// below 20 us (nor above the maximum). A request that finds the slot idle waits up to one sleep,
// plus its overshoot, before it is picked up: a closed-loop profile never sees that delay, an
// open-loop arrival at light load pays it every time. At 200 us it added 0.07-0.17 ms to a
// 0.5 ms model at 300 requests/s (cifar10, c = 1 and 2: 13-28 % of its service,
// docs/validation.md); a model of 5 ms or more keeps the full sleep and the CPU it saves. Before
// the slot's first request: the maximum.
double idle_poll_after(double max_sleep_s, double last_service_s);

struct NodeOptions {
  int cores_per_node = 1;  // F
  bool pin = true;         // pin nodes sharing a machine to disjoint cores when there are enough
  // Longest sleep between polls of an idle slot: the delay a request may wait before its unit
  // picks it up (half of it on average), which the queue model does not see. Small on dedicated
  // cores; larger when dozens of emulated ranks share a few cores.
  double slot_idle_poll_s = 200e-6;  // at most: see idle_poll_after() above
  // Set by a SIGTERM handler: the node tells the controller it is alive (kFarewell), then dies of
  // the signal. mpirun sends SIGTERM to every rank after one died, so the silent one is the dead.
  const std::atomic<bool>* terminated = nullptr;
  // The signal that set `terminated` (named in the farewell; null or 0: SIGTERM).
  const std::atomic<int>* signal = nullptr;
  // > 0: the longest wait for rank 0's first command (it comes right after the communicators);
  // past it rank 0 is dead or hung, and run_node says so. Later commands may be hours apart.
  double first_command_s = 0;
  // Real nodes serving a table: prepares ahead the configurations known at the start (node
  // `node` of `nodes`), after the placement and before the first configuration, while the
  // watcher answers pings; returns a line the ready replies carry beside the placement.
  std::function<std::string(int node, int nodes)> prepare_ahead = nullptr;
};

// "SIGTERM", "SIGINT"...; "signal N" for others; 0 is SIGTERM (the usual one).
std::string signal_name(int signal);

// Ranks 1..N: applies configurations and serves requests until the controller shuts it down.
Status run_node(const RuntimeComms& comms, const NodeOptions& options,
                const SlotWorkerFactory& factory);

// Where a node runs: its cores (empty when it is not pinned) and a line saying what was done.
struct NodePlacement {
  std::vector<int> cores;
  std::string line;
};

// Pins this process to cores [index*F, (index+1)*F) of its allowed set when `count` nodes of F
// cores fit, else of the machine's CPUs (cgroup cpuset or online list) when they fit there: the
// launcher may have bound the rank to fewer cores than F. Slot s of a configuration (c, K, T)
// then pins its thread to T of these cores, slot 0 to the last T.
NodePlacement pin_node_to_cores(int index, int count, int cores_per_node);

// CPUs of a Linux cpulist such as "0-3,8,10-11"; empty when it is malformed.
std::vector<int> parse_cpu_list(const std::string& text);

// What rank 0's signal handler noted about the signal that stopped it (cli/runtime_launch.cc).
struct SignalOrigin {
  // mpirun's SIGKILL may follow it within a second: mpirun (or the terminal) sent a SIGTERM,
  // SIGINT or SIGHUP, its teardown. Not so for a signal another process sent to rank 0 alone, nor
  // for SIGUSR1/SIGUSR2 (mpirun forwards them to every rank and kills no one).
  std::atomic<bool> kill_follows{true};
  std::atomic<int64_t> at_ns{0};  // when it came: CLOCK_MONOTONIC (steady_clock's), 0: unknown
};

class MpiTransport : public Transport {
 public:
  // `terminated` (set by a SIGTERM handler) cancels every wait; `signal` is the signal that set
  // it, for the messages; `origin` where it came from and when (null: unknown, maybe mpirun's).
  MpiTransport(const RuntimeComms& comms, double timeout_s,
               const std::atomic<bool>* terminated = nullptr,
               const std::atomic<int>* signal = nullptr, const SignalOrigin* origin = nullptr);
  ~MpiTransport() override;
  int nodes() const override { return nodes_; }
  Status configure(const Configuration& config) override;
  Status send_run(int unit, const RunAction& action, const std::vector<float>& input) override;
  StatusOr<std::optional<RunResult>> poll_result() override;
  std::vector<float> take_output() override { return std::move(last_output_); }
  std::vector<LayerTiming> take_layer_timings() override { return std::move(last_layers_); }
  // True at once when mpirun sent rank 0's signal (its teardown); else listens for the nodes'
  // farewells (they got the signal too) for up to `window_s`.
  bool job_torn_down(double window_s) override;
  Status probe(int unit, double within_s) override;
  Status shutdown() override;
  // Collects the nodes' farewells and pongs: the node ranks that send neither died. Until 0.5 s
  // after the signal when mpirun's SIGKILL may follow, else up to the node timeout.
  std::string diagnose_terminated() override;
  // One line per configure: where the nodes were pinned.
  const std::string& placement() const { return placement_; }
  Preparation last_preparation() const override { return preparation_; }

 private:
  int leader_rank(int unit) const { return 1 + unit * config_.inter; }
  // One bound shared by a sequence of waits.
  class Deadline {
   public:
    explicit Deadline(double seconds);
    double left_s() const;
    double seconds() const { return seconds_; }

   private:
    double seconds_;
    std::chrono::steady_clock::time_point end_;
  };
  WaitPolicy wait(double timeout_s) const { return WaitPolicy{timeout_s, terminated_}; }
  // A send that must complete by `deadline`; its error names the rank that did not take it.
  Status send_within(const void* data, size_t bytes, int rank, int tag, const Deadline& deadline,
                     const Communicator& comm);
  Status stop_slots(const Deadline& deadline);
  // Stops the slots, sends `msg` to every node and collects one `reply` from each: a silent node
  // is named within `timeout_s`, live ones that are slow get up to `cap_s`.
  Status command_all(ControlMessage msg, ReplyKind reply, double timeout_s, double cap_s,
                     std::vector<NodeReply>* replies);
  // Collects one reply of `kind` from every rank in `ranks` until `deadline`; on a timeout the
  // ranks that did not reply are in `*missing`. A node's error reply is InvalidArgument.
  Status collect_replies(const std::vector<int>& ranks, ReplyKind kind, const Deadline& deadline,
                         std::vector<NodeReply>* replies, std::vector<int>* missing);
  // After a signal: pings every node and listens for pongs and farewells (the latter into
  // farewells_); the node ranks that answered the ping.
  std::set<int> hear_nodes();
  // Pings `ranks` (their watcher threads); the ones that did not answer by `deadline`, ascending.
  std::vector<int> silent_ranks(const std::vector<int>& ranks, const Deadline& deadline);

  const RuntimeComms& comms_;
  int nodes_;
  double timeout_s_;
  // Rank 0 got a signal: one that tears it down (terminated_), or serve's stop (signal_ alone).
  bool signalled() const {
    return (terminated_ != nullptr && terminated_->load()) ||
           (signal_ != nullptr && signal_->load() != 0);
  }
  // Records a node's farewell; one that comes while rank 0 got no signal is early.
  void note_farewell(const NodeReply& reply);
  // Replies nobody waits for (farewells, late pongs) are taken off the queue as results are
  // polled; a node that said farewell kLoneSignalS ago while rank 0 got no signal was signalled
  // alone (not by mpirun tearing the job down, which signals every rank): an error naming it.
  Status check_lone_signals();
  static constexpr double kLoneSignalS = 1.5;

  const std::atomic<bool>* terminated_;
  const std::atomic<int>* signal_;
  const SignalOrigin* origin_;
  bool kill_follows() const { return origin_ == nullptr || origin_->kill_follows.load(); }
  std::set<int> farewells_;  // node ranks that said farewell (got a signal, alive)
  // Farewells that came while rank 0 had no signal: rank -> (when on rank 0's clock, signal).
  std::map<int, std::pair<std::chrono::steady_clock::time_point, std::string>> early_farewells_;
  std::string terminated_text_;  // diagnose_terminated()'s line, once made
  bool configured_ = false;
  bool shut_down_ = false;
  Configuration config_;
  int generation_ = 0;       // of commands, echoed by the nodes' replies
  int ping_generation_ = 0;  // of pings, echoed by the pongs
  RunResult inbox_;
  Communicator::PendingRecv pending_;
  std::vector<float> last_output_;
  std::vector<LayerTiming> last_layers_;  // the payload of the last result, until taken
  std::string placement_;
  Preparation preparation_ = Preparation::kUnknown;
};

}  // namespace serf::mpi
