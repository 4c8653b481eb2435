// interference_bench: the paper's premise on this machine. For each model, i = 1..4 requests run at
// once (i slots of one PreparedModel, each an Executable owned by its closed-loop caller thread, as
// a node's slot threads own theirs; T = 1 thread each); prints the mean service time and its
// squared coefficient of variation (SCV = variance / mean^2) per i.
//   interference_bench [--root DIR] [--models a,b] [--max-i n] [--requests n]
// --requests is per caller thread; imagenet22k uses a quarter of it (it takes ~0.1-0.5 s each).
#include <iostream>
#include <sstream>
#include <thread>

#include "bench_util.h"
#include "engine/backend.h"
#include "model/weights.h"

using namespace serf;

namespace {

struct Args {
  std::string root = SERF_SOURCE_DIR;
  std::vector<std::string> models = {"cifar10", "imagenet1k", "imagenet22k"};
  int max_i = 4, requests = 40;
};

// The flags; false (with the line printed) on a bad one.
bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--root") {
      a->root = v;
    } else if (flag == "--max-i") {
      a->max_i = std::atoi(v.c_str());
    } else if (flag == "--requests") {
      a->requests = std::atoi(v.c_str());
    } else if (flag == "--models") {
      a->models.clear();
      std::stringstream ss(v);
      for (std::string m; std::getline(ss, m, ',');) a->models.push_back(m);
    } else {
      std::cerr << "interference_bench: error: unknown argument " << flag
                << " (use --root DIR --models a,b --max-i n --requests n)\n";
      return false;
    }
  }
  if (a->max_i < 1 || a->requests < 4) {
    std::cerr << "interference_bench: error: --max-i must be >= 1 and --requests >= 4\n";
    return false;
  }
  return true;
}

// i closed-loop caller threads, each owning one slot, per_thread timed runs after a warm-up:
// every run's milliseconds, or an error.
StatusOr<std::vector<double>> run_concurrent(engine::PreparedModel& prepared,
                                             const model::ModelPlan& plan, int i, int per_thread) {
  std::vector<std::unique_ptr<engine::Executable>> slots;
  for (int s = 0; s < i; ++s) {
    SERF_ASSIGN_OR_RETURN(auto slot, prepared.new_slot());
    slots.push_back(std::move(slot));
  }
  std::vector<std::vector<double>> ms(i);
  std::vector<Status> status(i);
  std::vector<std::thread> callers;
  for (int t = 0; t < i; ++t) {
    callers.emplace_back([&, t] {
      const std::vector<float> input = model::seeded_input(plan.spec.input, 1 + t);
      std::vector<float> output(plan.output().elements());
      engine::LocalExchange local;
      status[t] = slots[t]->run(input.data(), output.data(), local, nullptr);  // warm-up
      for (int r = 0; r < per_thread && status[t].ok(); ++r) {
        const double t0 = bench::now_ms();
        status[t] = slots[t]->run(input.data(), output.data(), local, nullptr);
        ms[t].push_back(bench::now_ms() - t0);
      }
    });
  }
  for (auto& c : callers) c.join();
  std::vector<double> all;
  for (int t = 0; t < i; ++t) {
    SERF_RETURN_IF_ERROR(status[t]);
    all.insert(all.end(), ms[t].begin(), ms[t].end());
  }
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, &a)) return 2;
  auto backend = engine::make_backend("cpu");
  if (!backend.ok()) return 2;
  std::printf("%-12s %2s %2s %9s %12s %8s %10s\n", "model", "i", "T", "requests", "mean_ms", "scv",
              "vs_i=1");
  for (const std::string& name : a.models) {
    auto plan = model::load_model(a.root + "/configs/models/" + name + ".json");
    if (!plan.ok()) {
      std::cerr << "interference_bench: error: " << plan.status().message() << "\n";
      return 2;
    }
    const model::Weights weights = model::Weights::seeded(*plan, 1);
    auto prepared = (*backend)->prepare(*plan, weights, engine::Partition{0, 1}, 1);
    if (!prepared.ok()) return 1;
    const int per_thread = name == "imagenet22k" ? std::max(2, a.requests / 4) : a.requests;
    double base = 0.0;
    for (int i = 1; i <= a.max_i; ++i) {
      auto all = run_concurrent(**prepared, *plan, i, per_thread);
      if (!all.ok()) {
        std::fprintf(stderr, "interference_bench: %s\n", all.status().message().c_str());
        return 1;
      }
      double mean = 0.0, var = 0.0;
      for (double x : *all) mean += x;
      mean /= all->size();
      for (double x : *all) var += (x - mean) * (x - mean);
      var /= all->size() - 1;
      if (i == 1) base = mean;
      std::printf("%-12s %2d %2d %9zu %12.3f %8.4f %9.2fx\n", name.c_str(), i, 1, all->size(), mean,
                  var / (mean * mean), mean / base);
      std::fflush(stdout);
    }
  }
  return 0;
}
