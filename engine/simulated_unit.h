#pragma once
// SimulatedUnit: a serving unit of K ranks simulated in one process (`serf infer --inter-sim K`,
// the partitioning tests). Rank 0 runs in the calling thread, ranks 1..K-1 in worker threads that
// live as long as the unit; each rank has its own PreparedModel (its weight slices) and slot, and
// the ranks exchange activations through an InProcessExchange.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/backend.h"

namespace serf::engine {

class SimulatedUnit {
 public:
  static StatusOr<std::unique_ptr<SimulatedUnit>> create(Backend& backend,
                                                         const model::ModelPlan& plan,
                                                         const model::Weights& weights, int ranks,
                                                         int threads, int batch = 1);
  ~SimulatedUnit();
  SimulatedUnit(const SimulatedUnit&) = delete;
  SimulatedUnit& operator=(const SimulatedUnit&) = delete;

  int ranks() const { return static_cast<int>(slots_.size()); }
  // One request (a batch of b rows) on all K ranks; `output` is rank 0's (full) output,
  // `timings` rank 0's.
  // One request at a time (not thread-safe).
  Status run(const float* input, float* output, LayerTimings* timings);

 private:
  SimulatedUnit() = default;
  void worker(int rank);

  std::vector<std::shared_ptr<PreparedModel>> models_;
  std::vector<std::unique_ptr<Executable>> slots_;
  std::unique_ptr<InProcessExchange> exchange_;
  std::vector<std::vector<float>> outputs_;  // ranks 1..K-1 write here
  std::vector<std::thread> workers_;

  std::mutex mutex_;
  std::condition_variable cv_;
  const float* input_ = nullptr;
  uint64_t generation_ = 0;  // bumped per request
  int pending_ = 0;          // workers still running the current request
  bool stop_ = false;
  std::vector<Status> worker_status_;
};

}  // namespace serf::engine
