#pragma once
// Small helpers shared by the engine benchmarks: medians, SCV, a STREAM-style triad, running the
// PyTorch reference.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace serf::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// STREAM triad a = b + s*c over arrays far larger than the caches, with `threads` OpenMP threads;
// best of `trials` (STREAM's convention), counted as STREAM does: 3 arrays * 4 bytes per element.
// The arrays are written first: untouched pages all map the zero page and read impossibly fast.
inline double triad_gb_per_s(int threads, int64_t elements = int64_t{64} << 20, int trials = 5) {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  auto alloc = [&] {
    return std::unique_ptr<float, Free>(static_cast<float*>(std::aligned_alloc(64, elements * 4)));
  };
  auto a = alloc(), b = alloc(), c = alloc();
  float *pa = a.get(), *pb = b.get(), *pc = c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < elements; ++i) {
    pa[i] = 0.0f;
    pb[i] = 1.0f;
    pc[i] = 2.0f;
  }
  double best = 0.0;
  for (int t = 0; t < trials; ++t) {
    const double t0 = now_ms();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < elements; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    const double ms = now_ms() - t0;
    best = std::max(best, 3.0 * 4.0 * elements / (ms * 1e6));
  }
  if (pa[elements / 2] != 7.0f) std::fprintf(stderr, "triad: wrong result\n");
  return best;
}

struct TorchTimes {
  double median_ms = -1.0;  // negative: torch not available
  double min_ms = -1.0;
};
// Batch-1 latency of PyTorch (scripts/torch_reference.py --bench).
inline TorchTimes torch_times_ms(const std::string& root, const std::string& spec, int threads,
                                 int repeat) {
  const std::string cmd = "/usr/bin/python3 " + root + "/scripts/torch_reference.py " + spec +
                          " --bench --threads " + std::to_string(threads) + " --repeat " +
                          std::to_string(repeat) + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string text;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) text += buf;
  if (pclose(pipe) != 0) return {};
  try {
    const auto doc = nlohmann::json::parse(text);
    return {doc.at("median_ms").get<double>(), doc.at("min_ms").get<double>()};
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace serf::bench
