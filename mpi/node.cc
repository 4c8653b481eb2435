// Ranks 1..N: the node side of the runtime (slot threads, reconfiguration, fault hooks).
#include <mpi.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi/environment.h"
#include "mpi/fault_injection.h"
#include "mpi/runtime.h"

namespace serf::mpi {

namespace {

using Clock = std::chrono::steady_clock;

// Control-plane waits (configure, ping, results sent back): rare, so polling every 2 ms at most
// costs nothing. A slot waiting for its next request polls as idle_poll_after (mpi/runtime.h) says.
const WaitPolicy kIdle{0, nullptr, 2e-3};
// Waits inside a request (input broadcast, all-gather): short sleeps keep the exchange fast.
const WaitPolicy kBusy{0, nullptr, 100e-6};

class EmulatedWorker : public SlotWorker {
 public:
  explicit EmulatedWorker(const Communicator* comm) : comm_(comm) {}
  Status serve(const RunAction& action, const std::vector<float>&, SlotOutput*) override {
    if (action.emulated_ms <= 0) {
      return InvalidArgument("emulated node got a request without a service time");
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(action.emulated_ms));
    return comm_->barrier(kBusy);
  }

 private:
  const Communicator* comm_;
};

struct NodeShared {
  int world_rank = 0;
  std::vector<int> cores;  // the node's cores when it is pinned (see pin_slot)
  WaitPolicy slot_idle{0, nullptr, 2e-3};
};

struct SlotState {
  Communicator comm;
  std::unique_ptr<SlotWorker> worker;
  std::thread thread;
  Status status;
  int slot = 0;
  int intra = 1;
};

// Pins the calling slot thread (and the OpenMP threads it starts later, which inherit its mask) to
// the slot's T cores of a pinned node, counted from the node's last core: a request computing
// alone (slot 0) then runs where it runs in a one-slot configuration, an idle slot's polling stays
// on its own cores, and the first core, where the launcher puts rank 0 (the controller), is the
// last one a slot gets.
void pin_slot(const SlotState& st, const std::vector<int>& cores) {
  const size_t end = static_cast<size_t>(st.slot + 1) * static_cast<size_t>(st.intra);
  if (cores.empty() || end > cores.size()) return;
  const size_t first = cores.size() - end, last = first + static_cast<size_t>(st.intra);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  for (size_t c = first; c < last; ++c) CPU_SET(cores[c], &mine);
  pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine);  // best effort: placement only
}

void slot_loop(SlotState* st, const RuntimeComms* comms, NodeShared* shared) {
  pin_slot(*st, shared->cores);
  const bool leader = st->comm.rank() == 0;
  std::vector<float> input;
  SlotOutput output;
  WaitPolicy idle = shared->slot_idle;
  for (;;) {
    RunAction action;
    if (leader) {
      st->status = comms->work.recv(&action, 0, st->slot, idle);
      if (!st->status.ok()) return;
      if (action.payload_floats > 0) {
        input.resize(static_cast<size_t>(action.payload_floats));
        st->status =
            comms->work.recv_bytes(input.data(), input.size() * sizeof(float), 0, st->slot, kBusy);
        if (!st->status.ok()) return;
      }
    }
    st->status = st->comm.bcast_bytes(&action, sizeof(action), 0, idle);
    if (!st->status.ok() || action.kind == ActionKind::kStop) return;
    input.resize(static_cast<size_t>(std::max(action.payload_floats, 0)));
    if (!input.empty()) {
      st->status = st->comm.bcast_bytes(input.data(), input.size() * sizeof(float), 0, kBusy);
      if (!st->status.ok()) return;
    }
    const auto started = Clock::now();
    output.values.clear();
    output.layers.clear();
    Status served = st->worker->serve(action, input, &output);
    const auto finished = Clock::now();
    // Short sleeps only on cores of its own: ranks sharing cores would take them from each other.
    if (!shared->cores.empty()) {
      idle.max_sleep_s = idle_poll_after(shared->slot_idle.max_sleep_s,
                                         std::chrono::duration<double>(finished - started).count());
    }
    if (!leader) continue;
    RunResult result;
    result.request_id = action.request_id;
    result.slot = st->slot;
    result.leader_rank = shared->world_rank;
    result.ok = served.ok() ? 1 : 0;
    if (!served.ok()) result.set_message(served.message());
    result.service_ms = std::chrono::duration<double, std::milli>(finished - started).count();
    result.payload_floats = static_cast<int32_t>(output.values.size());
    result.timed_layers = static_cast<int32_t>(output.layers.size());
    st->status = comms->work.send(result, 0, kResultTag, kIdle);
    if (st->status.ok() && !output.values.empty()) {
      st->status =
          comms->work.send_bytes(output.values.data(), output.values.size() * sizeof(float), 0,
                                 kResultPayloadTag + st->slot, kIdle);
    }
    if (st->status.ok() && !output.layers.empty()) {
      st->status =
          comms->work.send_bytes(output.layers.data(), output.layers.size() * sizeof(LayerTiming),
                                 0, kResultPayloadTag + st->slot, kIdle);
    }
    if (!st->status.ok()) return;
  }
}

// A node's watcher thread: answers the controller's pings and watches the SIGTERM flag. A thread
// of its own, because the main and slot threads may be inside a collective: a node waiting in
// MPI_Comm_split for a hung peer still answers, so the controller names the hung one alone.
// mpirun sends SIGTERM to every rank once one died; a live node answers with a farewell so the
// controller can name the silent (dead) one, then dies of the signal.
class NodeWatch {
 public:
  NodeWatch(const NodeOptions& options, const Communicator& control, int rank) {
    thread_ = std::thread([this, options, &control, rank] { watch(options, control, rank); });
  }
  ~NodeWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

