// Seeded weight initialisation speed: Weights::seeded for each shipped model at T = 1 and 2 (and
// the machine's core count), median of n runs, as ms, ns per parameter and GB/s written, and the
// speedup over T = 1; alloc_ms is the median time to allocate and zero the same bytes (a
// std::vector<float>, as Tensor holds them): the floor under the seeded fill.
// Usage: bench_model_init [repeat] (default 5), from the repository root.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/weights.h"

int main(int argc, char** argv) {
  const int repeat = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::vector<int> threads = {1, 2};
  if (omp_get_num_procs() > 2) threads.push_back(omp_get_num_procs());
  std::printf("%-12s %12s %4s %10s %10s %8s %8s %9s\n", "model", "parameters", "T", "median_ms",
              "ns/param", "GB/s", "speedup", "alloc_ms");
  for (const char* name : {"cifar10", "imagenet1k", "imagenet22k"}) {
    auto plan = serf::model::load_model(std::string("configs/models/") + name + ".json");
    if (!plan.ok()) {
      std::fprintf(stderr, "bench_model_init: %s (run from the repository root)\n",
                   plan.status().message().c_str());
      return 2;
    }
    std::vector<double> alloc;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<float> v(static_cast<size_t>(plan->parameters));
      alloc.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      if (v[v.size() / 2] != 0.0f) return 1;
    }
    std::sort(alloc.begin(), alloc.end());
    const double alloc_ms = alloc[alloc.size() / 2];
    double base_ms = 0;
    for (int t : threads) {
      omp_set_num_threads(t);
      std::vector<double> ms;
      for (int r = 0; r < repeat; ++r) {
        const auto start = std::chrono::steady_clock::now();
        const auto w = serf::model::Weights::seeded(*plan, static_cast<uint64_t>(r));
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
        if (w.bytes() != plan->weight_bytes) return 1;
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      if (t == 1) base_ms = median;
      std::printf("%-12s %12lld %4d %10.1f %10.2f %8.2f %8.2f %9.1f\n", name,
                  static_cast<long long>(plan->parameters), t, median,
                  median * 1e6 / static_cast<double>(plan->parameters),
                  static_cast<double>(plan->weight_bytes) / (median * 1e6), base_ms / median,
                  alloc_ms);
    }
  }
  return 0;
}
