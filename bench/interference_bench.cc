// interference_bench: the paper's premise on this machine. For each model, i = 1..4 requests run at
// once (i slots of one PreparedModel, each an Executable owned by its closed-loop caller thread, as
// a node's slot threads own theirs; T = 1 thread each); prints the mean service time and its
// squared coefficient of variation (SCV = variance / mean^2) per i.
//   interference_bench [--root DIR] [--models a,b] [--max-i n] [--requests n]
// --requests is per caller thread; imagenet22k uses a quarter of it (it takes ~0.1-0.5 s each).
#include <atomic>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench_util.h"
#include "engine/backend.h"
#include "model/weights.h"

using namespace serf;

int main(int argc, char** argv) {
  std::string root = SERF_SOURCE_DIR;
  std::vector<std::string> models = {"cifar10", "imagenet1k", "imagenet22k"};
  int max_i = 4, requests = 40;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--root")
      root = v;
    else if (a == "--max-i")
      max_i = std::atoi(v.c_str());
    else if (a == "--requests")
      requests = std::atoi(v.c_str());
    else if (a == "--models") {
      models.clear();
      std::stringstream ss(v);
      for (std::string m; std::getline(ss, m, ',');) models.push_back(m);
    } else {
      std::cerr << "interference_bench: error: unknown argument " << a
                << " (use --root DIR --models a,b --max-i n --requests n)\n";
      return 2;
    }
  }
  if (max_i < 1 || requests < 4) {
    std::cerr << "interference_bench: error: --max-i must be >= 1 and --requests >= 4\n";
    return 2;
  }
  auto backend = engine::make_backend("cpu");
  if (!backend.ok()) return 2;
  std::printf("%-12s %2s %2s %9s %12s %8s %10s\n", "model", "i", "T", "requests", "mean_ms", "scv",
              "vs_i=1");
  for (const std::string& name : models) {
    auto plan = model::load_model(root + "/configs/models/" + name + ".json");
    if (!plan.ok()) {
      std::cerr << "interference_bench: error: " << plan.status().message() << "\n";
      return 2;
    }
    const model::Weights weights = model::Weights::seeded(*plan, 1);
    auto prepared = (*backend)->prepare(*plan, weights, engine::Partition{0, 1}, 1);
    if (!prepared.ok()) return 1;
    const int per_thread = name == "imagenet22k" ? std::max(2, requests / 4) : requests;
    double base = 0.0;
    for (int i = 1; i <= max_i; ++i) {
      std::vector<std::unique_ptr<engine::Executable>> slots;
      for (int s = 0; s < i; ++s) {
        auto slot = (*prepared)->new_slot();
        if (!slot.ok()) return 1;
        slots.push_back(std::move(slot).value());
      }
      std::vector<std::vector<double>> ms(i);
      std::atomic<int> failures{0};
      std::vector<std::thread> callers;
      for (int t = 0; t < i; ++t) {
        callers.emplace_back([&, t] {
          const std::vector<float> input = model::seeded_input(plan->spec.input, 1 + t);
          std::vector<float> output(plan->output().elements());
          engine::LocalExchange local;
          Status status = slots[t]->run(input.data(), output.data(), local, nullptr);  // warm-up
          for (int r = 0; r < per_thread && status.ok(); ++r) {
            const double t0 = bench::now_ms();
            status = slots[t]->run(input.data(), output.data(), local, nullptr);
            ms[t].push_back(bench::now_ms() - t0);
          }
          if (!status.ok()) {
            std::fprintf(stderr, "interference_bench: %s\n", status.message().c_str());
            ++failures;
          }
        });
      }
      for (auto& c : callers) c.join();
      if (failures > 0) return 1;
      std::vector<double> all;
      for (const auto& v : ms) all.insert(all.end(), v.begin(), v.end());
      double mean = 0.0, var = 0.0;
      for (double x : all) mean += x;
      mean /= all.size();
      for (double x : all) var += (x - mean) * (x - mean);
      var /= all.size() - 1;
      if (i == 1) base = mean;
      std::printf("%-12s %2d %2d %9zu %12.3f %8.4f %9.2fx\n", name.c_str(), i, 1, all.size(), mean,
                  var / (mean * mean), mean / base);
      std::fflush(stdout);
    }
  }
  return 0;
}
