#include "engine/cuda/kernels.h"

namespace serf::engine::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride: enough blocks to fill an H100 (132 SMs x 8 blocks), fewer for small layers.
int blocks_for(int64_t n) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < 1056 ? wanted : 1056);
}

__device__ inline float activate(float v, Activation a) {
  switch (a.act) {
    case Act::kRelu:
      return fmaxf(v, 0.0f);
    case Act::kClip:
      return fminf(fmaxf(v, a.lo), a.hi);
    case Act::kSigmoid:
      return 1.0f / (1.0f + expf(-v));
    case Act::kHardSigmoid:
      return fminf(fmaxf(a.lo * v + a.hi, 0.0f), 1.0f);
    case Act::kHardSwish:
      return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Act::kSilu:
      return v / (1.0f + expf(-v));
    case Act::kLeakyRelu:
      return v >= 0.0f ? v : a.lo * v;
    case Act::kTanh:
      return tanhf(v);
    case Act::kElu:
      return v > 0.0f ? v : a.lo * expm1f(v);
    case Act::kGelu:
      return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case Act::kNone:
      break;
  }
  return v;
}

__global__ void channel_affine_kernel(const float* x, float* y, const float* scale,
                                      const float* shift, int64_t n, int64_t per_channel,
                                      Activation act) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t c = i / per_channel;
    float v = x[i];
    if (scale != nullptr) v *= scale[c];
    if (shift != nullptr) v += shift[c];
    y[i] = activate(v, act);
  }
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a[i] + b[i];
  }
}

__global__ void mul_kernel(const float* a, const float* b, float* y, int64_t n, int64_t per_b) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a[i] * b[i / per_b];
  }
}

// y's channel j * groups + i is x's channel i * (C / groups) + j, each of `area` floats.
__global__ void channel_shuffle_kernel(const float* x, float* y, int64_t n, int groups,
                                       int per_group, int64_t area) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < n; o += stride) {
    const int64_t c = o / area;
    const int64_t i = c % groups, j = c / groups;
    y[o] = x[(i * per_group + j) * area + o % area];
  }
}

}  // namespace

cudaError_t launch_channel_affine(const float* x, float* y, const float* scale, const float* shift,
                                  int channels, int64_t per_channel, Activation act,
                                  cudaStream_t stream) {
  const int64_t n = int64_t{channels} * per_channel;
  if (n <= 0) return cudaSuccess;
  channel_affine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, scale, shift, n, per_channel,
                                                                act);
  return cudaGetLastError();
}

cudaError_t launch_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t launch_mul(const float* a, const float* b, float* y, int64_t n, int64_t per_b,
                       cudaStream_t stream) {
  if (n <= 0 || per_b <= 0) return cudaSuccess;
  mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n, per_b);
  return cudaGetLastError();
}

cudaError_t launch_channel_shuffle(const float* x, float* y, int channels, int groups, int64_t area,
                                   cudaStream_t stream) {
  const int64_t n = int64_t{channels} * area;
  if (n <= 0 || groups <= 0) return cudaSuccess;
  channel_shuffle_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, groups, channels / groups,
                                                                 area);
  return cudaGetLastError();
}

}  // namespace serf::engine::cuda
