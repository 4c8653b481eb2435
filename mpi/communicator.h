#pragma once
// RAII MPI communicator with polled (never forever-blocking) operations. The MPI handle is hidden
// (pimpl) so code outside mpi/ never sees mpi.h. Every wait polls MPI_Test with a short sleep:
// it has a deadline, and idle ranks do not spin a core (64 emulated ranks share two cores).

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "serf/core/status.h"

namespace serf::mpi {

struct WaitPolicy {
  double timeout_s = 0;                       // <= 0: no deadline
  const std::atomic<bool>* cancel = nullptr;  // set: give up (not collectives)
  double max_sleep_s = 1e-3;                  // longest sleep between polls
};

class Communicator {
 public:
  Communicator();  // MPI_COMM_NULL
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // A duplicate of MPI_COMM_WORLD (collective over every rank, bounded by `wait`).
  static StatusOr<Communicator> world(const WaitPolicy& wait);
  bool valid() const;
  int rank() const;
  int size() const;

  // Collective over this communicator. color < 0: this rank joins no group (null communicator).
  StatusOr<Communicator> split(int color, int key) const;
  StatusOr<Communicator> dup() const;
  // A communicator of this one's ranks [first, size): collective over those ranks only
  // (MPI_Comm_create_group), so the others never wait in it.
  StatusOr<Communicator> tail_group(int first, int tag) const;
  // Ranks sharing this rank's machine (MPI_COMM_TYPE_SHARED).
  StatusOr<Communicator> split_shared() const;

  Status send_bytes(const void* data, size_t bytes, int dest, int tag,
                    const WaitPolicy& wait) const;
  // `source` may be -1 (any); the actual source is stored in `*from` when given.
  Status recv_bytes(void* data, size_t bytes, int source, int tag, const WaitPolicy& wait,
                    int* from = nullptr) const;
  // Whether a message from `source` (-1: any) with `tag` is waiting to be received.
  StatusOr<bool> iprobe(int source, int tag) const;
  Status bcast_bytes(void* data, size_t bytes, int root, const WaitPolicy& wait) const;
  Status barrier(const WaitPolicy& wait) const;
  // In-place all-gather (MPI_Allgatherv with MPI_IN_PLACE): rank r's part of `full` is
  // [offsets[r], offsets[r] + counts[r]); on return every part is filled.
  Status all_gather_in_place(float* full, const std::vector<int>& counts,
                             const std::vector<int>& offsets, const WaitPolicy& wait) const;

  template <typename T>
  Status send(const T& value, int dest, int tag, const WaitPolicy& wait) const {
    return send_bytes(&value, sizeof(T), dest, tag, wait);
  }
  template <typename T>
  Status recv(T* value, int source, int tag, const WaitPolicy& wait, int* from = nullptr) const {
    return recv_bytes(value, sizeof(T), source, tag, wait, from);
  }

  // A receive posted now and tested later (the controller's result inbox).
  class PendingRecv {
   public:
    PendingRecv();
    ~PendingRecv();
    PendingRecv(const PendingRecv&) = delete;
    PendingRecv& operator=(const PendingRecv&) = delete;
    Status post(const Communicator& comm, void* data, size_t bytes, int source, int tag);
    // True once the message arrived; `*from` is its source.
    StatusOr<bool> test(int* from);
    void cancel();
    bool active() const { return active_; }

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    bool active_ = false;
  };

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace serf::mpi
