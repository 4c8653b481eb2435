#include "cli/runtime_launch.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <iterator>

#include "cli/command.h"
#include "serf/io/json_fields.h"
#include "serf/io/profile_io.h"

#ifdef SERF_HAVE_MPI
#include "mpi/engine_worker.h"
#include "mpi/fault_injection.h"
#include "mpi/runtime.h"
#endif

namespace serf::cli {

void add_runtime_flags(CLI::App* sub, RuntimeFlags* f, bool infer_flags) {
  if (infer_flags) {
    sub->add_option(
           "--node-timeout", f->node_timeout_s,
           "with --inter: seconds a node may take to answer before it is reported as hung (a dead "
           "node is reported when mpirun stops the job)")
        ->check(finite_range(0.01, 86400))
        ->needs("--inter");
    return;
  }
  auto* model = sub->add_option("--model", f->model, "model spec file (JSON): nodes compute it");
  auto* emulate = sub->add_option(
      "--emulate", f->emulate,
      "profile file (serf-profile/1): emulated nodes sleep the profiled service time of the "
      "running tuple (i, K, T) instead of computing");
  model->excludes(emulate);
  emulate->excludes(model);
  // Alone, each of these would be silently ignored: refused instead.
  sub->add_option("--weights", f->weights,
                  "with --model: weights (safetensors, F32); default: seeded from --seed")
      ->needs(model);
  sub->add_option("--backend", f->backend,
                  "with --model: backend of the nodes, cpu or cuda (default cpu)")
      ->needs(model);
  sub->add_flag(
         "--emulate-random", f->emulate_random,
         "with --emulate: emulated service times are Gamma draws with the tuple's mean and SCV "
         "(default: the mean)")
      ->needs(emulate);
  sub->add_option("--cores-per-node", f->cores_per_node,
                  "cores of one node, F (count); default with --emulate: the profile's")
      ->check(int_range(1, kMaxCoresPerNode));
  sub->add_option("--node-timeout", f->node_timeout_s,
                  "seconds a request or a switch may take before its node is reported as hung; "
                  "a hung node is named within this time (a dead node is reported when mpirun "
                  "stops the job, within about 2 s)")
      ->check(finite_range(0.01, 86400));
  add_seed(sub, &f->seed, "seed of arrivals and emulated draws (integer)");
  sub->add_flag("--no-pin", f->no_pin, "do not pin nodes sharing a machine to disjoint cores");
  sub->add_option("--idle-poll-us", f->idle_poll_us,
                  "longest sleep of an idle slot between polls for work, microseconds (at most 4 % "
                  "of the slot's last service time, at least 20 us): a "
                  "request waits up to this long to be picked up (default 200; raise it when "
                  "dozens of ranks share a few cores)")
      ->check(finite_range(1.0, 1e6));
  // Hidden: fault-handling tests make one rank hang or exit.
  sub->add_option("--test-fault-rank", f->fault_rank)->group("");
  sub->add_option("--test-fault-mode", f->fault_mode)
      ->group("")
      ->check(CLI::IsMember({"none", "hang", "exit", "hang-at-start"}));
  sub->add_option("--test-fault-after", f->fault_after)->group("");
  sub->add_option("--test-fault-from-config", f->fault_from_config)->group("");
  auto* phase = sub->add_option("--test-fault-phase", f->fault_phase)->group("");
#ifdef SERF_HAVE_MPI
  phase->check(CLI::IsMember(
      std::vector<std::string>(std::begin(mpi::kFaultPhases), std::end(mpi::kFaultPhases))));
#else
  (void)phase;
#endif
}

Status RuntimeSession::need_nodes() const {
  if (nodes >= 1) return Status::Ok();
  return InvalidArgument(
      "the runtime needs at least one node rank besides the controller: run "
      "mpirun -np N+1 build/bin/serf ... with N >= 1");
}

Status RuntimeSession::check_configuration(const Configuration& config,
                                           const std::string& flag) const {
  SERF_RETURN_IF_ERROR(need_nodes());
  Status valid = validate(config, shape());
  if (!valid.ok() && config.inter > nodes) {
    return InvalidArgument(flag + ": " + valid.message() + " (node ranks); start mpirun with -np " +
                           std::to_string(config.inter + 1) + " or more");
  }
  if (!valid.ok()) return valid.with_context(flag);
  if (max_inter_ > 0 && config.inter > max_inter_) {
    return InvalidArgument(flag + ": K = " + std::to_string(config.inter) +
                           " is more than the model can be split over (" +
                           std::to_string(max_inter_) + ", its narrowest layer)");
  }
  // Emulated nodes sleep the profiled time of (i, K, T) for every i <= c: found here, before the
  // first request, not at the switch to it.
  if (emulation) {
    auto tuples = emulation->tuples_for(config);
    if (!tuples.ok()) {
      return InvalidArgument(flag + ": the emulation profile cannot run " + to_string(config) +
                             ": " + tuples.status().message());
    }
  }
  return Status::Ok();
}

#ifndef SERF_HAVE_MPI

RuntimeOutcome launch_runtime(const RuntimeFlags&, const std::function<Status(RuntimeSession&)>&,
                              const std::function<Status()>&) {
  return {
      InvalidArgument("this serf was built without MPI (SERF_HAVE_MPI is OFF); install Open MPI "
                      "(scripts/setup) and rebuild to use the distributed runtime")};
}

Status end_runtime(const RuntimeOutcome& outcome) { return outcome.status; }

#else

namespace {

std::atomic<bool> g_terminated{false};
std::atomic<int> g_signal{0};  // the signal that set g_terminated (or g_stop)
// Where that signal came from and when (mpi::SignalOrigin): a SIGTERM, SIGINT or SIGHUP sent by
// mpirun (this process's parent) or by the terminal may be followed by mpirun's SIGKILL within a
// second; one that another process sent to this rank alone (kill PID), and SIGUSR1/SIGUSR2, by
// nothing: rank 0 then waits for every node's answer (MpiTransport::diagnose_terminated).
mpi::SignalOrigin g_origin;

void note_signal(int signal, const siginfo_t* info) {  // async-signal-safe calls only
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  g_origin.at_ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
  const bool from_launcher =
      info == nullptr || info->si_code != SI_USER || info->si_pid == getppid();
  g_origin.kill_follows =
      (signal == SIGTERM || signal == SIGINT || signal == SIGHUP) && from_launcher;
  g_signal = signal;
}
extern "C" void on_sigterm(int signal, siginfo_t* info, void*) {
  note_signal(signal, info);
  g_terminated = true;
}

// sigaction with the sender's pid (SA_SIGINFO); system calls restart, as std::signal's did.
void handle(int signal, void (*handler)(int, siginfo_t*, void*)) {
  struct sigaction action {};
  action.sa_sigaction = handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
}

// mpirun sends SIGTERM to every rank after one died (and when it is itself interrupted), SIGKILL
// 1 s later, and forwards SIGUSR1/SIGUSR2 to every rank; an operator may signal one process.
// Every rank handles these alike, so that none dies mute: rank 0 stops and writes what it
// measured, a node says farewell, and rank 0 names who got which signal and who is alive.
void install_terminate_handlers() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) handle(sig, on_sigterm);
}

