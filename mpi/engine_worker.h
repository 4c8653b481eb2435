#pragma once
// Real nodes: every slot of a node runs an engine Executable of the whole model's slice for its
// rank of the unit; layers assemble activations with MPI_Allgatherv on the slot's communicator.
// Every node holds the whole model, so a switch of (c, K, T) re-prepares primitives locally and
// moves no weights between ranks.

#include <memory>
#include <string>

#include "mpi/runtime.h"

namespace serf::mpi {

class EngineSlots {
 public:
  virtual ~EngineSlots() = default;
  // Loads the model spec and its weights on this rank (every rank reads the same files).
  static StatusOr<std::unique_ptr<EngineSlots>> Create(const std::string& model_path,
                                                      const std::string& backend);
  virtual std::string model_name() const = 0;
  virtual int64_t input_floats() const = 0;
  virtual int max_inter() const = 0;  // largest K the model can be split over
  virtual SlotWorkerFactory factory() = 0;
};

}  // namespace serf::mpi
