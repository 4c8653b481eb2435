#include "engine/cuda/kernels.h"

namespace serf::engine::cuda {
namespace {

template <bool kRelu>
__global__ void bias_act_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t n,
                                int64_t per_channel) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = y[i] + bias[i / per_channel];
    y[i] = kRelu ? fmaxf(v, 0.0f) : v;
  }
}

}  // namespace

cudaError_t launch_bias_act(float* y, const float* bias, int channels, int64_t per_channel, bool relu,
                            cudaStream_t stream) {
  const int64_t n = int64_t{channels} * per_channel;
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  // Grid-stride: enough blocks to fill an H100 (132 SMs x 8 blocks), fewer for small layers.
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 1056 ? wanted : 1056);
  if (relu) {
    bias_act_kernel<true><<<blocks, kThreads, 0, stream>>>(y, bias, n, per_channel);
  } else {
    bias_act_kernel<false><<<blocks, kThreads, 0, stream>>>(y, bias, n, per_channel);
  }
  return cudaGetLastError();
}

}  // namespace serf::engine::cuda