// MPI lives until the process exits: MPI_Finalize waits for every rank, so no node can exit (and
// make mpirun kill the job) before rank 0 returned from main(), its error line printed.
std::unique_ptr<mpi::Environment> g_environment;

// serve: an operator's stop (SIGINT/SIGTERM to rank 0, SIGUSR1 forwarded by mpirun to every rank)
// drains: rank 0 takes no new requests, finishes the ones it has and stops the nodes. When mpirun
// sent it, or the nodes got the signal too and say farewell, mpirun is tearing the job down (it
// turns SIGINT and SIGTERM to itself into SIGTERM to every rank, and SIGKILL 1 s later: too short
// to drain), and rank 0 takes the path above instead (the controller's begin_stop()).
std::atomic<bool> g_stop{false};
extern "C" void on_stop(int signal, siginfo_t* info, void*) {
  note_signal(signal, info);
  g_stop = true;
}
void install_stop_handlers(bool controller) {
  if (controller) {
    for (int sig : {SIGINT, SIGTERM, SIGUSR1}) handle(sig, on_stop);
  } else {
    std::signal(SIGUSR1, SIG_IGN);  // forwarded by mpirun for rank 0; the nodes keep serving
  }
}

class MpiSession : public RuntimeSession {
 public:
  MpiSession(mpi::Environment& env, const RuntimeFlags& flags, double timeout_s)
      : env_(env), flags_(flags), timeout_s_(timeout_s) {}

