// serf: one executable, subcommands per task. Parsing errors and user errors print one line on
// stderr and exit with 2 (3 where the question has no answer, e.g. an SLO no cluster meets).

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/command.h"

namespace serf::cli {

const std::function<Status()>* CommandRegistry::selected() const {
  const Entry* best = nullptr;
  int best_depth = -1;
  for (const Entry& e : commands_) {
    if (!e.app->parsed()) continue;
    int depth = 0;
    for (const CLI::App* p = e.app->get_parent(); p != nullptr; p = p->get_parent()) ++depth;
    if (depth > best_depth) {
      best = &e;
      best_depth = depth;
    }
  }
  return best ? &best->run : nullptr;
}

namespace {

// Under mpirun every rank parses the same flags: the launcher's rank variable lets one of them
// (rank 0) print a parse error, so the user reads it once. MPI is not started yet at parse time.
bool quiet_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::string(v) != "0";
  }
  return false;
}

}  // namespace

}  // namespace serf::cli

int main(int argc, char** argv) {
  CLI::App app{
      "SERF serves deep neural networks on clusters and predicts, with a queueing model, which\n"
      "parallelism configuration (c requests at once, K nodes per request, T threads per node)\n"
      "gives the lowest mean latency at each load. Run `serf SUBCOMMAND --help` for details."};
  app.name("serf");
  app.require_subcommand(1, 1);
  app.fallthrough(false);

  serf::cli::CommandRegistry registry;
  serf::cli::register_queue_commands(app, registry);
  serf::cli::register_engine_commands(app, registry);
  serf::cli::register_model_commands(app, registry);
  serf::cli::register_mpi_commands(app, registry);
  serf::cli::register_sim_commands(app, registry);
  serf::cli::register_validate_commands(app, registry);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!serf::cli::quiet_rank())
      std::cerr << "serf: error: " << e.what() << " (see serf --help)\n";
    return 2;
  }

  const auto* run = registry.selected();
  if (run == nullptr) {
    std::cerr << "serf: error: no subcommand given (see serf --help)\n";
    return 2;
  }
  serf::Status status;
  try {
    status = (*run)();
  } catch (const std::exception& e) {
    status = serf::Internal(e.what());
  }
  if (!status.ok()) {
    // Under mpirun every rank returns the same Status (launch_runtime agrees on it): rank 0 says
    // it.
    if (!serf::cli::quiet_rank()) std::cerr << "serf: error: " << status.message() << "\n";
    return status.exit_code();
  }
  return 0;
}
