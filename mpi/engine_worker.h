#pragma once
// Real nodes: every slot of a node runs an engine Executable of the whole model's slice for its
// rank of the unit; layers assemble activations with MPI_Allgatherv on the slot's communicator.
// Every node holds the whole model, so a switch of (c, K, T) re-prepares primitives locally and
// moves no weights between ranks.

#include <memory>
#include <string>
#include <vector>

#include "mpi/runtime.h"

namespace serf::mpi {

class EngineSlots {
 public:
  virtual ~EngineSlots() = default;
  // Loads the model spec and its weights on this rank (every rank reads the same files).
  // Weights: `weights_path` (safetensors) or, when empty, seeded from `seed` (as `serf infer`).
  static StatusOr<std::unique_ptr<EngineSlots>> Create(const std::string& model_path,
                                                       const std::string& backend,
                                                       const std::string& weights_path,
                                                       uint64_t seed);
  virtual std::string model_name() const = 0;
  virtual int max_inter() const = 0;  // largest K the model can be split over
  virtual SlotWorkerFactory factory() = 0;
  // Prepares, for node `node` of `nodes`, the kernels of every distinct (K, T, b) of `configs`
  // this node computes in (a unit of K: node / K < nodes / K), and holds them for the run, so a
  // switch to one of them prepares nothing (Preparation::kHeld). While memory allows (see
  // engine_worker.cc); the rest are prepared at their first switch, as without this.
  // `budget_bytes` > 0: this rank holds at most that much ahead (serve --ahead-memory-mb, for a
  // machine shared with other jobs). Returns a line saying what was prepared, in how long, and
  // the resident memory after.
  virtual std::string prepare_ahead(const std::vector<Configuration>& configs, int node, int nodes,
                                    double budget_bytes) = 0;
  // The input of `rows` requests, one after another: row r seeded from `seed + r` when `path` is
  // empty (as `serf infer --batch`), else `rows` rows of the safetensors file.
  virtual StatusOr<std::vector<float>> input(const std::string& path, uint64_t seed,
                                             int rows = 1) const = 0;
  virtual int64_t output_floats() const = 0;
  virtual std::vector<std::string> layer_names() const = 0;
  virtual std::vector<std::string> layer_types() const = 0;
  virtual std::string backend_name() const = 0;
};

}  // namespace serf::mpi
