#pragma once
// Backend: runs a model (one batch of b requests at a time per slot, float32; b fixed at prepare).
// Names no CPU or GPU type; engine/cpu (oneDNN + OpenMP) and engine/cuda (cuDNN + cuBLAS) implement
// it.
//
//   auto backend = make_backend("cpu");                                  //
//   StatusOr<unique_ptr<Backend>> auto prepared = backend->prepare(plan, weights, {rank, K},
//   threads); // slices, reorders, primitives auto slot = prepared->new_slot(); // activations +
//   scratch slot->run(input, output, exchange, &timings);                        // allocates
//   nothing
//
// A PreparedModel holds what every slot shares read-only (this rank's weight slices in the
// kernels' preferred layout, the primitives created for `threads`), so c slots cost one copy of the
// weights. An Executable is one slot: its own activations and scratchpads. It is not thread-safe;
// different Executables of one PreparedModel run concurrently from different threads (a node's
// slot threads, mpi/node.cc, each own theirs).

#include <memory>
#include <string>
#include <vector>

#include "engine/activation_exchange.h"
#include "engine/partition.h"
#include "model/model_spec.h"
#include "model/weights.h"
#include "serf/core/status.h"

namespace serf::engine {

// Per-layer wall-clock times of one request, one entry per spec layer (size them with
// resize(plan.layers.size()) before the request; run() only writes). A layer fused into the one
// before it (relu after conv2d / fully_connected) reports 0 and fused = true.
struct LayerTimings {
  std::vector<double> compute_ms;   // the layer's own kernels (plus layout reorders)
  std::vector<double> exchange_ms;  // all-gather of this layer's output (0 when none)
  std::vector<char> fused;          // 1 when folded into the previous layer's kernel
  std::vector<int> threads;         // CPU threads the layer ran on (0: not reported, e.g. CUDA)
  void resize(size_t layers) {
    compute_ms.assign(layers, 0.0);
    exchange_ms.assign(layers, 0.0);
    fused.assign(layers, 0);
    threads.assign(layers, 0);
  }
};

class Executable {
 public:
  virtual ~Executable() = default;
  // input: batch() x plan.spec.input.elements() floats (NCHW, row r = request r); output:
  // batch() x plan.output().elements() floats, row r the answer to row r of the input.
  // Every rank receives the whole output. `exchange` must have ranks() == partition().ranks and
  // rank() == partition().rank. `timings` may be null. CPU: sets the calling thread's OpenMP
  // thread count to threads() (a per-thread setting, so slots on other threads are unaffected).
  virtual Status run(const float* input, float* output, ActivationExchange& exchange,
                     LayerTimings* timings) = 0;
  virtual Partition partition() const = 0;
  virtual int threads() const = 0;
};

class PreparedModel {
 public:
  virtual ~PreparedModel() = default;
  // One more slot (allocates its activations and scratch; not on the request path).
  virtual StatusOr<std::unique_ptr<Executable>> new_slot() = 0;
  virtual const model::ModelPlan& plan() const = 0;
  virtual Partition partition() const = 0;
  virtual int threads() const = 0;
  // b: the rows of every run() (the batch the kernels were created for).
  virtual int batch() const { return 1; }
  // Bytes of weights this rank holds (its slices, in the kernels' layout).
  virtual int64_t resident_weight_bytes() const = 0;
  // Activation layout changes (reorders) a run() makes between layers and at its ends: what the
  // kernels' layout choices cost besides their own work (0 on a backend that has none).
  virtual int activation_reorders() const { return 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda"
  // Slices this rank's weights, lays them out for the kernels and creates the kernels for
  // `threads` threads (T, the paper's C_intra). Errors: partition invalid for the plan
  // (validate_partition), threads < 1, weights missing a tensor or of the wrong shape.
  // `batch` b >= 1: every run() of its slots computes b requests at once (the CPU backend: oneDNN
  // primitives with N = b, a GEMM for fully_connected; the CUDA backend: cuDNN with N = b, a
  // cuBLAS GEMM; InvalidArgument naming the layer for one a backend cannot batch). Thread-safe.
  // While a PreparedModel is held, preparing the same (weights object, model, partition, threads,
  // batch) again returns it: a cache keyed by the Weights object's address, so do not change or
  // replace a Weights object while models prepared from it are held.
  virtual StatusOr<std::shared_ptr<PreparedModel>> prepare(const model::ModelPlan& plan,
                                                           const model::Weights& weights,
                                                           Partition partition, int threads,
                                                           int batch = 1) = 0;
  // Bytes of packed weights held by the models this backend prepared that are still alive, each
  // tensor once: the CPU backend shares a tensor across models (batch sizes, thread counts) that
  // want it in the same layout, so a node's sizes 1..b cost about one copy, not b.
  virtual int64_t resident_weight_bytes() const = 0;
  // Of those, the tensors held in a second (third, ...) layout because a kernel at another batch
  // size wanted a different one (0 when nothing is shared).
  virtual int weight_layouts_beyond_first() const { return 0; }
};

// "cpu" always; "cuda" when built with the CUDA backend and a device is present. Unknown names are
// InvalidArgument listing the known ones; "cuda" in a build without it is NotFound (exit 2), and
// Unavailable (exit 4) when built but no device answers.
StatusOr<std::unique_ptr<Backend>> make_backend(const std::string& name);
std::vector<std::string> backend_names();  // the backends this build contains

}  // namespace serf::engine
