// batch_roofline: what batching buys, against the roofline (issue 16). Per model, T and batch b,
// the engine's median time for one batch of b (K = 1, one slot) beside the bound
//   max(weight bytes / triad bandwidth, b x FLOPs / FMA peak),
// both measured with the same T threads right before that b's runs (bench_util.h Triad,
// fma_peak.h), the ratio measured / bound, and the throughput gain over b = 1. --torch adds
// PyTorch's median for the same batch right after ours (scripts/torch_reference.py --bench
// --batch b, same T): the faster of its eager modules and its frozen optimize_for_inference graph
// (--torch-mode best, the default; the mode that won is printed), or the frozen graph alone
// (--torch-mode frozen: eager PyTorch took seconds per batch of 8 here).
// --resident times nothing: per model and b it prepares sizes 1..b as a serving node does
// (mpi/engine_worker.cc, K = 1, the first T) and prints the weight bytes they hold together (each
// shared tensor once) against the sum of their own bytes (one copy per size, what they held
// before tensors were shared across batch sizes).
//   batch_roofline [--models ranking_mlp,cifar10] [--batches 1,2,4,8,16,32] [--threads 1,2]
//                  [--repeat n] [--torch] [--torch-mode best|frozen] [--resident]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "engine/backend.h"
#include "fma_peak.h"
#include "model/weights.h"

using namespace serf;

namespace {

struct Options {
  std::vector<std::string> models = {"ranking_mlp", "cifar10"};
  std::vector<int> batches = {1, 2, 4, 8, 16, 32};
  std::vector<int> threads = {1, 2};
  int repeat = 10;
  bool torch = false;
  bool resident = false;
  std::string torch_mode = "best";
};

std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  for (std::string t; std::getline(ss, t, ',');) out.push_back(t);
  return out;
}

// A whole positive number, else 0 (which the checks in parse() refuse, naming the flag).
int positive(const std::string& t) {
  char* end = nullptr;
  const long n = std::strtol(t.c_str(), &end, 10);
  return (!t.empty() && *end == '\0' && n >= 1 && n <= 1 << 20) ? static_cast<int>(n) : 0;
}

std::vector<int> ints(const std::string& v) {
  std::vector<int> out;
  for (const std::string& t : split(v)) out.push_back(positive(t));
  return out;
}

constexpr const char* kUsage =
    "usage: batch_roofline [--models ranking_mlp,cifar10] [--batches 1,2,4,8,16,32] "
    "[--threads 1,2]\n"
    "                      [--repeat n] [--torch] [--torch-mode best|frozen] [--resident]\n"
    "Per model (configs/models/NAME.json), T and b: the median time of one batch of b against\n"
    "max(weight bytes / triad, b x FLOPs / FMA peak), both measured right before it.\n";

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (a == "--torch" || a == "--resident") {
      (a == "--torch" ? o->torch : o->resident) = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "batch_roofline: error: " << a << " needs a value\n";
      return false;
    }
    const std::string v = argv[++i];
    if (a == "--models") {
      o->models = split(v);
    } else if (a == "--batches") {
      o->batches = ints(v);
    } else if (a == "--threads") {
      o->threads = ints(v);
    } else if (a == "--repeat") {
      o->repeat = positive(v);
    } else if (a == "--torch-mode" && (v == "best" || v == "frozen")) {
      o->torch_mode = v;
    } else {
      std::cerr << "batch_roofline: error: unknown argument " << a
                << " (use --models --batches --threads --repeat --torch --torch-mode best|frozen "
                   "--resident)\n";
      return false;
    }
  }
  for (int b : o->batches) {
    if (b < 1)
      return std::cerr << "batch_roofline: error: --batches: each b a whole number >= 1\n", false;
  }
  for (int t : o->threads) {
    if (t < 1)
      return std::cerr << "batch_roofline: error: --threads: each T a whole number >= 1\n", false;
  }
  if (o->repeat < 1)
    return std::cerr << "batch_roofline: error: --repeat: a whole number >= 1\n", false;
  if (o->batches.empty() || o->threads.empty() || o->models.empty()) {
    return std::cerr << "batch_roofline: error: --models, --batches and --threads need one value "
                        "at least\n",
           false;
  }
  return true;
}

