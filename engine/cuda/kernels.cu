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
                                      const float* shift, int64_t n, int channels,
                                      int64_t per_channel, Activation act) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t c = i / per_channel % channels;
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

// In each block of C x area floats (block_floats), y's channel j * groups + i is x's channel
// i * (C / groups) + j.
__global__ void channel_shuffle_kernel(const float* x, float* y, int64_t n, int64_t block_floats,
                                       int groups, int per_group, int64_t area) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < n; o += stride) {
    const int64_t block = o / block_floats, at = o % block_floats;
    const int64_t c = at / area;
    const int64_t i = c % groups, j = c / groups;
    y[o] = x[block * block_floats + (i * per_group + j) * area + at % area];
  }
}

// y[(r * C + c) * area + j] = x[(c * batch + r) * area + j].
__global__ void rows_of_channel_major_kernel(const float* x, float* y, int64_t n, int64_t batch,
                                             int64_t channels, int64_t area) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  const int64_t row_floats = channels * area;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < n; o += stride) {
    const int64_t r = o / row_floats, at = o % row_floats;
    const int64_t c = at / area, j = at % area;
    y[o] = x[(c * batch + r) * area + j];
  }
}

__global__ void prelu_kernel(const float* x, float* y, const float* slopes, int64_t n, int channels,
                             int64_t per_channel) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : slopes[i / per_channel % channels] * v;
  }
}

// Row or column k of the padded output (k - before in the input's coordinates) read from the
// input's index: its mirror without the edge, or the edge (a reflect pad is below the size).
__device__ inline int padded_source(int k, int before, int size, bool reflect) {
  int i = k - before;
  if (i < 0) i = reflect ? -i : 0;
  if (i >= size) i = reflect ? 2 * (size - 1) - i : size - 1;
  return i;
}

__global__ void pad_kernel(const float* x, float* y, int64_t n, int h, int w, int top, int left,
                           int out_h, int out_w, bool reflect) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  const int64_t out_area = int64_t{out_h} * out_w;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < n; o += stride) {
    const int64_t c = o / out_area;
    const int r = static_cast<int>(o % out_area / out_w), q = static_cast<int>(o % out_w);
    const int i = padded_source(r, top, h, reflect), j = padded_source(q, left, w, reflect);
    y[o] = x[(c * h + i) * w + j];
  }
}

// The bilinear source coordinate of output index k at integer scale s: half-pixel centres,
// clamped at 0 below (PyTorch's align_corners=False); `lo` and `hi` are the two neighbours.
__device__ inline float bilinear_source(int k, int s, int size, int* lo, int* hi) {
  float at = (k + 0.5f) / s - 0.5f;
  if (at < 0.0f) at = 0.0f;
  *lo = min(static_cast<int>(at), size - 1);
  *hi = min(*lo + 1, size - 1);
  return at - *lo;
}

__global__ void upsample_kernel(const float* x, float* y, int64_t n, int h, int w, int sh, int sw,
                                bool bilinear) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  const int out_h = h * sh, out_w = w * sw;
  const int64_t out_area = int64_t{out_h} * out_w;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < n; o += stride) {
    const float* plane = x + o / out_area * h * w;
    const int r = static_cast<int>(o % out_area / out_w), q = static_cast<int>(o % out_w);
    if (!bilinear) {
      y[o] = plane[r / sh * w + q / sw];
      continue;
    }
    int r0 = 0, r1 = 0, q0 = 0, q1 = 0;
    const float fr = bilinear_source(r, sh, h, &r0, &r1);
    const float fq = bilinear_source(q, sw, w, &q0, &q1);
    const float top = plane[r0 * w + q0] * (1.0f - fq) + plane[r0 * w + q1] * fq;
    const float bottom = plane[r1 * w + q0] * (1.0f - fq) + plane[r1 * w + q1] * fq;
    y[o] = top * (1.0f - fr) + bottom * fr;
  }
}

// The sum of every thread's v in the block (kThreads threads), returned to all of them.
__device__ float block_sum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

