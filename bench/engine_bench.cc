// engine_bench: batch-1 latency of the CPU engine against PyTorch at the same thread count, in the
// same run; the big fully connected layers' bandwidth against a STREAM triad; every convolution's
// GFLOP/s against this core's FP32 peak measured with an FMA loop in the same run; every layer's
// time summed by class (conv by kernel/stride/grouping, other layers by kind). PyTorch's time is
// the faster of its eager modules and its frozen optimize_for_inference graph (both printed).
//   engine_bench [--root DIR] [--models a,b] [--threads 1,2] [--repeat n] [--no-torch]
//                [--conv-layers all|none|zoo] [--torch-mode best|frozen]
// Goals (issues 3 and 15): engine <= 0.8x PyTorch; fully connected >= 80 % of triad bandwidth.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>

#include "bench_util.h"
#include "engine/backend.h"
#include "fma_peak.h"
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

struct Options {
  std::string root = SERF_SOURCE_DIR;
  std::vector<std::string> models = {"cifar10",  "imagenet1k", "imagenet22k",
                                     "resnet50", "vgg16",      "mobilenet_v2"};
  std::vector<int> threads = {1, 2};
  int repeat = 20;
  bool torch = true;
  std::string conv_layers = "zoo";  // per-layer conv rows: all, none, zoo (the imported models)
  std::string torch_mode = "best";  // best: eager and frozen; frozen: skips the eager runs
};

struct FcRow {
  std::string model, layer;
  int threads;
  double mb, ms, gbs, triad, ratio;
};

struct ConvRow {
  std::string model, layer, cls;
  int threads;
  double gmac, ms, gflops, peak;
};

struct ConvSummary {
  std::string model;
  int threads;
  int layers;
  double gmac, serf_ms, torch_ms, peak;
  std::vector<double> percents;  // per layer, of peak
};

// Layers grouped by what runs them: convolutions by kernel, stride and grouping ("conv1x1",
// "conv3x3/s2", "dwconv3x3"), other layers by kind.
struct ClassRow {
  std::string model, cls;
  int threads;
  int layers = 0, fused = 0;
  double gmac = 0.0, ms = 0.0, total_ms = 0.0, peak = 0.0;
};

std::string layer_class(const model::ModelPlan& plan, size_t i) {
  const model::LayerSpec& l = plan.spec.layers[i];
  if (l.kind != model::LayerKind::kConv2d) return model::to_string(l.kind);
  const model::Window& w = l.window;
  std::string c = l.groups == 1                            ? "conv"
                  : l.groups == plan.layers[i].in.channels ? "dwconv"
                                                           : "gconv";
  c += std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w);
  if (w.stride_h > 1 || w.stride_w > 1)
    c += "/s" + std::to_string(std::max(w.stride_h, w.stride_w));
  return c;
}

// One (model, T): whole requests, then per-layer runs; appends to the tables.
struct Measured {
  std::vector<double> total_ms;
  std::vector<std::vector<double>> layer_ms;
  std::vector<double> triads;
  std::vector<std::vector<double>> fc_ratio;
};

StatusOr<Measured> measure(engine::Backend& backend, const model::ModelPlan& plan,
                           const model::Weights& weights, const std::vector<float>& input, int T,
                           int repeat, bench::Triad& triad) {
  SERF_ASSIGN_OR_RETURN(auto prepared, backend.prepare(plan, weights, engine::Partition{0, 1}, T));
  SERF_ASSIGN_OR_RETURN(auto slot, prepared->new_slot());
  std::vector<float> output(static_cast<size_t>(plan.output().elements()));
  engine::LocalExchange local;
  engine::LayerTimings timings;
  timings.resize(plan.layers.size());
  for (int w = 0; w < 3; ++w)
    SERF_RETURN_IF_ERROR(slot->run(input.data(), output.data(), local, nullptr));
  Measured m;
  // Whole-request latency without per-layer clocks ...
  for (int r = 0; r < repeat; ++r) {
    const double t0 = bench::now_ms();
    SERF_RETURN_IF_ERROR(slot->run(input.data(), output.data(), local, nullptr));
    m.total_ms.push_back(bench::now_ms() - t0);
  }
  // ... and per-layer times in separate runs; with big fully connected layers each run right
  // after a triad with the same T (this machine's bandwidth moves 2x within seconds).
  m.layer_ms.resize(plan.layers.size());
  m.fc_ratio.resize(plan.layers.size());
  const bool fc = has_big_fc(plan);
  for (int r = 0; r < repeat; ++r) {
    if (fc) m.triads.push_back(triad.gb_per_s(T));
    SERF_RETURN_IF_ERROR(slot->run(input.data(), output.data(), local, &timings));
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      m.layer_ms[i].push_back(timings.compute_ms[i]);
      if (fc && big_fc(plan, i)) {
        m.fc_ratio[i].push_back(plan.layers[i].weight_bytes / (timings.compute_ms[i] * 1e6) /
                                m.triads.back());
      }
    }
  }
  return m;
}

