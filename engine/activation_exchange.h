#pragma once
// ActivationExchange: how the K ranks of one request assemble a partitioned layer's full output.
// The engine calls all_gather at every point where the next layer needs the whole activation
// (before conv2d, fully_connected, lrn, softmax, and at the end of the network); every rank has
// written its own slice in place and receives the others' slices, in rank order.
//
// Implementations: InProcessExchange below (K partitions as K threads of one process: tests,
// `serf infer --inter-sim K`) and the MPI one in mpi/ (MPI_Allgatherv with MPI_IN_PLACE on the
// slot's communicator). One exchange object serves one request at a time (one slot of one rank).

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/partition.h"
#include "serf/core/status.h"

namespace serf::engine {

class ActivationExchange {
 public:
  virtual ~ActivationExchange() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // In-place all-gather. `full` holds layout.total floats; on entry this rank's part
  // [layout.offsets[rank()], + layout.counts[rank()]) is filled, on return all of it is.
  // Every rank of the request calls it with the same layout, in the same order.
  // Must not allocate (the request path allocates nothing).
  virtual Status all_gather(float* full, const GatherLayout& layout) = 0;
};

// K = 1: nothing to exchange.
class LocalExchange final : public ActivationExchange {
 public:
  int rank() const override { return 0; }
  int ranks() const override { return 1; }
  Status all_gather(float* full, const GatherLayout& layout) override;
};

// K ranks simulated by K threads in one process. Create one group per (request slot); hand
// member(r) to the thread that runs rank r. Each member copies the other ranks' slices straight
// out of their `full` buffers between two barriers, so nothing is staged or allocated.
class InProcessExchange {
 public:
  explicit InProcessExchange(int ranks);
  ~InProcessExchange();
  InProcessExchange(const InProcessExchange&) = delete;
  InProcessExchange& operator=(const InProcessExchange&) = delete;

  int ranks() const { return static_cast<int>(members_.size()); }
  ActivationExchange& member(int rank);

 private:
  class Member;
  void barrier();

  std::mutex mutex_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
  std::vector<float*> posted_;  // each rank's `full` buffer during an all_gather
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace serf::engine