  Status prepare() {
    rank = env_.rank();
    nodes = env_.size() - 1;
    if (flags_.emulate.empty() && flags_.model.empty()) {
      return InvalidArgument("give --model FILE (compute) or --emulate PROFILE (emulated nodes)");
    }
    if (!flags_.emulate.empty()) {
      SERF_ASSIGN_OR_RETURN(Profile p, io::load_profile(flags_.emulate));
      emulation = std::make_unique<Profile>(std::move(p));
      model_name = emulation->model;
      cores_per_node =
          flags_.cores_per_node > 0 ? flags_.cores_per_node : emulation->hardware.cores_per_node;
    } else {
      SERF_ASSIGN_OR_RETURN(engine_, mpi::EngineSlots::Create(flags_.model, flags_.backend,
                                                              flags_.weights, flags_.seed));
      SERF_ASSIGN_OR_RETURN(input, engine_->input(flags_.input, flags_.seed, flags_.input_rows));
      model_name = engine_->model_name();
      max_inter_ = engine_->max_inter();
      layer_names = engine_->layer_names();
      layer_types = engine_->layer_types();
      output_floats = engine_->output_floats();
      backend_name = engine_->backend_name();
      cores_per_node = flags_.cores_per_node;
      if (cores_per_node < 1)
        return InvalidArgument("--cores-per-node: give the cores of one node (>= 1)");
    }
    // F is bounded by the flag's validator, and an emulation profile's by its reader
    // (serf::validate(ClusterShape)): a huge F hangs the tuple enumeration.
    // A job without node ranks (no mpirun) is refused by need_nodes(), after the command's own
    // files: a bad --emulate, --table or --refresh run without mpirun is named, not the launch.
    return Status::Ok();
  }

