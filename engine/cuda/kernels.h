#pragma once
// Internal to engine/cuda: the hand-written kernels (kernels.cu). Everything else is cuDNN/cuBLAS.

#include <cuda_runtime.h>

#include <cstdint>

namespace serf::engine::cuda {

// y[c * per_channel + j] = act(y[c * per_channel + j] + bias[c]) for c < channels, j < per_channel,
// with act = relu when `relu`, identity otherwise: the bias (and fused relu) of conv2d and
// fully_connected in one pass. Returns the launch error (cudaGetLastError).
cudaError_t launch_bias_act(float* y, const float* bias, int channels, int64_t per_channel, bool relu,
                            cudaStream_t stream);

}  // namespace serf::engine::cuda
