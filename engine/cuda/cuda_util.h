#pragma once
// Internal to engine/cuda: every CUDA runtime, cuDNN and cuBLAS return code becomes a Status that
// names the call, and RAII owners for device memory, pinned host memory, streams, handles and
// cuDNN descriptors (so an error half-way through prepare() leaks nothing).

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "serf/core/status.h"

namespace serf::engine::cuda {

// `call` is the stringified expression; the message keeps its function name only.
Status cuda_status(cudaError_t e, const char* call);
Status cudnn_status(cudnnStatus_t s, const char* call);
Status cublas_status(cublasStatus_t s, const char* call);

#define SERF_CUDA(expr) SERF_RETURN_IF_ERROR(::serf::engine::cuda::cuda_status((expr), #expr))
#define SERF_CUDNN(expr) SERF_RETURN_IF_ERROR(::serf::engine::cuda::cudnn_status((expr), #expr))
// cuBLAS is called through function pointers (cublas_api.h): name the call explicitly.
#define SERF_CUBLAS(name, expr) \
  SERF_RETURN_IF_ERROR(::serf::engine::cuda::cublas_status((expr), name))

// A move-only owner of a handle `T` released by `Destroy` (cudnnDestroyTensorDescriptor, ...).
template <typename T, auto Destroy>
class Owned {
 public:
  Owned() = default;
  ~Owned() { reset(); }
  Owned(Owned&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return h_; }
  T* out() {
    reset();
    return &h_;
  }  // for cudnnCreate...(&h)
  explicit operator bool() const { return h_ != T{}; }
  void reset() {
    if (h_ != T{}) Destroy(h_);  // errors at teardown have nowhere to go
    h_ = T{};
  }

 private:
  T h_{};
};

using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Owned<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using LrnDesc = Owned<cudnnLRNDescriptor_t, cudnnDestroyLRNDescriptor>;
using ActDesc = Owned<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
using CudnnHandle = Owned<cudnnHandle_t, cudnnDestroy>;
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;

// Device memory (cudaMalloc, zeroed, `bytes` rounded up to 256) or, with kPinned, page-locked
// host memory (cudaMallocHost: the staging area of asynchronous copies).
template <bool kPinned>
class Memory {
 public:
  Memory() = default;
  static StatusOr<Memory> create(size_t bytes);
  ~Memory() { release(); }
  Memory(Memory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(o.bytes_) {}
  Memory& operator=(Memory&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  float* floats() const { return static_cast<float*>(p_); }
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (p_ == nullptr) return;
    if constexpr (kPinned) {
      cudaFreeHost(p_);
    } else {
      cudaFree(p_);
    }
    p_ = nullptr;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
};
using DeviceBuffer = Memory<false>;
using PinnedBuffer = Memory<true>;

// A packed 4-D NCHW float tensor descriptor of shape (n, c, h, w).
StatusOr<TensorDesc> make_nchw_desc(int n, int c, int h, int w);
// Shape (n, c, h, w) stored channel-major, [c][n][h][w] (engine/layer_steps.h): strides h*w for
// N, n*h*w for C.
StatusOr<TensorDesc> make_channel_major_desc(int n, int c, int h, int w);

}  // namespace serf::engine::cuda
