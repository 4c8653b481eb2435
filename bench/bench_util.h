#pragma once
// Small helpers shared by the engine benchmarks: medians, SCV, a STREAM-style triad, running the
// PyTorch reference.

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cpu/aligned_floats.h"
#include "serf/core/statistics.h"

namespace serf::bench {

using serf::median;  // the project's one definition (serf/core/statistics.h)

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// STREAM triad a = b + s*c over three arrays far larger than the caches, counted as STREAM does
// (3 arrays * 4 bytes per element). The arrays are the engine's AlignedFloats: 2 MiB pages like
// the weights they are compared with, so the reference is the faster of the two page sizes (on
// this machine the triad runs 6-30 % faster on 2 MiB pages than on 4 KiB ones). They are written
// once at construction (untouched pages all map the zero page and read impossibly fast) and kept,
// so each measurement can sit right next to the layer it is compared with.
class Triad {
 public:
  explicit Triad(int64_t elements = int64_t{32} << 20) : n_(elements), a_(n_), b_(n_), c_(n_) {
    std::fill(b_.data(), b_.data() + n_, 1.0f);
    std::fill(c_.data(), c_.data() + n_, 2.0f);
  }
  // GB/s with `threads` OpenMP threads, best of `trials` (STREAM's convention).
  double gb_per_s(int threads, int trials = 2) {
    float *pa = a_.data(), *pb = b_.data(), *pc = c_.data();
    const int64_t n = n_;
    double best = 0.0;
    for (int t = 0; t < trials; ++t) {
      const double t0 = now_ms();
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 3.0f * pc[i];
      best = std::max(best, 3.0 * 4.0 * n / ((now_ms() - t0) * 1e6));
    }
    if (pa[n / 2] != 7.0f) std::fprintf(stderr, "triad: wrong result\n");
    return best;
  }

 private:
  int64_t n_;
  engine::AlignedFloats a_, b_, c_;
};

struct TorchTimes {
  double median_ms = -1.0;  // negative: torch not available
  double min_ms = -1.0;
  double conv_median_ms = -1.0;  // the convolutions alone (separate runs)
  std::string mode;              // which PyTorch mode median_ms is: "eager" or "frozen"
  double eager_median_ms = -1.0;
  double frozen_median_ms = -1.0;  // traced + frozen + optimize_for_inference
};
// Latency of PyTorch for one batch of `batch` rows (scripts/torch_reference.py --bench).
// `mode`: best (eager and frozen, the faster counts) or frozen (no eager runs).
inline TorchTimes torch_times_ms(const std::string& root, const std::string& spec, int threads,
                                 int repeat, int batch = 1, const std::string& mode = "best") {
  const std::string cmd = "/usr/bin/python3 " + root + "/scripts/torch_reference.py " + spec +
                          " --bench --threads " + std::to_string(threads) + " --repeat " +
                          std::to_string(repeat) + " --batch " + std::to_string(batch) +
                          " --torch-mode " + mode + " 2>/dev/null";
  // The child inherits the calling thread's CPU mask, and the engine pins a team's OpenMP thread
  // 0 (the caller) to one core when the caller has exactly T cores (cpu_executable.cc pin_team):
  // after a T = 2 run PyTorch's 2 threads then shared one core. Every online core while it runs.
  cpu_set_t saved, every;
  const bool restore = sched_getaffinity(0, sizeof saved, &saved) == 0;
  CPU_ZERO(&every);
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(c, &every);
  sched_setaffinity(0, sizeof every, &every);  // best effort: placement only
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string text;
  int closed = -1;
  if (pipe != nullptr) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) text += buf;
    closed = pclose(pipe);
  }
  if (restore) sched_setaffinity(0, sizeof saved, &saved);
  if (closed != 0) return {};
  try {
    const auto doc = nlohmann::json::parse(text);
    return {doc.at("median_ms").get<double>(),  doc.at("min_ms").get<double>(),
            doc.value("conv_median_ms", -1.0),  doc.value("mode", std::string("eager")),
            doc.value("eager_median_ms", -1.0), doc.value("frozen_median_ms", -1.0)};
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace serf::bench
