#include "engine/cuda/cuda_util.h"

#include <algorithm>

#include "engine/cuda/cublas_api.h"

namespace serf::engine::cuda {
namespace {

std::string call_name(const char* call) {
  std::string s(call);
  const size_t paren = s.find('(');
  return paren == std::string::npos ? s : s.substr(0, paren);
}

}  // namespace

Status cuda_status(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::Ok();
  const std::string what =
      call_name(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  // No device / no driver is an environment the user can fix, not a bug.
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
      e == cudaErrorMemoryAllocation) {
    return Unavailable("cuda: " + what);
  }
  return Internal("cuda: " + what);
}

Status cudnn_status(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return Internal("cuDNN: " + call_name(call) + ": " + cudnnGetErrorString(s) + " (status " +
                  std::to_string(static_cast<int>(s)) + ")");
}

Status cublas_status(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  auto api = cublas_api();
  const std::string what = api.ok() ? (*api)->status_string(s) : "error";
  return Internal("cuBLAS: " + call_name(call) + ": " + what + " (status " +
                  std::to_string(static_cast<int>(s)) + ")");
}

template <bool kPinned>
StatusOr<Memory<kPinned>> Memory<kPinned>::create(size_t bytes) {
  Memory m;
  m.bytes_ = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  if constexpr (kPinned) {
    SERF_CUDA(cudaMallocHost(&m.p_, m.bytes_));
  } else {
    SERF_CUDA(cudaMalloc(&m.p_, m.bytes_));
    SERF_CUDA(cudaMemset(m.p_, 0, m.bytes_));
    // The memset runs on the legacy stream, which slots' non-blocking streams do not wait for.
    SERF_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  }
  return m;
}
template class Memory<false>;
template class Memory<true>;

StatusOr<TensorDesc> make_nchw_desc(int n, int c, int h, int w) {
  TensorDesc d;
  SERF_CUDNN(cudnnCreateTensorDescriptor(d.out()));
  SERF_CUDNN(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  return d;
}

StatusOr<TensorDesc> make_channel_major_desc(int n, int c, int h, int w) {
  TensorDesc d;
  SERF_CUDNN(cudnnCreateTensorDescriptor(d.out()));
  SERF_CUDNN(
      cudnnSetTensor4dDescriptorEx(d.get(), CUDNN_DATA_FLOAT, n, c, h, w, h * w, n * h * w, w, 1));
  return d;
}

}  // namespace serf::engine::cuda
