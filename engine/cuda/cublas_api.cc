#include "engine/cuda/cublas_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace serf::engine::cuda {
namespace {

#define SERF_SYMBOL_NAME_(x) #x
#define SERF_SYMBOL_NAME(x) SERF_SYMBOL_NAME_(x)  // expands cublas_v2.h's macros: "cublasCreate_v2"

template <typename Fn>
bool load(void* lib, const char* symbol, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*fn == nullptr) *missing = symbol;
  return *fn != nullptr;
}

StatusOr<CublasApi> load_cublas() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef SERF_CUDA_LIBRARY_DIR
  if (lib == nullptr)
    lib =
        dlopen((std::string(SERF_CUDA_LIBRARY_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  if (lib == nullptr) {
    const char* why = dlerror();
    return Unavailable("backend 'cuda': cannot load " + soname + " (" + (why ? why : "not found") +
                       "); add the CUDA library folder to LD_LIBRARY_PATH or use --backend cpu");
  }
  CublasApi api;
  std::string missing;
  const bool ok = load(lib, SERF_SYMBOL_NAME(cublasCreate), &api.create, &missing) &&
                  load(lib, SERF_SYMBOL_NAME(cublasDestroy), &api.destroy, &missing) &&
                  load(lib, SERF_SYMBOL_NAME(cublasSetStream), &api.set_stream, &missing) &&
                  load(lib, SERF_SYMBOL_NAME(cublasSetMathMode), &api.set_math_mode, &missing) &&
                  load(lib, SERF_SYMBOL_NAME(cublasSetWorkspace), &api.set_workspace, &missing) &&
                  load(lib, SERF_SYMBOL_NAME(cublasSgemm), &api.sgemm, &missing) &&
                  load(lib, SERF_SYMBOL_NAME(cublasGetStatusString), &api.status_string, &missing);
  if (!ok)
    return Unavailable("backend 'cuda': " + soname + " has no " + missing + " (an older cuBLAS?)");
  return api;  // the library stays loaded for the process's lifetime
}

}  // namespace

StatusOr<const CublasApi*> cublas_api() {
  static std::once_flag once;
  static StatusOr<CublasApi> loaded = Status(StatusCode::kInternal, "cuBLAS not loaded");
  std::call_once(once, [] { loaded = load_cublas(); });
  if (!loaded.ok()) return loaded.status();
  return &*loaded;
}

void destroy_cublas_handle(cublasHandle_t handle) {
  auto api = cublas_api();
  if (api.ok()) (*api)->destroy(handle);
}

}  // namespace serf::engine::cuda