// Median ms of `repeat` runs of one batch of b (after two untimed runs).
StatusOr<double> batch_ms(engine::Backend& backend, const model::ModelPlan& plan,
                          const model::Weights& w, int threads, int b, int repeat) {
  SERF_ASSIGN_OR_RETURN(auto prepared, backend.prepare(plan, w, {0, 1}, threads, b));
  SERF_ASSIGN_OR_RETURN(auto slot, prepared->new_slot());
  std::vector<float> input;
  for (int r = 0; r < b; ++r) {
    const std::vector<float> x = model::seeded_input(plan.spec.input, 1 + static_cast<uint64_t>(r));
    input.insert(input.end(), x.begin(), x.end());
  }
  std::vector<float> out(static_cast<size_t>(plan.output().elements() * b));
  engine::LocalExchange local;
  std::vector<double> times;
  for (int r = 0; r < repeat + 2; ++r) {
    const double t0 = bench::now_ms();
    SERF_RETURN_IF_ERROR(slot->run(input.data(), out.data(), local, nullptr));
    if (r >= 2) times.push_back(bench::now_ms() - t0);
  }
  return bench::median(times);
}

// --resident: the weight bytes of a node's sizes 1..b, shared and as separate copies.
int resident_rows(const model::ModelPlan& plan, const model::Weights& w, const Options& o) {
  std::printf("T=%d %5s %12s %12s %7s %14s\n", o.threads[0], "b", "separate_MB", "resident_MB",
              "copies", "extra_layouts");
  for (int b : o.batches) {
    auto backend = engine::make_backend("cpu");
    if (!backend.ok()) return std::cerr << backend.status().message() << "\n", 1;
    std::vector<std::shared_ptr<engine::PreparedModel>> sizes;
    int64_t separate = 0;
    for (int n = 1; n <= b; ++n) {
      auto prepared = (*backend)->prepare(plan, w, {0, 1}, o.threads[0], n);
      if (!prepared.ok()) return std::cerr << prepared.status().message() << "\n", 1;
      separate += (*prepared)->resident_weight_bytes();
      sizes.push_back(std::move(*prepared));
    }
    const int64_t resident = (*backend)->resident_weight_bytes();
    std::printf("    %5d %12.1f %12.1f %7.2f %14d\n", b, separate / 1e6, resident / 1e6,
                static_cast<double>(resident) / static_cast<double>(plan.weight_bytes),
                (*backend)->weight_layouts_beyond_first());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  auto backend = engine::make_backend("cpu");
  if (!backend.ok()) return std::cerr << backend.status().message() << "\n", 1;
  bench::Triad triad;
  for (const std::string& name : o.models) {
    const std::string spec = std::string(SERF_SOURCE_DIR) + "/configs/models/" + name + ".json";
    auto plan = model::load_model(spec);
    if (!plan.ok()) return std::cerr << plan.status().message() << "\n", 2;
    const model::Weights w = model::Weights::seeded(*plan, 1);
    const double mb = static_cast<double>(plan->weight_bytes) / 1e6;
    const double gflop = 2.0 * static_cast<double>(plan->connections) / 1e9;
    std::printf("%s: %.1f MB of weights, %.3f GFLOP per request, median of %d runs per b\n",
                name.c_str(), mb, gflop, o.repeat);
    if (o.resident) {
      if (resident_rows(*plan, w, o) != 0) return 1;
      continue;
    }
    for (int t : o.threads) {
      std::printf("T=%d %5s %10s %8s %9s %9s %9s %7s %7s%s\n", t, "b", "batch_ms", "triad", "peak",
                  "bound_ms", "bound", "x_bound", "gain",
                  o.torch ? "  torch_ms   mode  vs_torch" : "");
      double one_ms = 0.0;
      for (int b : o.batches) {
        const double gbs = triad.gb_per_s(t);
        const double peak = bench::fma_peak_gflops(t);
        auto ms = batch_ms(**backend, *plan, w, t, b, o.repeat);
        if (!ms.ok()) return std::cerr << ms.status().message() << "\n", 1;
        const double memory_ms = mb / gbs, compute_ms = b * gflop / peak * 1e3;
        const double bound = std::max(memory_ms, compute_ms);
        if (b == 1) one_ms = *ms;
        const double gain = one_ms > 0.0 ? (b / *ms) / (1.0 / one_ms) : 0.0;
        std::printf("    %5d %10.3f %8.1f %9.1f %9.3f %9s %7.2f %7.2f", b, *ms, gbs, peak, bound,
                    memory_ms >= compute_ms ? "memory" : "compute", *ms / bound, gain);
        if (o.torch) {
          const bench::TorchTimes torch =
              bench::torch_times_ms(SERF_SOURCE_DIR, spec, t, o.repeat, b, o.torch_mode);
          if (torch.median_ms > 0) {
            std::printf("  %8.3f %6s  %8.2f", torch.median_ms, torch.mode.c_str(),
                        *ms / torch.median_ms);
          } else {
            std::printf("  %8s", "n/a");
          }
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
