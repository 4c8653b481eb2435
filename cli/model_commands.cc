// model info, model init, model check: the model room's commands (issue 3).
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/flags.h"
#include "model/model_spec.h"
#include "model/onnx_import.h"
#include "model/weights.h"
#include "serf/core/statistics.h"
#include "serf/io/json_fields.h"

namespace serf::cli {

namespace {

using model::ModelPlan;
using json = nlohmann::ordered_json;

std::string shape_str(const model::Shape& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

json shape_json(const model::Shape& s) { return {s.channels, s.height, s.width}; }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The layers a layer reads, "input" for the model input.
std::string inputs_str(const model::LayerSpec& l) {
  std::string s;
  for (const std::string& in : l.inputs) s += (s.empty() ? "" : ",") + in;
  return s;
}

json plan_json(const ModelPlan& plan) {
  json layers = json::array();
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& l = plan.spec.layers[i];
    const auto& info = plan.layers[i];
    layers.push_back({{"name", l.name},
                      {"type", model::to_string(l.kind)},
                      {"inputs", l.inputs},
                      {"input", shape_json(info.in)},
                      {"output", shape_json(info.out)},
                      {"parameters", info.parameters},
                      {"connections", info.connections},
                      {"weight_bytes", info.weight_bytes}});
  }
  return {{"name", plan.spec.name},
          {"description", plan.spec.description},
          {"input", shape_json(plan.spec.input)},
          {"output", shape_json(plan.output())},
          {"parameters", plan.parameters},
          {"connections", plan.connections},
          {"weight_bytes", plan.weight_bytes},
          {"activation_peak_bytes", plan.activation_peak_bytes},
          {"layers", layers}};
}

void print_plan_table(const ModelPlan& plan) {
  std::printf("model %s: input %s, output %s\n", plan.spec.name.c_str(),
              shape_str(plan.spec.input).c_str(), shape_str(plan.output()).c_str());
  if (!plan.spec.description.empty()) std::printf("%s\n", plan.spec.description.c_str());
  int width = 10;
  for (const auto& l : plan.spec.layers) width = std::max(width, static_cast<int>(l.name.size()));
  std::printf("%-*s %-16s %-12s %14s %16s %11s  %s\n", width, "layer", "type", "output",
              "parameters", "connections", "weight MiB", "inputs");
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const auto& l = plan.spec.layers[i];
    const auto& info = plan.layers[i];
    std::printf("%-*s %-16s %-12s %14s %16s %11.3f  %s\n", width, l.name.c_str(),
                model::to_string(l.kind), shape_str(info.out).c_str(),
                format_count(info.parameters).c_str(), format_count(info.connections).c_str(),
                mib(info.weight_bytes), inputs_str(l).c_str());
  }
  std::printf("%-*s %-16s %-12s %14s %16s %11.3f\n", width, "total", "", "",
              format_count(plan.parameters).c_str(), format_count(plan.connections).c_str(),
              mib(plan.weight_bytes));
  std::printf("connections = multiply-adds per image; weights are float32\n");
  std::printf("activation peak: %.3f MiB (float32 tensors alive at once, batch 1)\n",
              mib(plan.activation_peak_bytes));
}

struct InfoOptions {
  std::string spec_path;
  bool json = false;
};

struct CheckOptions {
  std::string spec_path;
  std::string weights_path;
  std::string input_path;
};

struct ImportOptions {
  std::string onnx_path;
  std::string out_path;
  std::string weights_path;
  std::string name;
};

// serf model import: every check and the whole translation happen before anything is written.
Status run_import(const ImportOptions& o) {
  SERF_RETURN_IF_ERROR(check_output_path("--out", o.out_path, {{"the ONNX file", o.onnx_path}}));
  SERF_RETURN_IF_ERROR(
      check_output_path("--weights", o.weights_path, {{"the ONNX file", o.onnx_path}}));
  // By path, not by spelling: "--out ./m.json --weights m.json" wrote the weights, then the spec
  // over them.
  SERF_RETURN_IF_ERROR(
      check_distinct_outputs("--weights", o.weights_path, {{"--out", o.out_path}}));
  SERF_ASSIGN_OR_RETURN(model::OnnxImport imported, model::import_onnx(o.onnx_path, o.name));
  SERF_ASSIGN_OR_RETURN(ModelPlan plan, model::infer_shapes(imported.spec));
  SERF_RETURN_IF_ERROR(imported.weights.save_safetensors(o.weights_path));
  SERF_RETURN_IF_ERROR(
      io::write_text_file(o.out_path, model::model_spec_to_json(imported.spec).dump(1) + "\n"));
  std::printf(
      "imported %s: %d ONNX nodes -> %zu layers (%d batchnorms folded into the layer "
      "before, %d pads into the layer after, %d gates fused into silu/hardswish/gelu, %d "
      "constant nodes folded, %d views and no-ops dropped)\n",
      o.onnx_path.c_str(), imported.nodes, plan.layers.size(), imported.folded_batchnorms,
      imported.folded_pads, imported.fused_gates, imported.folded_constants, imported.dropped);
  std::printf("model %s: input %s, output %s, %s parameters, %s multiply-adds per image\n",
              plan.spec.name.c_str(), shape_str(plan.spec.input).c_str(),
              shape_str(plan.output()).c_str(), format_count(plan.parameters).c_str(),
              format_count(plan.connections).c_str());
  std::printf("wrote %s and %s (%zu tensors, %.1f MiB)\n", o.out_path.c_str(),
              o.weights_path.c_str(), imported.weights.tensors().size(),
              mib(imported.weights.bytes()));
  return Status::Ok();
}

struct InitOptions {
  std::string spec_path;
  uint64_t seed = 1;
  std::string out_path;
  std::string input_out_path;
};

Status run_info(const InfoOptions& o) {
  SERF_ASSIGN_OR_RETURN(ModelPlan plan, model::load_model(o.spec_path));
  if (o.json) {
    std::cout << plan_json(plan).dump(2) << "\n";
  } else {
    print_plan_table(plan);
  }
  return Status::Ok();
}

Status run_init(const InitOptions& o) {
  SERF_ASSIGN_OR_RETURN(ModelPlan plan, model::load_model(o.spec_path));
  // Never over the spec being read (`--out m.json` for `m.json`, through a link too).
  SERF_RETURN_IF_ERROR(check_output_path("--out", o.out_path, {{"the spec", o.spec_path}}));
  if (!o.input_out_path.empty()) {
    SERF_RETURN_IF_ERROR(
        check_output_path("--input-out", o.input_out_path, {{"the spec", o.spec_path}}));
  }
  if (!o.input_out_path.empty()) {
    SERF_RETURN_IF_ERROR(
        check_distinct_outputs("--input-out", o.input_out_path, {{"--out", o.out_path}}));
  }
  SERF_RETURN_IF_ERROR(model::check_weights_fit_memory(plan, 1));
  const auto start = std::chrono::steady_clock::now();
  const model::Weights weights = model::Weights::seeded(plan, o.seed);
  const double init_s = seconds_since(start);
  SERF_RETURN_IF_ERROR(weights.save_safetensors(o.out_path));
  std::printf("wrote %s: %zu tensors, %.1f MiB, seed %" PRIu64 " (initialised in %.2f s)\n",
              o.out_path.c_str(), weights.tensors().size(), mib(weights.bytes()), o.seed, init_s);
  if (!o.input_out_path.empty()) {
    SERF_RETURN_IF_ERROR(model::save_input_safetensors(
        o.input_out_path, plan.spec.input, model::seeded_input(plan.spec.input, o.seed)));
    std::printf("wrote %s: input %s, seed %" PRIu64 "\n", o.input_out_path.c_str(),
                shape_str(plan.spec.input).c_str(), o.seed);
  }
  return Status::Ok();
}

Status run_check(const CheckOptions& o) {
  SERF_ASSIGN_OR_RETURN(ModelPlan plan, model::load_model(o.spec_path));
  const auto start = std::chrono::steady_clock::now();
  SERF_ASSIGN_OR_RETURN(model::Weights weights,
                        model::Weights::load_safetensors(o.weights_path, plan));
  const double load_s = seconds_since(start);
  // Both files are checked before either is reported: a bad --input is one error line, not a
  // line of results followed by an error.
  std::vector<float> input;
  if (!o.input_path.empty()) {
    SERF_ASSIGN_OR_RETURN(input, model::load_input_safetensors(o.input_path, plan.spec.input));
  }
  std::printf("%s: %zu tensors, %.1f MiB, match model %s (loaded in %.2f s)\n",
              o.weights_path.c_str(), weights.tensors().size(), mib(weights.bytes()),
              plan.spec.name.c_str(), load_s);
  if (!o.input_path.empty()) {
    std::printf("%s: input %s, %zu values, match model %s\n", o.input_path.c_str(),
                shape_str(plan.spec.input).c_str(), input.size(), plan.spec.name.c_str());
  }
  return Status::Ok();
}

void register_info(CLI::App* model_cmd, CommandRegistry& registry) {
  auto o = std::make_shared<InfoOptions>();
  auto* info = model_cmd->add_subcommand(
      "info",
      "Print each layer's output shape, parameters, connections (multiply-adds per image) "
      "and weight memory, and the totals");
  info->add_option("FILE", o->spec_path, "model spec JSON (e.g. configs/models/cifar10.json)")
      ->required();
  info->add_flag("--json", o->json,
                 "print one JSON object (totals: parameters, connections, weight_bytes in bytes; "
                 "and a layers list) instead of the table");
  registry.add(info, [o] { return run_info(*o); });
}

void register_import(CLI::App* model_cmd, CommandRegistry& registry) {
  auto o = std::make_shared<ImportOptions>();
  auto* import = model_cmd->add_subcommand(
      "import",
      "Translate an ONNX model (Conv, BatchNormalization, Relu, Clip, Sigmoid, MaxPool, "
      "AveragePool, GlobalAveragePool, ReduceMean over H and W, Gemm, MatMul, Add, Concat, "
      "Flatten, Reshape, Softmax, LRN, Dropout, Identity, zero Pad before a Conv or AveragePool) "
      "into a spec and its weights");
  import->add_option("MODEL", o->onnx_path, "ONNX file (.onnx, float32)")->required();
  import->add_option("--out", o->out_path, "spec JSON to write")->required();
  import->add_option("--weights", o->weights_path, "weights to write (.safetensors, float32)")
      ->required();
  import->add_option("--name", o->name,
                     "model name (default: the ONNX graph's name, else the file name)");
  registry.add(import, [o] { return run_import(*o); });
}

void register_init(CLI::App* model_cmd, CommandRegistry& registry) {
  auto o = std::make_shared<InitOptions>();
  auto* init = model_cmd->add_subcommand(
      "init",
      "Write deterministic seeded weights (and optionally the seeded input) as safetensors; "
      "`serf infer --seed S` uses the same values");
  init->add_option("FILE", o->spec_path, "model spec JSON")->required();
  add_seed(init, &o->seed, "seed of the weights and the input (an integer)")->capture_default_str();
  add_output(init, "--out", &o->out_path, "weights file to write (.safetensors, float32)", true);
  init->add_option("--input-out", o->input_out_path,
                   "also write the seeded input image (tensor \"input\", shape [1, C, H, W]) here");
  registry.add(init, [o] { return run_init(*o); });
}

void register_check(CLI::App* model_cmd, CommandRegistry& registry) {
  auto o = std::make_shared<CheckOptions>();
  auto* check = model_cmd->add_subcommand(
      "check",
      "Load a weights file (and optionally an input file) and check every tensor's name, "
      "dtype and shape against the model");
  check->add_option("FILE", o->spec_path, "model spec JSON")->required();
  check->add_option("--weights", o->weights_path, "weights file (.safetensors, float32)")
      ->required();
  check->add_option("--input", o->input_path,
                    "input file (.safetensors, tensor \"input\" [1, C, H, W])");
  registry.add(check, [o] { return run_check(*o); });
}

}  // namespace

void register_model_commands(CLI::App& app, CommandRegistry& registry) {
  auto* model_cmd = app.add_subcommand("model", "Model specifications: sizes and weights");
  model_cmd->require_subcommand(1, 1);
  register_info(model_cmd, registry);
  register_import(model_cmd, registry);
  register_init(model_cmd, registry);
  register_check(model_cmd, registry);
}

}  // namespace serf::cli
