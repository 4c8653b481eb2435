// make_backend: the one place that knows which backends this build contains.
#include <string>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#ifdef SERF_HAVE_CUDA_BACKEND
#include "engine/cuda/cuda_backend.h"  // StatusOr<std::unique_ptr<Backend>> make_cuda_backend();
#endif

namespace serf::engine {

std::vector<std::string> backend_names() {
#ifdef SERF_HAVE_CUDA_BACKEND
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

StatusOr<std::unique_ptr<Backend>> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") {
#ifdef SERF_HAVE_CUDA_BACKEND
    return make_cuda_backend();  // Unavailable when no device is present
#else
    return NotFound(
        "backend 'cuda' is not in this build (configure with -DSERF_WITH_CUDA=ON on a "
        "machine with nvcc, cuDNN and cuBLAS); use --backend cpu");
#endif
  }
  return InvalidArgument("unknown backend '" + name + "'; use cpu or cuda");
}

}  // namespace serf::engine
