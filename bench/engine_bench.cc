// engine_bench: batch-1 latency of the CPU engine against PyTorch at the same thread count, in the
// same run, and the big fully connected layers' achieved bandwidth against a STREAM triad.
//   engine_bench [--root DIR] [--models a,b] [--threads 1,2] [--repeat n] [--no-torch]
// Goals (issue 3): engine <= 0.8x PyTorch; fully connected >= 80 % of triad bandwidth.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>

#include "bench_util.h"
#include "engine/backend.h"
#include "model/weights.h"

using namespace serf;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// "Big": a fully connected layer with at least 16 MiB of weights (far beyond the caches).
bool big_fc(const model::ModelPlan& plan, size_t i) {
  return plan.spec.layers[i].kind == model::LayerKind::kFullyConnected &&
         plan.layers[i].weight_bytes >= (int64_t{16} << 20);
}

bool has_big_fc(const model::ModelPlan& plan) {
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    if (big_fc(plan, i)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root = SERF_SOURCE_DIR;
  std::vector<std::string> models = {"cifar10", "imagenet1k", "imagenet22k"};
  std::vector<int> thread_counts = {1, 2};
  int repeat = 20;
  bool torch = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "engine_bench: error: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--root")
      root = next();
    else if (a == "--models")
      models = split(next());
    else if (a == "--threads") {
      thread_counts.clear();
      for (const auto& t : split(next())) thread_counts.push_back(std::atoi(t.c_str()));
    } else if (a == "--repeat")
      repeat = std::atoi(next().c_str());
    else if (a == "--no-torch")
      torch = false;
    else {
      std::cerr << "engine_bench: error: unknown argument " << a
                << " (use --root DIR --models a,b --threads 1,2 --repeat n --no-torch)\n";
      return 2;
    }
  }
  if (repeat < 1) {
    std::cerr << "engine_bench: error: --repeat must be at least 1\n";
    return 2;
  }
  for (int t : thread_counts) {
    if (t < 1) {
      std::cerr << "engine_bench: error: --threads values must be at least 1\n";
      return 2;
    }
  }
  auto backend = engine::make_backend("cpu");
  if (!backend.ok()) {
    std::cerr << "engine_bench: error: " << backend.status().message() << "\n";
    return 2;
  }

  std::printf("\n%-12s %2s %5s %10s %10s %7s %10s %10s %9s  %s\n", "model", "T", "runs", "serf_ms",
              "torch_ms", "ratio", "serf_min", "torch_min", "min_ratio", "goal: ratio <= 0.80");
  struct FcRow {
    std::string model, layer;
    int threads;
    double mb, ms, gbs, triad, ratio;
  };
  std::vector<FcRow> fc_rows;
  bench::Triad triad;
  for (const std::string& name : models) {
    const std::string spec = root + "/configs/models/" + name + ".json";
    auto plan = model::load_model(spec);
    if (!plan.ok()) {
      std::cerr << "engine_bench: error: " << plan.status().message() << "\n";
      return 2;
    }
    const double t_init = bench::now_ms();
    const model::Weights weights = model::Weights::seeded(*plan, 1);
    const double init_ms = bench::now_ms() - t_init;
    const std::vector<float> input = model::seeded_input(plan->spec.input, 1);
    std::vector<float> output(plan->output().elements());
    for (size_t k = 0; k < thread_counts.size(); ++k) {
      const int T = thread_counts[k];
      auto prepared = (*backend)->prepare(*plan, weights, engine::Partition{0, 1}, T);
      if (!prepared.ok()) {
        std::cerr << "engine_bench: error: " << prepared.status().message() << "\n";
        return 1;
      }
      auto slot = (*prepared)->new_slot();
      if (!slot.ok()) return 1;
      engine::LocalExchange local;
      engine::LayerTimings timings;
      timings.resize(plan->layers.size());
      for (int w = 0; w < 3; ++w) (*slot)->run(input.data(), output.data(), local, nullptr);
      std::vector<double> total;
      std::vector<std::vector<double>> layer_ms(plan->layers.size());
      // Whole-request latency without per-layer synchronisation ...
      for (int r = 0; r < repeat; ++r) {
        const double t0 = bench::now_ms();
        (*slot)->run(input.data(), output.data(), local, nullptr);
        total.push_back(bench::now_ms() - t0);
      }
      // ... and per-layer times in separate runs, each right after a triad with the same T: this
      // machine's load moves bandwidth by 2x within seconds, so each layer time is compared with
      // the bandwidth of its own moment and the ratios' median is reported.
      std::vector<double> triads;
      std::vector<std::vector<double>> layer_ratio(plan->layers.size());
      if (has_big_fc(*plan)) {
        for (int r = 0; r < repeat; ++r) {
          triads.push_back(triad.gb_per_s(T));
          (*slot)->run(input.data(), output.data(), local, &timings);
          for (size_t i = 0; i < layer_ms.size(); ++i) {
            layer_ms[i].push_back(timings.compute_ms[i]);
            if (big_fc(*plan, i)) {
              layer_ratio[i].push_back(plan->layers[i].weight_bytes /
                                       (timings.compute_ms[i] * 1e6) / triads.back());
            }
          }
        }
      }
      const double serf_ms = bench::median(total);
      const double serf_min = *std::min_element(total.begin(), total.end());
      const bench::TorchTimes torch_ms =
          torch ? bench::torch_times_ms(root, spec, T, repeat) : bench::TorchTimes{};
      if (torch_ms.median_ms > 0) {
        const double ratio = serf_ms / torch_ms.median_ms;
        std::printf("%-12s %2d %5d %10.3f %10.3f %7.2f %10.3f %10.3f %9.2f  %s\n", name.c_str(), T,
                    repeat, serf_ms, torch_ms.median_ms, ratio, serf_min, torch_ms.min_ms,
                    serf_min / torch_ms.min_ms, ratio <= 0.8 ? "met" : "NOT met");
      } else {
        std::printf("%-12s %2d %5d %10.3f %10s %7s %10.3f %10s %9s\n", name.c_str(), T, repeat,
                    serf_ms, "n/a", "n/a", serf_min, "n/a", "n/a");
      }
      std::fflush(stdout);
      for (size_t i = 0; i < plan->layers.size(); ++i) {
        const auto& info = plan->layers[i];
        if (!big_fc(*plan, i)) continue;
        const double ms = bench::median(layer_ms[i]);
        fc_rows.push_back({name, plan->spec.layers[i].name, T, info.weight_bytes / 1e6, ms,
                           info.weight_bytes / (ms * 1e6), bench::median(triads),
                           bench::median(layer_ratio[i])});
      }
    }
    std::fprintf(stderr, "(%s: seeded %.0f MB of weights in %.0f ms)\n", name.c_str(),
                 plan->weight_bytes / 1e6, init_ms);
  }
  std::printf(
      "\nbig fully connected layers: weight bytes / time; each run right after a STREAM triad "
      "(same T, 2 MiB pages), median of %d; goal >= 80 %% of triad\n", repeat);
  std::printf("%-12s %-6s %2s %10s %10s %8s %12s %8s\n", "model", "layer", "T", "weight_MB", "ms",
              "GB/s", "triad_GB/s", "%triad");
  for (const FcRow& r : fc_rows) {
    std::printf("%-12s %-6s %2d %10.1f %10.3f %8.2f %12.2f %7.0f%%\n", r.model.c_str(),
                r.layer.c_str(), r.threads, r.mb, r.ms, r.gbs, r.triad, 100.0 * r.ratio);
  }
  return 0;
}
