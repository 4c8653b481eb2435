#pragma once
// What serve, profile and `infer --inter` share: the runtime flags, MPI start-up on every rank, and
// the split into controller (rank 0) and nodes (ranks 1..N). Without MPI in the build, every
// runtime command says so and exits 2.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "serf/core/profile.h"
#include "serf/core/status.h"
#include "serve/calibration.h"
#include "serve/controller.h"

namespace serf::cli {

struct RuntimeFlags {
  std::string emulate;  // profile file: emulated nodes
  bool emulate_random = false;
  std::string model;  // model spec file: real nodes
  std::string backend = "cpu";
  std::string weights;     // safetensors; empty: seeded from --seed
  std::string input;       // safetensors; empty: seeded from --seed
  int input_rows = 1;      // rows of the session's input (serf infer --inter K --batch b)
  int cores_per_node = 0;  // F; 0: the emulation profile's
  double node_timeout_s = 10;
  uint64_t seed = 1;
  bool no_pin = false;
  double idle_poll_us = 200;  // longest sleep of an idle slot between polls
  // serve: SIGINT, SIGTERM (to rank 0) and SIGUSR1 (to mpirun, which forwards it) stop the
  // service gracefully; nodes ignore SIGUSR1.
  bool graceful_stop = false;
  // Hidden test hooks (fault handling tests).
  int fault_rank = -1;
  std::string fault_mode = "none";
  int fault_after = 0;
  int fault_from_config = 1;          // the node's configuration from which fault_after counts
  std::string fault_phase = "agree";  // hang-at-start: where (mpi::kFaultPhases)
};

// The files the runtime flags name (--emulate, --model, --weights, --input): no output may be one.
inline std::vector<InputFile> runtime_inputs(const RuntimeFlags& f) {
  return {{"--emulate", f.emulate},
          {"--model", f.model},
          {"--weights", f.weights},
          {"--input", f.input}};
}

// `infer_flags`: the command (`serf infer`) declares --model, --weights, --input, --seed and
// --backend itself.
void add_runtime_flags(CLI::App* sub, RuntimeFlags* flags, bool infer_flags = false);

class RuntimeSession;
using ControllerMain = std::function<Status(serve::Controller&)>;

// Per-command state on every rank. `run_controller` starts the runtime: rank 0 runs `main`, the
// other ranks serve until rank 0 shuts them down.
class RuntimeSession {
 public:
  virtual ~RuntimeSession() = default;
  int rank = 0;
  int nodes = 0;
  int cores_per_node = 1;
  std::string model_name;
  std::unique_ptr<Profile> emulation;  // when --emulate
  // Real nodes: layer names and types, output size, backend (for `infer --inter`).
  std::vector<std::string> layer_names, layer_types;
  int64_t output_floats = 0;
  // Real nodes: the request input of --input (safetensors), or seeded from --seed; input_rows
  // rows of it (RuntimeFlags::input_rows).
  std::vector<float> input;
  std::string backend_name;
  // The cluster the job runs: its node ranks and --cores-per-node.
  ClusterShape shape() const { return {nodes, cores_per_node}; }
  // InvalidArgument when the job has no node rank (serf started without mpirun). A command calls
  // it (check_configuration does) once its files and flags are read, before the first check that
  // needs the node count: a bad input file is then named without mpirun, not the launch.
  Status need_nodes() const;
  // need_nodes(), validate() (serf/core/configuration.h) against shape(), and K no more than the
  // model can be split over: InvalidArgument naming `flag`.
  Status check_configuration(const Configuration& config, const std::string& flag) const;
  virtual Status run_controller(const ControllerMain& main) = 0;
  int max_inter_ = 0;  // 0: no limit (emulated)
  // Real nodes: the configurations they prepare ahead, before the first (serve's table), and
  // hold for the run (mpi::EngineSlots::prepare_ahead); empty: each prepared at its switch.
  std::vector<Configuration> prepare_ahead;
  // What each node rank may hold ahead, bytes (serve --ahead-memory-mb); 0: MemAvailable alone.
  double ahead_memory_bytes = 0;
  // Where the nodes run: one line per node rank ("rank 1: pinned to cores 0-1").
  virtual std::string placement() const = 0;
};

// How a rank leaves the job after launch_runtime (end_runtime carries it out).
enum class JobEnd {
  // Every rank has the same Status (the start-up agreement's verdict on bad input, or the run's):
  // main() prints it on rank 0 only and exits with its code; MPI is finalised at that exit.
  kFinalize,
  // A peer is dead or hung, so MPI_Finalize (which waits for every rank) could block: this rank
  // prints its line when `say` and leaves at once with the Status's code; mpirun, seeing a rank
  // end before MPI_Finalize, ends the job. (A node when rank 0 never sent the verdict: rank 1
  // alone says so. Rank 0 when a node did not check in before MPI_Finalize: its results are out.)
  kExit,
  // A fault after the start (a node dead or hung): nodes inside collectives cannot be told to
  // stop, so this rank prints its line and MPI_Abort ends every process with the Status's code.
  kAbortJob,
};

struct RuntimeOutcome {
  Status status;
  JobEnd end = JobEnd::kFinalize;
  bool say = false;  // kExit: this rank prints the error line before it leaves
};

// Starts MPI, checks the flags on every rank, runs `body`, and returns this rank's Status and how
// it must leave the job (JobEnd); it never ends the process itself. `read_files`, when given,
// runs first on every rank, before the nodes' model and weights are loaded: the command's own
// input files are refused before that work (a bad --drift file waited for imagenet22k's weights).
[[nodiscard]] RuntimeOutcome launch_runtime(const RuntimeFlags& flags,
                                            const std::function<Status(RuntimeSession&)>& body,
                                            const std::function<Status()>& read_files = {});

// The caller's side of launch_runtime: returns the Status for kFinalize (main() reports it); for
// kExit and kAbortJob prints the line this rank owes and ends the process (or the job) with the
// Status's exit code, the exit codes docs/runtime.md lists.
Status end_runtime(const RuntimeOutcome& outcome);

void register_profile_command(CLI::App& app, CommandRegistry& registry);

}  // namespace serf::cli