 private:
  void watch(const NodeOptions& options, const Communicator& control, int rank) {
    ControlMessage ping;
    Communicator::PendingRecv inbox;
    bool posted = inbox.post(control, &ping, sizeof(ping), 0, kPingTag).ok();
    while (!stop_) {
      if (options.terminated != nullptr && options.terminated->load()) {
        farewell(control, rank, options.signal != nullptr ? options.signal->load() : 0);
      }
      int from = -1;
      if (posted) {
        auto done = inbox.test(&from);
        if (done.ok() && *done) {
          NodeReply pong;
          pong.kind = ReplyKind::kPong;
          pong.rank = rank;
          pong.generation = ping.generation;
          (void)control.send(pong, 0, kReplyTag, WaitPolicy{1.0});
          posted = inbox.post(control, &ping, sizeof(ping), 0, kPingTag).ok();
          continue;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    inbox.cancel();
  }

  [[noreturn]] static void farewell(const Communicator& control, int rank, int signal) {
    NodeReply r;
    r.kind = ReplyKind::kFarewell;
    r.rank = rank;
    r.set_message(signal_name(signal));
    (void)control.send(r, 0, kReplyTag, WaitPolicy{0.3});
    // Stay until mpirun's SIGKILL (1 s after its SIGTERM), or rank 0's MPI_Abort when this node
    // alone got the signal (rank 0 names it 1.5-1.8 s after, later on a loaded machine): measured
    // with Open MPI 4.1, a node that exits earlier makes mpirun kill rank 0 at once, before it
    // wrote and reported. The bound only matters when rank 0 is itself dead or hung.
    std::this_thread::sleep_for(std::chrono::seconds(15));
    const int sig = signal > 0 ? signal : SIGTERM;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    std::_Exit(128 + sig);
  }

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::string signal_name(int signal) {
  switch (signal) {
    case 0:
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "signal " + std::to_string(signal);
  }
}

SlotWorkerFactory emulated_worker_factory() {
  return [](const SlotContext& ctx) -> StatusOr<std::unique_ptr<SlotWorker>> {
    return std::unique_ptr<SlotWorker>(new EmulatedWorker(ctx.comm));
  };
}

StatusOr<RuntimeComms> make_runtime_comms(double timeout_s) {
  RuntimeComms comms;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // Rank 0 names a rank that does not come; a node gives up only after it would have.
  const WaitPolicy wait{world_rank == 0 ? timeout_s : node_bound_s(timeout_s)};
  const std::string hung = "a rank did not join the runtime's communicators within " +
                           serve::seconds_text(wait.timeout_s) + " s (dead or hung node)";
  auto control = Communicator::world(wait);
  if (!control.ok()) return Unavailable(hung);
  comms.control = std::move(control).value();
  auto work = Communicator::world(wait);
  if (!work.ok()) return Unavailable(hung);
  comms.work = std::move(work).value();
  return comms;
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  size_t pos = 0;
  auto number = [&](int* value) {  // digits at pos
    if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos]))) return false;
    long v = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) &&
           v < CPU_SETSIZE)
      v = v * 10 + (text[pos++] - '0');
    *value = static_cast<int>(v);
    return v < CPU_SETSIZE;
  };
  for (;;) {
    int first = 0, last = 0;
    if (!number(&first)) return {};
    last = first;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      if (!number(&last) || last < first) return {};
    }
    for (int c = first; c <= last; ++c) cpus.push_back(c);
    if (pos < text.size() && text[pos] == ',') {
      ++pos;
      continue;
    }
    break;
  }
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos == text.size() ? cpus : std::vector<int>{};
}

