#include "cli/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/flags.h"

namespace serf::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[64];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The time left if the remaining steps take as long as the finished ones did on average.
std::string eta(double elapsed_s, size_t done, size_t total) {
  if (done == 0) return "?";
  return format_duration(elapsed_s / static_cast<double>(done) * static_cast<double>(total - done));
}

ProgressFn live_bar(const std::string& label) {
  const Clock::time_point start = Clock::now();
  return [label, start](size_t done, size_t total, const std::string& what) {
    const int width = 30;
    const int filled = total ? static_cast<int>(width * done / total) : width;
    const double elapsed = seconds_since(start);
    std::fprintf(stderr, "\r%s [%s%s] %zu/%zu %s ETA %s %-40s", label.c_str(),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), done, total,
                 format_duration(elapsed).c_str(), eta(elapsed, done, total).c_str(), what.c_str());
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

// A log a pipe can carry: the first call, then at most one line per `every_s`, and the end.
ProgressFn periodic_lines(const std::string& label, double every_s) {
  struct State {
    Clock::time_point start = Clock::now();
    double last_s = -1;  // when the last line was printed; < 0: none yet
  };
  auto state = std::make_shared<State>();
  return [label, every_s, state](size_t done, size_t total, const std::string& what) {
    const double elapsed = seconds_since(state->start);
    if (state->last_s >= 0 && done != total && elapsed - state->last_s < every_s) return;
    state->last_s = elapsed;
    const double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100;
    if (done == total) {
      std::fprintf(stderr, "%s: %zu/%zu (100%%) done, elapsed %s\n", label.c_str(), done, total,
                   format_duration(elapsed).c_str());
    } else {
      std::fprintf(stderr, "%s: %zu/%zu (%.0f%%), elapsed %s, ETA %s, now %s\n", label.c_str(),
                   done, total, pct, format_duration(elapsed).c_str(),
                   eta(elapsed, done, total).c_str(), what.c_str());
    }
    std::fflush(stderr);
  };
}

}  // namespace

void add_progress_flags(CLI::App* sub, ProgressOptions* options) {
  sub->add_flag("--quiet", options->quiet, "print no progress on stderr");
  sub->add_option("--progress-every", options->every_s,
                  "when stderr is not a terminal (under mpirun): seconds between two progress "
                  "lines (done/total, elapsed, ETA); on a terminal a live bar")
      ->check(finite_range(0, 86400));
}

ProgressFn make_progress(const std::string& label, const ProgressOptions& options) {
  if (options.quiet) return nullptr;
  if (isatty(fileno(stderr))) return live_bar(label);
  return periodic_lines(label, options.every_s);
}

}  // namespace serf::cli
