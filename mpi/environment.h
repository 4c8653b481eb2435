#pragma once
// RAII MPI environment. Only commands that need MPI create one, so `serf predict` and friends run
// without mpirun. MPI is initialised with MPI_THREAD_MULTIPLE (slots of one node are threads that
// communicate at once); a library that cannot provide it is an error, not a silent downgrade.

#include <memory>
#include <vector>

#include "serf/core/status.h"

namespace serf::mpi {

class Environment {
 public:
  static StatusOr<std::unique_ptr<Environment>> Create();
  ~Environment();  // MPI_Finalize, unless abort() was called
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Collective over every rank: the element-wise largest of the ranks' `values` (all ranks pass the
  // same length), so ranks agree whether to stop together.
  std::vector<int> agree_max(std::vector<int> values) const;
  void barrier() const;
  // Tears the whole job down (every rank) with `code`; used after a fault, where a rank may hang.
  [[noreturn]] void abort(int code);

 private:
  Environment() = default;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace serf::mpi
