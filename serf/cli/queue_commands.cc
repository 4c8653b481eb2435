// predict, plan, size, capacity: the queueing core's commands (issue: queueing core).
#include "serf/cli/command.h"

namespace serf::cli {

void register_queue_commands(CLI::App& app, CommandRegistry& registry) {}

}  // namespace serf::cli
