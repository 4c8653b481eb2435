// serf infer: one request through the engine (issue 3), with per-layer times.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/infer_print.h"
#include "cli/plot.h"
#include "cli/runtime_launch.h"
#include "engine/backend.h"
#include "engine/simulated_unit.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "serf/core/statistics.h"

namespace serf::cli {
namespace {

struct InferOptions {
  std::string model;
  std::string weights;
  std::string input;
  uint64_t seed = 1;
  int intra = 1;  // T
  int inter_sim = 1;
  int inter = 0;  // > 0: K MPI node ranks under mpirun (rank 0 controls)
  RuntimeFlags runtime;
  int repeat = 1;
  int batch = 1;  // b requests at once
  std::string backend = "cpu";
  bool json = false;
  std::string output_out;
};

// The request input: --input (b rows of safetensors), or row r seeded as `--seed S + r` alone.
StatusOr<std::vector<float>> infer_input(const model::ModelPlan& plan, const InferOptions& o) {
  if (!o.input.empty()) return model::load_input_safetensors(o.input, plan.spec.input, o.batch);
  return model::seeded_inputs(plan.spec.input, o.seed, o.batch);
}

// One warm-up run, then --repeat timed runs: each run's total and per-layer times into `p`.
Status time_runs(engine::SimulatedUnit& unit, const model::ModelPlan& plan, const InferOptions& o,
                 const std::vector<float>& input, InferPrint* p) {
  const size_t layers = plan.layers.size();
  std::vector<float> output(static_cast<size_t>(plan.output().elements() * o.batch));
  engine::LayerTimings timings;
  timings.resize(layers);
  SERF_RETURN_IF_ERROR(unit.run(input.data(), output.data(), &timings));  // warm-up, not counted
  p->compute_ms.assign(layers, {});
  p->exchange_ms.assign(layers, {});
  for (int r = 0; r < o.repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    SERF_RETURN_IF_ERROR(unit.run(input.data(), output.data(), &timings));
    p->total_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    for (size_t i = 0; i < layers; ++i) {
      p->compute_ms[i].push_back(timings.compute_ms[i]);
      p->exchange_ms[i].push_back(timings.exchange_ms[i]);
    }
  }
  p->fused = timings.fused;
  p->layer_threads = timings.threads;
  p->output = std::move(output);
  return Status::Ok();
}

// The model's description for the printout: names, layer kinds, output shape.
void describe(const model::ModelPlan& plan, const InferOptions& o, InferPrint* p) {
  p->model = plan.spec.name;
  p->threads = o.intra;
  p->inter = o.inter_sim;
  p->repeat = o.repeat;
  p->batch = o.batch;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    p->layer_names.push_back(plan.spec.layers[i].name);
    p->layer_types.push_back(model::to_string(plan.spec.layers[i].kind));
  }
  p->output_out = o.output_out;
  const model::Shape out = plan.output();
  p->output_shape = out.height * out.width == 1
                        ? std::vector<int64_t>{o.batch, out.channels}
                        : std::vector<int64_t>{o.batch, out.channels, out.height, out.width};
}

// K MPI node ranks under mpirun (--inter K): rank 0 controls, the nodes compute.
Status run_infer_mpi(const InferOptions& o) {
  RuntimeFlags f = o.runtime;
  f.model = o.model;
  f.weights = o.weights;
  f.input = o.input;
  f.seed = o.seed;
  f.backend = o.backend;
  f.cores_per_node = o.intra;
  f.input_rows = o.batch;
  return run_infer_inter(f, {1, o.inter, o.intra, o.batch}, o.repeat, o.json, o.output_out);
}

Status run_infer(const InferOptions& o) {
  if (!o.output_out.empty()) {
    SERF_RETURN_IF_ERROR(
        check_output_path("--output-out", o.output_out,
                          {{"--model", o.model}, {"--weights", o.weights}, {"--input", o.input}}));
  }
  if (o.inter > 0) return run_infer_mpi(o);
  SERF_ASSIGN_OR_RETURN(auto backend, engine::make_backend(o.backend));
  SERF_ASSIGN_OR_RETURN(model::ModelPlan plan, model::load_model(o.model));
  const Status partition = engine::validate_partition(plan, {0, o.inter_sim});
  if (!partition.ok()) {
    return InvalidArgument("--inter-sim " + std::to_string(o.inter_sim) + ": " +
                           partition.message());
  }
  SERF_RETURN_IF_ERROR(model::check_weights_fit_memory(plan, 2));
  model::Weights weights;
  if (o.weights.empty()) {
    weights = model::Weights::seeded(plan, o.seed);
  } else {
    SERF_ASSIGN_OR_RETURN(weights, model::Weights::load_safetensors(o.weights, plan));
  }
  SERF_ASSIGN_OR_RETURN(std::vector<float> input, infer_input(plan, o));
  SERF_ASSIGN_OR_RETURN(auto unit, engine::SimulatedUnit::create(*backend, plan, weights,
                                                                 o.inter_sim, o.intra, o.batch));
  InferPrint p;
  describe(plan, o, &p);
  p.backend = backend->name();
  SERF_RETURN_IF_ERROR(time_runs(*unit, plan, o, input, &p));
  return print_infer(p, o.json);
}

}  // namespace