  Status run_controller(const ControllerMain& main) override {
    SERF_RETURN_IF_ERROR(need_nodes());
    // Every rank checked the same flags and files; agree before starting, so a rank that failed
    // alone (an unreadable file on one machine) stops every rank instead of hanging them.
    SERF_RETURN_IF_ERROR(agree(Status::Ok()));
    // From here a peer may die or hang: a fault ends the job (launch_runtime).
    started = true;
    mpi::at_phase("comms");
    SERF_RETURN_IF_ERROR(env_.check_in("building the runtime's communicators", timeout_s_));
    SERF_ASSIGN_OR_RETURN(comms_, mpi::make_runtime_comms(timeout_s_));
    install_terminate_handlers();
    if (flags_.graceful_stop) install_stop_handlers(rank == 0);
    if (rank != 0) {
      // Rank 0 sends the first configuration at once; a node waits for it as for the verdict
      // (rank 1 first, so one line reports a dead or hung rank 0).
      const double first_s = mpi::node_bound_s(timeout_s_) + (rank == 1 ? 0.0 : 5.0);
      mpi::NodeOptions options{cores_per_node,
                               !flags_.no_pin && emulation == nullptr,
                               flags_.idle_poll_us * 1e-6,
                               &g_terminated,
                               &g_signal,
                               first_s};
      mpi::SlotWorkerFactory factory =
          emulation ? mpi::emulated_worker_factory() : engine_->factory();
      if (!emulation && !prepare_ahead.empty()) {
        options.prepare_ahead = [this](int node, int nodes) {
          return engine_->prepare_ahead(prepare_ahead, node, nodes, ahead_memory_bytes);
        };
      }
      // The hidden test hook: one rank's workers misbehave on purpose.
      return mpi::run_node(comms_, options, mpi::with_injected_fault(factory, fault_plan(), rank));
    }
    mpi::at_phase("configure");  // the hidden test hook: rank 0 stops before its first command
    mpi::MpiTransport transport(comms_, flags_.node_timeout_s, &g_terminated, &g_signal, &g_origin);
    serve::ControllerOptions options;
    options.cores_per_node = cores_per_node;
    options.node_timeout_s = flags_.node_timeout_s;
    options.seed = flags_.seed;
    options.interrupted = &g_terminated;
    if (flags_.graceful_stop) options.stop = &g_stop;
    // The generated requests' input: the first row (more rows only for infer --inter --batch).
    options.input.assign(
        input.begin(),
        input.begin() + static_cast<std::ptrdiff_t>(
                            input.size() / static_cast<size_t>(std::max(flags_.input_rows, 1))));
    serve::Controller controller(transport, options);
    std::unique_ptr<serve::ServiceSampler> sampler;
    if (emulation) {
      sampler = std::make_unique<serve::ServiceSampler>(*emulation, flags_.emulate_random,
                                                        flags_.seed + 7);
      controller.set_sampler(sampler.get());
    }
    transport_ = &transport;
    Status st = main(controller);
    if (st.ok()) st = controller.shutdown();
    transport_ = nullptr;
    return st;
  }

  std::string placement() const override { return transport_ ? transport_->placement() : ""; }

  // The start-up agreement (once per rank): every rank returns the same verdict. The nodes read
  // the same files as rank 0, more slowly when they share its cores: rank 0 waits for them the
  // node timeout plus twice its own time (an emulation profile: the node timeout; imagenet1k's
  // seeded weights on a loaded 2-core machine: about 9 s more).
  // A node computes the bound as rank 0 does, from its own reading time, and waits
  // mpi::node_bound_s of it for rank 0's verdict.
  Status agree(const Status& mine) {
    agreed = true;
    mpi::at_phase("agree");
    const double own_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
    Status verdict = env_.agree(mine, timeout_s_ + 2 * own_s, &complete);
    if (!complete) started = true;  // a rank is missing: only an abort ends it
    return verdict;
  }

  mpi::FaultPlan fault_plan() const {
    mpi::FaultPlan fault;
    fault.rank = flags_.fault_rank;
    fault.mode = flags_.fault_mode == "hang" ? mpi::FaultMode::kHang
                 : flags_.fault_mode == "exit" ? mpi::FaultMode::kExit
                 : flags_.fault_mode == "hang-at-start" ? mpi::FaultMode::kHangAtStart
                                                        : mpi::FaultMode::kNone;
    fault.after = flags_.fault_after;
    fault.from_configuration = flags_.fault_from_config;
    fault.phase = flags_.fault_phase;
    return fault;
  }

  bool started = false;  // the runtime started (or must be torn down like it had)
  bool agreed = false;   // this rank took part in the start-up agreement
  bool complete = true;  // every rank took part in it

 private:
  mpi::Environment& env_;
  const RuntimeFlags& flags_;
  double timeout_s_;  // the node timeout (valid even when the flag is not)
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  mpi::RuntimeComms comms_;
  std::unique_ptr<mpi::EngineSlots> engine_;
  mpi::MpiTransport* transport_ = nullptr;
};

}  // namespace