namespace {

std::vector<int> cpus_of(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The CPUs this job may use on the machine, whatever the launcher bound this rank to: the
// cgroup's cpuset where there is one, else the online CPUs.
std::vector<int> machine_cpus() {
  for (const char* path :
       {"/sys/fs/cgroup/cpuset.cpus.effective", "/sys/devices/system/cpu/online"}) {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line)) {
      std::vector<int> cpus = parse_cpu_list(line);
      if (!cpus.empty()) return cpus;
    }
  }
  return {};
}

}  // namespace

NodePlacement pin_node_to_cores(int index, int count, int cores_per_node) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
    return NodePlacement{{}, "not pinned: sched_getaffinity failed"};
  std::vector<int> cores = cpus_of(allowed);
  const long need = static_cast<long>(count) * cores_per_node;
  std::string widened;
  if (need > static_cast<long>(cores.size())) {
    // mpirun binds each rank to one core when it starts 2 or fewer: a node of F cores would run
    // its F threads (or c slots) on one. SERF owns the placement of its nodes, so it takes them
    // from the machine instead of the launcher's share.
    std::vector<int> machine = machine_cpus();
    if (need > static_cast<long>(machine.size())) {
      return NodePlacement{{},
                           "not pinned: " + std::to_string(count) + " nodes x " +
                               std::to_string(cores_per_node) + " cores > " +
                               std::to_string(std::max(cores.size(), machine.size())) +
                               " cores on this machine (nodes share cores)"};
    }
    widened = " (the launcher had bound this rank to " + std::to_string(cores.size()) + " core" +
              (cores.size() == 1 ? "" : "s") + "; mpirun --bind-to none leaves placement to SERF)";
    cores = std::move(machine);
  }
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const size_t first = static_cast<size_t>(index) * static_cast<size_t>(cores_per_node);
  for (size_t c = first; c < first + static_cast<size_t>(cores_per_node); ++c)
    CPU_SET(cores[c], &mine);
  if (sched_setaffinity(0, sizeof(mine), &mine) != 0)
    return NodePlacement{{}, "not pinned: sched_setaffinity failed"};
  cpu_set_t got;
  CPU_ZERO(&got);
  if (sched_getaffinity(0, sizeof(got), &got) != 0 || CPU_COUNT(&got) != cores_per_node) {
    sched_setaffinity(0, sizeof(allowed), &allowed);
    return NodePlacement{
        {},
        "not pinned: the machine refused cores " + std::to_string(cores[first]) + "-" +
            std::to_string(cores[first + static_cast<size_t>(cores_per_node) - 1])};
  }
  NodePlacement placed;
  placed.cores.assign(
      cores.begin() + static_cast<long>(first),
      cores.begin() + static_cast<long>(first + static_cast<size_t>(cores_per_node)));
  placed.line = "pinned to cores " + std::to_string(placed.cores.front()) + "-" +
                std::to_string(placed.cores.back()) + widened;
  return placed;
}

namespace {

// Pins this node beside the other nodes of its machine (a collective of the nodes); the line for
// the ready reply.
StatusOr<std::string> place_node(const Communicator& nodes, const NodeOptions& options,
                                 NodeShared* shared) {
  if (!options.pin) return std::string("not pinned (--no-pin)");
  at_phase("pin");
  SERF_ASSIGN_OR_RETURN(Communicator local, nodes.split_shared());
  NodePlacement placed = pin_node_to_cores(local.rank(), local.size(), options.cores_per_node);
  shared->cores = std::move(placed.cores);
  return placed.line;
}

// A configuration's unit (collective over the nodes) and this node's c slots in it, each with its
// communicator and worker (none when the node is in no unit). A worker that cannot be made is
// `*failure`; its slot is kept, so the communicators stay consistent with the other nodes.
Status make_slots(const Communicator& nodes, const Configuration& config, bool first,
                  const SlotWorkerFactory& factory, Communicator* unit,
                  std::vector<std::unique_ptr<SlotState>>* slots, std::string* failure,
                  Preparation* preparation) {
  const int node = nodes.rank();
  const int units = nodes.size() / config.inter;
  const int my_unit = node / config.inter < units ? node / config.inter : -1;
  SERF_ASSIGN_OR_RETURN(*unit, nodes.split(my_unit, node));
  if (first) at_phase("slots");
  if (!unit->valid()) return Status::Ok();
  for (int s = 0; s < config.service; ++s) {
    auto st = std::make_unique<SlotState>();
    st->slot = s;
    st->intra = config.intra;
    SERF_ASSIGN_OR_RETURN(st->comm, unit->dup());
    SlotContext ctx{&st->comm, config, s, my_unit, preparation};
    auto worker = factory(ctx);
    if (!worker.ok() && failure->empty()) *failure = worker.status().message();
    if (worker.ok()) st->worker = std::move(worker).value();
    slots->push_back(std::move(st));
  }
  return Status::Ok();
}

}  // namespace