void add_conv_rows(const std::string& name, const model::ModelPlan& plan, const Measured& m, int T,
                   double peak, double torch_conv_ms, std::vector<ConvRow>* rows,
                   std::vector<ConvSummary>* summaries) {
  ConvSummary s{name, T, 0, 0.0, 0.0, torch_conv_ms, peak, {}};
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    if (plan.spec.layers[i].kind != model::LayerKind::kConv2d) continue;
    const double ms = bench::median(m.layer_ms[i]);
    const double gmac = plan.layers[i].connections / 1e9;
    const double gflops = ms > 0 ? 2.0 * gmac / (ms / 1e3) : 0.0;
    rows->push_back(
        {name, plan.spec.layers[i].name, layer_class(plan, i), T, gmac, ms, gflops, peak});
    ++s.layers;
    s.gmac += gmac;
    s.serf_ms += ms;
    s.percents.push_back(100.0 * gflops / peak);
  }
  if (s.layers > 0) summaries->push_back(std::move(s));
}

void add_class_rows(const std::string& name, const model::ModelPlan& plan, const Measured& m, int T,
                    double peak, std::vector<ClassRow>* rows) {
  const size_t first = rows->size();
  double total = 0.0;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const std::string cls = layer_class(plan, i);
    auto it = std::find_if(rows->begin() + static_cast<std::ptrdiff_t>(first), rows->end(),
                           [&](const ClassRow& r) { return r.cls == cls; });
    if (it == rows->end()) {
      rows->push_back({name, cls, T});
      it = rows->end() - 1;
    }
    const double ms = bench::median(m.layer_ms[i]);
    ++it->layers;
    if (ms == 0.0) ++it->fused;
    it->ms += ms;
    it->gmac += plan.layers[i].connections / 1e9;
    it->peak = peak;
    total += ms;
  }
  for (size_t r = first; r < rows->size(); ++r) (*rows)[r].total_ms = total;
}

void print_class_table(const std::vector<ClassRow>& rows, int repeat) {
  std::printf(
      "\ntime by layer class: sum of per-layer medians (%d runs), share of all layers' sum; "
      "GFLOP/s and %%peak for layers with multiply-adds (fused: layers run inside the one "
      "before)\n%-12s %2s %-14s %6s %5s %9s %6s %9s %7s\n",
      repeat, "model", "T", "class", "layers", "fused", "ms", "share", "GFLOP/s", "%peak");
  for (const ClassRow& r : rows) {
    const double gflops = r.ms > 0 ? 2.0 * r.gmac / (r.ms / 1e3) : 0.0;
    std::printf("%-12s %2d %-14s %6d %5d %9.3f %5.1f%%", r.model.c_str(), r.threads, r.cls.c_str(),
                r.layers, r.fused, r.ms, 100.0 * r.ms / r.total_ms);
    if (r.gmac > 0 && r.ms > 0) {
      std::printf(" %9.1f %6.0f%%\n", gflops, 100.0 * gflops / r.peak);
    } else {
      std::printf(" %9s %7s\n", "", "");
    }
  }
}

