#pragma once
// Progress of a long command (serf profile, --exhaustive) on stderr, one module for all: on a
// terminal a live bar redrawn in place; otherwise (under mpirun rank 0's stderr is a pipe) a line
// every few seconds with done/total, elapsed time and the estimated time left; nothing when quiet.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <functional>
#include <string>

namespace serf::cli {

// Called with the steps done, the total and what runs now; done == total ends the display.
using ProgressFn = std::function<void(size_t done, size_t total, const std::string& what)>;

struct ProgressOptions {
  bool quiet = false;  // --quiet: no progress at all
  double every_s = 5;  // without a terminal: seconds between two lines
};

// --quiet and --progress-every SECONDS.
void add_progress_flags(CLI::App* sub, ProgressOptions* options);

// nullptr when quiet. `label` starts every line ("profile", "exhaustive").
ProgressFn make_progress(const std::string& label, const ProgressOptions& options);

// "1h02m", "3m05s", "12s": for elapsed and remaining times.
std::string format_duration(double seconds);

}  // namespace serf::cli