namespace {

// This rank's error line after what it printed, in one write(2): written in pieces, mpirun's
// abort banner (on the same stream) landed between "serf: error: " and the message once, and the
// line lost its prefix.
void write_error_line(int rank, const Status& status) {
  const std::string line =
      "serf: error: " + (rank == 0 ? std::string() : "rank " + std::to_string(rank) + ": ") +
      one_line(status.message()) + "\n";
  std::cout.flush();
  std::fflush(stdout);
  std::cerr.flush();
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

RuntimeOutcome launch_runtime(const RuntimeFlags& flags,
                              const std::function<Status(RuntimeSession&)>& body,
                              const std::function<Status()>& read_files) {
  // The bound of every wait on the other ranks; a bad flag is reported below, after the agreement.
  const double timeout_s = flags.node_timeout_s >= 0.01 && flags.node_timeout_s <= 86400
                               ? flags.node_timeout_s
                               : RuntimeFlags().node_timeout_s;
  // MPI_Init also waits for mpirun to start every rank, which takes seconds for dozens of ranks
  // on a loaded machine: a longer bound.
  StatusOr<std::unique_ptr<mpi::Environment> > created =
      mpi::Environment::Create(std::max(3 * timeout_s, 10.0));
  if (!created.ok()) return {created.status()};
  g_environment = std::move(created).value();
  mpi::Environment* env = g_environment.get();
  env->set_finish_bound_s(timeout_s);
  const int rank = env->rank();
  Status status;
  bool started = false;
  {
    auto session = std::make_unique<MpiSession>(*env, flags, timeout_s);
    mpi::arm_phase_fault(session->fault_plan(), rank);  // the hidden test hook (hang-at-start)
    // An exception (std::bad_alloc) becomes this rank's Status, so it still reaches the agreement.
    status = run_guarded([&] {
      if (read_files) SERF_RETURN_IF_ERROR(read_files());
      SERF_RETURN_IF_ERROR(session->prepare());
      return body(*session);
    });
    // Every rank takes part in the agreement once: in run_controller when its checks passed,
    // here when they failed.
    if (!session->agreed) status = session->agree(status);
    started = session->started;
    // Rank 0 never sent the verdict (dead or hung): rank 1 gives up first (Environment::agree)
    // and alone says so, so the user reads one line. The nodes exit (mpirun then ends the job)
    // instead of MPI_Abort, which leaves a process's last output for mpirun to forward. The
    // session is left as it is: the process ends at once, and its teardown could wait on rank 0.
    if (rank != 0 && !session->complete) {
      session.release();  // NOLINT(bugprone-unused-return-value): deliberately never torn down
      return {status, JobEnd::kExit, rank == 1};
    }
  }
  if (status.ok()) mpi::at_phase("finalize");
  // MPI_Finalize's own bound can only say that some rank hung: the nodes check in first, so rank
  // 0 names the missing one. Its results are out by then; it says so and exits, without
  // MPI_Finalize (which would wait for that rank) and without MPI_Abort: with a node stopped,
  // rank 0's MPI_Abort left the job running past 60 s in one CI run of three (mpirun's kill sends
  // the stopped rank a SIGCONT first).
  if (status.ok() && started) {
    Status in = env->check_in("MPI_Finalize after the nodes' bye", timeout_s);
    if (!in.ok()) return {std::move(in), JobEnd::kExit, true};
  }
  // The one way out when every rank agrees: the same Status on every rank.
  if (status.ok() || !started) return {status};
  // A fault after the start: a peer may be dead or hung (MPI_Finalize could block) and nodes
  // inside collectives cannot be told to stop.
  return {status, JobEnd::kAbortJob, true};
}

Status end_runtime(const RuntimeOutcome& outcome) {
  if (outcome.end == JobEnd::kFinalize) return outcome.status;
  const int rank = g_environment ? g_environment->rank() : 0;
  if (outcome.say) {
    write_error_line(rank, outcome.status);
  } else {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
  }
  if (outcome.end == JobEnd::kAbortJob && g_environment)
    g_environment->abort(outcome.status.exit_code());
  std::_Exit(outcome.status.exit_code());
}

#endif

}  // namespace serf::cli