double idle_poll_after(double max_sleep_s, double last_service_s) {
  constexpr double kPickupShare = 0.04, kMinSleepS = 20e-6;
  if (!(last_service_s > 0)) return max_sleep_s;
  return std::clamp(kPickupShare * last_service_s, std::min(kMinSleepS, max_sleep_s), max_sleep_s);
}

Status run_node(const RuntimeComms& comms, const NodeOptions& options,
                const SlotWorkerFactory& factory) {
  NodeShared shared;
  shared.world_rank = comms.control.rank();
  shared.slot_idle.max_sleep_s = options.slot_idle_poll_s;
  // The watcher first: every collective of the nodes below (their group, the placement, units
  // and slots) waits for every node, and one that hangs there must not silence the others'
  // pings, or rank 0 names them all (it did while they waited in the group's creation).
  NodeWatch watch(options, comms.control, shared.world_rank);
  // The nodes' communicator is made by the nodes alone: rank 0 does not wait in it.
  at_phase("nodes");
  SERF_ASSIGN_OR_RETURN(const Communicator nodes, comms.control.tail_group(1, 0));
  SERF_ASSIGN_OR_RETURN(std::string placement, place_node(nodes, options, &shared));
  if (options.prepare_ahead) placement += "; " + options.prepare_ahead(nodes.rank(), nodes.size());

  std::vector<std::unique_ptr<SlotState>> slots;
  Communicator unit;
  auto reply = [&](ReplyKind kind, int generation, const std::string& message,
                   Preparation preparation = Preparation::kUnknown) {
    NodeReply r;
    r.kind = kind;
    r.rank = shared.world_rank;
    r.generation = generation;
    r.preparation = preparation;
    r.set_message(message);
    return comms.control.send(r, 0, kReplyTag, kIdle);
  };
  for (bool first = true;; first = false) {
    ControlMessage msg;
    const WaitPolicy wait{first ? options.first_command_s : 0, nullptr, kIdle.max_sleep_s};
    if (!comms.control.recv(&msg, 0, kControlTag, wait).ok()) {
      return Unavailable("rank 0 did not send the first configuration within " +
                         serve::seconds_text(wait.timeout_s) +
                         " s of the runtime's start: rank 0 is dead or hung");
    }
    if (first) at_phase("configure");
    // Configure or shut down: the controller has already sent every slot a stop action.
    std::string failure;
    for (auto& st : slots) {
      st->thread.join();
      if (!st->status.ok() && failure.empty()) failure = st->status.message();
    }
    slots.clear();
    unit = Communicator();
    if (msg.kind == ControlKind::kShutdown) {
      at_phase("bye");
      return reply(ReplyKind::kBye, msg.generation, failure);
    }
    const Configuration config{msg.service, msg.inter, msg.intra, std::max(msg.batch, 1)};
    Preparation preparation = Preparation::kUnknown;
    SERF_RETURN_IF_ERROR(
        make_slots(nodes, config, first, factory, &unit, &slots, &failure, &preparation));
    if (!failure.empty()) {
      // Keep the slot communicators consistent with the other nodes but do not serve: the
      // controller aborts the job on an error reply.
      SERF_RETURN_IF_ERROR(reply(ReplyKind::kError, msg.generation, failure));
      slots.clear();
      continue;
    }
    for (auto& st : slots) st->thread = std::thread(slot_loop, st.get(), &comms, &shared);
    if (first) at_phase("ready");
    SERF_RETURN_IF_ERROR(reply(ReplyKind::kReady, msg.generation, placement, preparation));
  }
}

}  // namespace serf::mpi