// Where feature f of row r is (kernels.h, launch_layer_norm).
__device__ inline int64_t feature_at(int64_t r, int64_t f, int64_t area, int64_t interleave) {
  return f / area * area * interleave + r * area + f % area;
}

// Block r, row r: the mean, then the variance about it (two passes, as oneDNN), then the affine
// map.
__global__ void layer_norm_kernel(const float* x, float* y, const float* weight, const float* bias,
                                  int64_t n, int64_t in_area, int64_t out_area, int64_t interleave,
                                  float epsilon) {
  __shared__ float shared[kThreads];
  const int64_t r = blockIdx.x;
  float part = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    part += x[feature_at(r, i, in_area, interleave)];
  }
  const float mean = block_sum(part, shared) / static_cast<float>(n);
  part = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float d = x[feature_at(r, i, in_area, interleave)] - mean;
    part += d * d;
  }
  const float inv = rsqrtf(block_sum(part, shared) / static_cast<float>(n) + epsilon);
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float v = x[feature_at(r, i, in_area, interleave)];
    y[feature_at(r, i, out_area, interleave)] = (v - mean) * inv * weight[i] + bias[i];
  }
}

}  // namespace

cudaError_t launch_channel_affine(const float* x, float* y, const float* scale, const float* shift,
                                  int64_t rows, int channels, int64_t per_channel, Activation act,
                                  cudaStream_t stream) {
  const int64_t n = rows * channels * per_channel;
  if (n <= 0) return cudaSuccess;
  channel_affine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, scale, shift, n, channels,
                                                                per_channel, act);
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

cudaError_t launch_channel_shuffle(const float* x, float* y, int64_t rows, int channels, int groups,
                                   int64_t area, cudaStream_t stream) {
  const int64_t block_floats = int64_t{channels} * area, n = rows * block_floats;
  if (n <= 0 || groups <= 0) return cudaSuccess;
  channel_shuffle_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, block_floats, groups,
                                                                 channels / groups, area);
  return cudaGetLastError();
}

cudaError_t launch_rows_of_channel_major(const float* x, float* y, int64_t batch, int64_t channels,
                                         int64_t area, cudaStream_t stream) {
  const int64_t n = batch * channels * area;
  if (n <= 0) return cudaSuccess;
  rows_of_channel_major_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, batch, channels,
                                                                       area);
  return cudaGetLastError();
}

cudaError_t launch_prelu(const float* x, float* y, const float* slopes, int64_t rows, int channels,
                         int64_t per_channel, cudaStream_t stream) {
  const int64_t n = rows * channels * per_channel;
  if (n <= 0) return cudaSuccess;
  prelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, slopes, n, channels, per_channel);
  return cudaGetLastError();
}

cudaError_t launch_pad(const float* x, float* y, int64_t planes, int h, int w, int top, int left,
                       int out_h, int out_w, bool reflect, cudaStream_t stream) {
  const int64_t n = planes * out_h * out_w;
  if (n <= 0) return cudaSuccess;
  pad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, h, w, top, left, out_h, out_w,
                                                     reflect);
  return cudaGetLastError();
}

cudaError_t launch_upsample(const float* x, float* y, int64_t planes, int h, int w, int sh, int sw,
                            bool bilinear, cudaStream_t stream) {
  const int64_t n = planes * h * sh * w * sw;
  if (n <= 0) return cudaSuccess;
  upsample_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, h, w, sh, sw, bilinear);
  return cudaGetLastError();
}

cudaError_t launch_layer_norm(const float* x, float* y, const float* weight, const float* bias,
                              int64_t batch, int64_t n, int64_t in_area, int64_t out_area,
                              int64_t interleave, float epsilon, cudaStream_t stream) {
  if (n <= 0 || batch <= 0) return cudaSuccess;
  layer_norm_kernel<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(
      x, y, weight, bias, n, in_area, out_area, interleave, epsilon);
  return cudaGetLastError();
}

}  // namespace serf::engine::cuda
