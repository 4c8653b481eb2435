#pragma once
// A subcommand: its CLI11 parser and the action run after a successful parse.
// Actions return a Status; main() prints an error as one line and maps it to the exit code.

#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serf/core/status.h"

namespace serf::cli {

class CommandRegistry {
 public:
  // `app` is a subcommand (possibly nested) created by the caller; `run` is called when it was
  // parsed.
  void add(CLI::App* app, std::function<Status()> run) {
    commands_.push_back({app, std::move(run)});
  }

  // The deepest parsed subcommand's action, or nullptr.
  const std::function<Status()>* selected() const;

 private:
  struct Entry {
    CLI::App* app;
    std::function<Status()> run;
  };
  std::vector<Entry> commands_;
};

// Seeds and other unsigned options: CLI11 would silently wrap "-1" to 2^64 - 1.
inline CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& v) {
        return !v.empty() && v[0] == '-' ? std::string("must be a non-negative integer")
                                         : std::string();
      },
      "UINT");
}

// A number in [lo, hi]. CLI::Range lets "nan" through (every comparison with NaN is false).
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        double x = 0;
        if (!CLI::detail::lexical_cast(v, x)) return std::string("must be a number");
        if (!std::isfinite(x) || x < lo || x > hi) {
          return v + " must be a finite number in [" + CLI::detail::to_string(lo) + ", " +
                 CLI::detail::to_string(hi) + "]";
        }
        return std::string();
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

// Each room's CLI file registers its subcommands here (see main.cc).
void register_queue_commands(CLI::App& app,
                             CommandRegistry& registry);  // predict plan size capacity
void register_engine_commands(CLI::App& app, CommandRegistry& registry);  // infer
void register_model_commands(CLI::App& app, CommandRegistry& registry);   // model info, model init
void register_mpi_commands(CLI::App& app, CommandRegistry& registry);     // serve profile (mpirun)
void register_sim_commands(CLI::App& app, CommandRegistry& registry);     // simulate
void register_validate_commands(CLI::App& app, CommandRegistry& registry);  // validate

}  // namespace serf::cli
