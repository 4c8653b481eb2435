#pragma once
// What `serf infer` prints (text or --json), shared by the single-process command and
// `mpirun -np K+1 serf infer --inter K`, so both print the same thing.

#include <cstdint>
#include <string>
#include <vector>

#include "serf/core/configuration.h"
#include "serf/core/status.h"

namespace serf::cli {

struct InferPrint {
  std::string model, backend;
  int threads = 1;
  int inter = 1;
  std::string inter_kind = "in-process partitions";
  int repeat = 1;
  int batch = 1;                 // rows of `output` (b requests run as one batch)
  std::vector<double> total_ms;  // one per timed run
  std::vector<float> output;
  std::vector<std::string> layer_names, layer_types;
  std::vector<std::vector<double>> compute_ms, exchange_ms;  // per layer, one per timed run
  std::vector<char> fused;                                   // per layer
  std::vector<int> layer_threads;  // per layer: CPU threads it ran on (empty or 0: not reported)
  // --output-out: the whole output as safetensors, tensor "output" of this shape ([b, N] when
  // empty).
  std::string output_out;
  std::vector<int64_t> output_shape;
};

Status print_infer(const InferPrint& p, bool json);

// `serf infer --inter K [--batch b]` under mpirun (cli/mpi_commands.cc): `config` is (1, K, T, b),
// the session's input holds b rows.
struct RuntimeFlags;
Status run_infer_inter(const RuntimeFlags& flags, const Configuration& config, int repeat,
                       bool json, const std::string& output_out = "");

}  // namespace serf::cli