Status print_infer(const InferPrint& p, bool json) {
  const std::vector<float>& all = p.output;
  const size_t layers = p.layer_names.size();
  auto threads_of = [&p](size_t i) { return i < p.layer_threads.size() ? p.layer_threads[i] : 0; };
  const size_t row = all.size() / static_cast<size_t>(std::max(p.batch, 1));
  const std::vector<float> output(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(row));
  for (float v : all) {
    if (!std::isfinite(v))
      return InvalidArgument(
          "the output holds a non-finite value: the weights or the input are out of range");
  }
  if (!p.output_out.empty()) {
    std::map<std::string, model::Tensor> tensors;
    tensors["output"] = model::Tensor{p.output_shape.empty()
                                          ? std::vector<int64_t>{p.batch, static_cast<int64_t>(row)}
                                          : p.output_shape,
                                      all};
    SERF_RETURN_IF_ERROR(model::write_safetensors(p.output_out, tensors, {{"producer", "serf"}}));
  }
  std::vector<int> order(output.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t top = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) {
    return output[a] > output[b] || (output[a] == output[b] && a < b);
  });
  order.resize(top);

  if (json) {
    nlohmann::json doc;
    doc["model"] = p.model;
    doc["backend"] = p.backend;
    doc["intra"] = p.threads;
    doc["inter"] = p.inter;
    doc["repeat"] = p.repeat;
    doc["total_ms"] = median(p.total_ms);
    doc["top5"] = order;
    const size_t shown = std::min<size_t>(1000, output.size());
    doc["output"] = std::vector<float>(output.begin(), output.begin() + shown);
    doc["output_elements"] = output.size();
    doc["batch"] = p.batch;
    doc["outputs"] = nlohmann::json::array();  // one row per request of the batch
    for (size_t r = 0; r < static_cast<size_t>(p.batch); ++r) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(r * row);
      doc["outputs"].push_back(
          std::vector<float>(first, first + static_cast<std::ptrdiff_t>(shown)));
    }
    doc["layers"] = nlohmann::json::array();
    for (size_t i = 0; i < layers; ++i) {
      nlohmann::json layer = {{"name", p.layer_names[i]},
                              {"type", p.layer_types[i]},
                              {"ms", median(p.compute_ms[i])},
                              {"exchange_ms", median(p.exchange_ms[i])},
                              {"fused", p.fused[i] != 0}};
      if (threads_of(i) > 0) layer["threads"] = threads_of(i);
      doc["layers"].push_back(std::move(layer));
    }
    std::cout << doc.dump() << "\n";
    return Status::Ok();
  }
  const std::string batch = p.batch > 1 ? ", batch b=" + std::to_string(p.batch) : "";
  std::printf("model %s: backend %s, T=%d threads, K=%d %s%s, median of %d runs: %.3f ms\n",
              p.model.c_str(), p.backend.c_str(), p.threads, p.inter, p.inter_kind.c_str(),
              batch.c_str(), p.repeat, median(p.total_ms));
  if (p.batch > 1) std::printf("row 0 of %d:\n", p.batch);
  std::printf("top-5:");
  for (int c : order) std::printf("  %d (%.6g)", c, output[c]);
  std::printf("\n%-12s %-16s %12s %12s %8s\n", "layer", "type", "ms", "exchange_ms", "threads");
  for (size_t i = 0; i < layers; ++i) {
    const char* type = p.layer_types[i].c_str();
    if (p.fused[i]) {
      std::printf("%-12s %-16s %12s %12s\n", p.layer_names[i].c_str(), type, "fused", "");
    } else {
      const std::string threads = threads_of(i) > 0 ? std::to_string(threads_of(i)) : "-";
      std::printf("%-12s %-16s %12.3f %12.3f %8s\n", p.layer_names[i].c_str(), type,
                  median(p.compute_ms[i]), median(p.exchange_ms[i]), threads.c_str());
    }
  }
  return Status::Ok();
}

