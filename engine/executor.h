#pragma once
// Executor: one rank's c service slots (the paper's C_service) over one PreparedModel. Up to c
// requests run at once, each from its own calling thread with T OpenMP threads; run() blocks while
// all slots are busy. Thread-safe.
//
// With K > 1 every rank of a serving unit must run a request on the same slot index, each slot
// with its own exchange (MPI: the slot's communicator): use run_on_slot. With K = 1 any free slot
// will do: use run.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend.h"

namespace serf::engine {

class Executor {
 public:
  static StatusOr<std::unique_ptr<Executor>> create(std::shared_ptr<PreparedModel> model,
                                                    int slots);

  int slots() const { return static_cast<int>(slots_.size()); }
  const PreparedModel& model() const { return *model_; }

  // Runs on any free slot (waits for one).
  Status run(const float* input, float* output, ActivationExchange& exchange,
             LayerTimings* timings);
  // Runs on slot `slot` (waits until that slot is free). InvalidArgument when out of range.
  Status run_on_slot(int slot, const float* input, float* output, ActivationExchange& exchange,
                     LayerTimings* timings);

 private:
  Executor(std::shared_ptr<PreparedModel> model, std::vector<std::unique_ptr<Executable>> slots);
  int acquire_any();
  void acquire(int slot);
  void release(int slot);

  std::shared_ptr<PreparedModel> model_;
  std::vector<std::unique_ptr<Executable>> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<char> busy_;
};

}  // namespace serf::engine
