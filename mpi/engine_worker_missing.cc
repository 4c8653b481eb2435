// Built when this tree has no CPU engine target: real nodes are unavailable, emulated ones work.
#include "mpi/engine_worker.h"

namespace serf::mpi {

StatusOr<std::unique_ptr<EngineSlots>> EngineSlots::Create(const std::string&, const std::string&,
                                                           const std::string&, uint64_t) {
  return InvalidArgument(
      "--model: this build has no CPU engine (serf_engine_cpu); use --emulate PROFILE");
}

}  // namespace serf::mpi