void print_conv_tables(const std::vector<ConvSummary>& summaries, const std::vector<ConvRow>& rows,
                       const Options& o, int repeat) {
  std::printf(
      "\nconvolutions: sum of per-layer medians (%d runs) against this core's FP32 peak, "
      "measured by an FMA loop with the same T right before; torch_conv_ms: PyTorch's "
      "Conv2d layers alone\n",
      repeat);
  std::printf("%-12s %2s %6s %9s %10s %13s %10s %9s %7s  %s\n", "model", "T", "convs", "GMAC",
              "serf_ms", "torch_conv_ms", "conv_ratio", "GFLOP/s", "%peak",
              "per-layer %peak min/median/max");
  for (const ConvSummary& s : summaries) {
    const double gflops = 2.0 * s.gmac / (s.serf_ms / 1e3);
    std::vector<double> p = s.percents;
    std::sort(p.begin(), p.end());
    char torch_cols[64];
    if (s.torch_ms > 0) {
      std::snprintf(torch_cols, sizeof torch_cols, "%13.3f %10.2f", s.torch_ms,
                    s.serf_ms / s.torch_ms);
    } else {
      std::snprintf(torch_cols, sizeof torch_cols, "%13s %10s", "n/a", "n/a");
    }
    std::printf("%-12s %2d %6d %9.3f %10.3f %s %9.1f %6.0f%%  %.0f/%.0f/%.0f %% of %.1f GFLOP/s\n",
                s.model.c_str(), s.threads, s.layers, s.gmac, s.serf_ms, torch_cols, gflops,
                100.0 * gflops / s.peak, p.front(), bench::median(p), p.back(), s.peak);
  }
  if (o.conv_layers == "none") return;
  std::printf("\nper convolution (median of %d runs)\n%-12s %-28s %-12s %2s %9s %9s %9s %7s\n",
              repeat, "model", "layer", "class", "T", "MMAC", "ms", "GFLOP/s", "%peak");
  for (const ConvRow& r : rows) {
    const bool zoo = r.model == "resnet50" || r.model == "vgg16" || r.model == "mobilenet_v2";
    if (o.conv_layers == "zoo" && !zoo) continue;
    std::printf("%-12s %-28s %-12s %2d %9.2f %9.4f %9.1f %6.0f%%\n", r.model.c_str(),
                r.layer.c_str(), r.cls.c_str(), r.threads, r.gmac * 1e3, r.ms, r.gflops,
                100.0 * r.gflops / r.peak);
  }
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "engine_bench: error: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--root") {
      o->root = next();
    } else if (a == "--models") {
      o->models = split(next());
    } else if (a == "--threads") {
      o->threads.clear();
      for (const auto& t : split(next())) o->threads.push_back(std::atoi(t.c_str()));
    } else if (a == "--repeat") {
      o->repeat = std::atoi(next().c_str());
    } else if (a == "--no-torch") {
      o->torch = false;
    } else if (a == "--conv-layers") {
      o->conv_layers = next();
    } else if (a == "--torch-mode") {
      o->torch_mode = next();
    } else {
      std::cerr << "engine_bench: error: unknown argument " << a
                << " (use --root DIR --models a,b --threads 1,2 --repeat n --no-torch "
                   "--conv-layers all|none|zoo --torch-mode best|frozen)\n";
      return false;
    }
  }
  if (o->repeat < 1) {
    std::cerr << "engine_bench: error: --repeat must be at least 1\n";
    return false;
  }
  for (int t : o->threads) {
    if (t < 1) {
      std::cerr << "engine_bench: error: --threads values must be at least 1\n";
      return false;
    }
  }
  if (o->torch_mode != "best" && o->torch_mode != "frozen") {
    std::cerr << "engine_bench: error: --torch-mode must be best or frozen\n";
    return false;
  }
  if (o->conv_layers != "all" && o->conv_layers != "none" && o->conv_layers != "zoo") {
    std::cerr << "engine_bench: error: --conv-layers must be all, none or zoo\n";
    return false;
  }
  return true;
}

