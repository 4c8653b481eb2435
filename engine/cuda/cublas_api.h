#pragma once
// Internal to engine/cuda: cuBLAS, loaded with dlopen when the CUDA backend is created. Linking it
// would cost every process that links the engine about 0.35 s of start-up (libcublasLt's
// initialisation), CPU-only `serf` commands included; cuDNN loads its parts lazily by itself.

#include <cublas_v2.h>

#include "engine/cuda/cuda_util.h"
#include "serf/core/status.h"

namespace serf::engine::cuda {

// The cuBLAS functions the backend calls (the _v2 ones, as cublas_v2.h names them).
struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Loads libcublas.so.<major> once (thread-safe); Unavailable naming the library and dlerror().
StatusOr<const CublasApi*> cublas_api();

// For Owned<cublasHandle_t, ...>: cublasDestroy through the loaded library.
void destroy_cublas_handle(cublasHandle_t handle);
using CublasHandle = Owned<cublasHandle_t, destroy_cublas_handle>;

}  // namespace serf::engine::cuda
