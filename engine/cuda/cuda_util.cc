#include "engine/cuda/cuda_util.h"

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
  const std::string what = call_name(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  // No device / no driver is an environment the user can fix, not a bug.
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorMemoryAllocation) {
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
  return Internal("cuBLAS: " + call_name(call) + ": " + cublasGetStatusString(s) + " (status " +
                  std::to_string(static_cast<int>(s)) + ")");
}

StatusOr<DeviceBuffer> DeviceBuffer::create(size_t bytes) {
  DeviceBuffer b;
  b.bytes_ = (bytes + 255) / 256 * 256;
  if (b.bytes_ == 0) b.bytes_ = 256;
  SERF_CUDA(cudaMalloc(&b.p_, b.bytes_));
  SERF_CUDA(cudaMemset(b.p_, 0, b.bytes_));
  // The memset runs on the legacy stream, which slots' non-blocking streams do not wait for.
  SERF_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (p_ != nullptr) cudaFree(p_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) cudaFree(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

StatusOr<PinnedBuffer> PinnedBuffer::create(size_t bytes) {
  PinnedBuffer b;
  b.bytes_ = bytes == 0 ? 64 : bytes;
  SERF_CUDA(cudaMallocHost(&b.p_, b.bytes_));
  return b;
}

PinnedBuffer::~PinnedBuffer() {
  if (p_ != nullptr) cudaFreeHost(p_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

StatusOr<TensorDesc> make_nchw_desc(int c, int h, int w) {
  TensorDesc d;
  SERF_CUDNN(cudnnCreateTensorDescriptor(d.out()));
  SERF_CUDNN(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c, h, w));
  return d;
}

}  // namespace serf::engine::cuda