void print_latency(const std::string& name, int T, int repeat, const std::vector<double>& total,
                   const bench::TorchTimes& torch_ms) {
  const double serf_ms = bench::median(total);
  const double serf_min = *std::min_element(total.begin(), total.end());
  if (torch_ms.median_ms > 0) {
    const double ratio = serf_ms / torch_ms.median_ms;
    char eager[32] = "n/a";  // --torch-mode frozen: no eager runs
    if (torch_ms.eager_median_ms > 0) {
      std::snprintf(eager, sizeof eager, "%.3f", torch_ms.eager_median_ms);
    }
    std::printf("%-12s %2d %5d %10.3f %10.3f %7.2f %10.3f %10.3f %9.2f  %-8s %-7s %10s %10.3f\n",
                name.c_str(), T, repeat, serf_ms, torch_ms.median_ms, ratio, serf_min,
                torch_ms.min_ms, serf_min / torch_ms.min_ms, ratio <= 0.8 ? "met" : "NOT met",
                torch_ms.mode.c_str(), eager, torch_ms.frozen_median_ms);
  } else {
    std::printf("%-12s %2d %5d %10.3f %10s %7s %10.3f %10s %9s\n", name.c_str(), T, repeat, serf_ms,
                "n/a", "n/a", serf_min, "n/a", "n/a");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  auto backend = engine::make_backend("cpu");
  if (!backend.ok()) {
    std::cerr << "engine_bench: error: " << backend.status().message() << "\n";
    return 2;
  }
  std::printf("\n%-12s %2s %5s %10s %10s %7s %10s %10s %9s  %-8s %-7s %10s %10s\n", "model", "T",
              "runs", "serf_ms", "torch_ms", "ratio", "serf_min", "torch_min", "min_ratio",
              "goal<=.8", "torch", "eager_ms", "frozen_ms");
  std::vector<FcRow> fc_rows;
  std::vector<ConvRow> conv_rows;
  std::vector<ConvSummary> summaries;
  std::vector<ClassRow> class_rows;
  bench::Triad triad;
  for (const std::string& name : o.models) {
    const std::string spec = o.root + "/configs/models/" + name + ".json";
    auto plan = model::load_model(spec);
    if (!plan.ok()) {
      std::cerr << "engine_bench: error: " << plan.status().message() << "\n";
      return 2;
    }
    const double t_init = bench::now_ms();
    const model::Weights weights = model::Weights::seeded(*plan, 1);
    const double init_ms = bench::now_ms() - t_init;
    const std::vector<float> input = model::seeded_input(plan->spec.input, 1);
    for (int T : o.threads) {
      const double peak = bench::fma_peak_gflops(T);
      auto m = measure(**backend, *plan, weights, input, T, o.repeat, triad);
      if (!m.ok()) {
        std::cerr << "engine_bench: error: " << m.status().message() << "\n";
        return 1;
      }
      const bench::TorchTimes torch_ms =
          o.torch ? bench::torch_times_ms(o.root, spec, T, o.repeat, 1, o.torch_mode)
                  : bench::TorchTimes{};
      print_latency(name, T, o.repeat, m->total_ms, torch_ms);
      add_conv_rows(name, *plan, *m, T, peak, torch_ms.conv_median_ms, &conv_rows, &summaries);
      add_class_rows(name, *plan, *m, T, peak, &class_rows);
      for (size_t i = 0; i < plan->layers.size(); ++i) {
        const auto& info = plan->layers[i];
        if (!big_fc(*plan, i)) continue;
        const double ms = bench::median(m->layer_ms[i]);
        fc_rows.push_back({name, plan->spec.layers[i].name, T, info.weight_bytes / 1e6, ms,
                           info.weight_bytes / (ms * 1e6), bench::median(m->triads),
                           bench::median(m->fc_ratio[i])});
      }
    }
    std::fprintf(stderr, "(%s: seeded %.0f MB of weights in %.0f ms)\n", name.c_str(),
                 plan->weight_bytes / 1e6, init_ms);
  }
  std::printf(
      "\nbig fully connected layers: weight bytes / time; each run right after a STREAM triad "
      "(same T, 2 MiB pages), median of %d; goal >= 80 %% of triad\n",
      o.repeat);
  std::printf("%-12s %-14s %2s %10s %10s %8s %12s %8s\n", "model", "layer", "T", "weight_MB", "ms",
              "GB/s", "triad_GB/s", "%triad");
  for (const FcRow& r : fc_rows) {
    std::printf("%-12s %-14s %2d %10.1f %10.3f %8.2f %12.2f %7.0f%%\n", r.model.c_str(),
                r.layer.c_str(), r.threads, r.mb, r.ms, r.gbs, r.triad, 100.0 * r.ratio);
  }
  print_conv_tables(summaries, conv_rows, o, o.repeat);
  print_class_table(class_rows, o.repeat);
  return 0;
}
