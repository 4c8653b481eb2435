#include "mpi/environment.h"

#include <mpi.h>

namespace serf::mpi {

StatusOr<std::unique_ptr<Environment>> Environment::Create() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Internal("MPI is already initialised in this process");
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    return Unavailable("MPI_Init_thread failed");
  }
  // Failures come back as error codes (and become a Status), they do not abort inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<Environment> env(new Environment());
  MPI_Comm_rank(MPI_COMM_WORLD, &env->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &env->size_);
  if (provided < MPI_THREAD_MULTIPLE) {
    return Unavailable(
        "this MPI library does not provide MPI_THREAD_MULTIPLE (slots of a node are "
        "threads); use an MPI built with thread support, e.g. Open MPI 4");
  }
  return env;
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::vector<int> Environment::agree_max(std::vector<int> values) const {
  std::vector<int> out(values.size());
  MPI_Allreduce(values.data(), out.data(), static_cast<int>(values.size()), MPI_INT, MPI_MAX,
                MPI_COMM_WORLD);
  return out;
}

void Environment::barrier() const { MPI_Barrier(MPI_COMM_WORLD); }

void Environment::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace serf::mpi
