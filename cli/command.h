#pragma once
// A subcommand: its CLI11 parser and the action run after a successful parse.
// Actions return a Status; main() prints an error as one line and maps it to the exit code.

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf::cli {

class CommandRegistry {
 public:
  // `app` is a subcommand (possibly nested) created by the caller; `run` is called when it was
  // parsed. `uses_mpi` (asked after parsing; none: never) says whether this run starts the MPI
  // runtime: under mpirun, only rank 0 runs a command that does not (main.cc).
  void add(CLI::App* app, std::function<Status()> run, std::function<bool()> uses_mpi = {}) {
    commands_.push_back({app, std::move(run), std::move(uses_mpi)});
  }

  // The deepest parsed subcommand's action, or nullptr.
  const std::function<Status()>* selected() const;
  // Whether the deepest parsed subcommand, with the flags given, starts the MPI runtime.
  bool selected_uses_mpi() const;

 private:
  struct Entry {
    CLI::App* app;
    std::function<Status()> run;
    std::function<bool()> uses_mpi;
  };
  const Entry* deepest_parsed() const;
  std::vector<Entry> commands_;
};

// Runs `run`, turning an exception into a Status: an allocation failure (std::bad_alloc, e.g.
// under `ulimit -v`) is exit 2 with one line saying so; anything else is internal (exit 1). Used
// by main() and, under mpirun, around every rank's work, so every rank reaches the agreement.
Status run_guarded(const std::function<Status()>& run);
// The Status of an allocation failure (exit 2), naming the process's memory limit when it has one.
Status out_of_memory();

// Each room's CLI file registers its subcommands here (see main.cc).
void register_queue_commands(CLI::App& app,
                             CommandRegistry& registry);  // predict plan size capacity
void register_engine_commands(CLI::App& app, CommandRegistry& registry);  // infer
void register_model_commands(CLI::App& app, CommandRegistry& registry);   // model info, model init
void register_mpi_commands(CLI::App& app, CommandRegistry& registry);     // serve profile (mpirun)
void register_sim_commands(CLI::App& app, CommandRegistry& registry);     // simulate
void register_validate_commands(CLI::App& app, CommandRegistry& registry);  // validate
void register_load_commands(CLI::App& app, CommandRegistry& registry);      // load

}  // namespace serf::cli