void register_engine_commands(CLI::App& app, CommandRegistry& registry) {
  auto o = std::make_shared<InferOptions>();
  auto* sub = app.add_subcommand("infer",
                                 "Run one request (or a batch of b) through the engine and print "
                                 "the top-5 classes and per-layer times");
  sub->add_option("--model", o->model,
                  "Model specification (JSON, e.g. configs/models/cifar10.json)")
      ->required();
  sub->add_option("--weights", o->weights,
                  "Weights (safetensors, F32); default: seeded from --seed");
  sub->add_option("--input", o->input,
                  "Input image (safetensors with tensor 'input' [1,C,H,W]); default: "
                  "seeded from --seed");
  add_seed(sub, &o->seed, "Seed of the seeded weights and input (integer, default 1)")
      ->check(CLI::Validator(
          [sub](std::string&) {
            // Both files given: nothing is seeded, and the seed would be silently ignored.
            return sub->count("--weights") > 0 && sub->count("--input") > 0
                       ? std::string("nothing is seeded when --weights and --input are both given")
                       : std::string();
          },
          ""));
  add_intra(sub, &o->intra, /*alias_threads=*/true,
            "Intra-node parallelism T per rank (count, default 1): OpenMP threads on cpu, "
            "SM units of the GPU on cuda (docs/gpu.md); --threads is the old spelling");
  sub->add_option("--inter-sim", o->inter_sim,
                  "Inter-node parallelism K, simulated by K in-process partitions "
                  "(ranks, default 1)")
      ->check(at_least(1));
  sub->add_option("--inter", o->inter,
                  "Inter-node parallelism K over MPI: run under mpirun -np K+1 (rank 0 "
                  "controls, ranks 1..K compute; count)")
      ->check(int_range(1, kMaxNodes));
  add_runtime_flags(sub, &o->runtime, /*infer_flags=*/true);
  // More runs than anyone waits for is a typo.
  sub->add_option("--repeat", o->repeat,
                  "Timed runs after one warm-up; times are medians (count, default 1)")
      ->check(int_range(1, 1000000));
  sub->add_option("--batch", o->batch,
                  "Batch b: b requests run at once (row r seeded with --seed + r, or the b rows "
                  "of --input [b,C,H,W]; with --inter K, one batch over the K nodes); --json adds "
                  "\"outputs\", one row each (count, default 1)")
      ->check(int_range(1, 1024));
  sub->add_option("--backend", o->backend, "Backend: cpu or cuda (default cpu)");
  sub->add_flag("--json", o->json,
                "Print one JSON object: top5, output (first 1000 values), layers [{name, ms}]");
  add_output(sub, "--output-out", &o->output_out,
             "Also write the whole output as safetensors (tensor \"output\", [1, C] or "
             "[1, C, H, W], float32)",
             false);
  registry.add(
      sub, [o] { return run_infer(*o); }, [o] { return o->inter > 0; });
}

}  // namespace serf::cli
