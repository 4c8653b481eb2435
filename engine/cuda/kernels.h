#pragma once
// Internal to engine/cuda: the hand-written kernels (kernels.cu). Everything else is cuDNN/cuBLAS.

#include <cuda_runtime.h>

#include <cstdint>

namespace serf::engine::cuda {

// An element-wise activation: none, relu, clip to [lo, hi] (ReLU6: [0, 6]), sigmoid,
// hardsigmoid min(max(lo * x + hi, 0), 1) (lo, hi: alpha, beta), hardswish x * relu6(x + 3) / 6,
// silu x * sigmoid(x), leaky relu (slope lo below 0), tanh, elu lo * (exp(x) - 1) below 0, or
// gelu x * (1 + erf(x / sqrt 2)) / 2.
enum class Act {
  kNone,
  kRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kSilu,
  kLeakyRelu,
  kTanh,
  kElu,
  kGelu
};
struct Activation {
  Act act = Act::kNone;
  float lo = 0.0f, hi = 0.0f;
};

// Channel-local kernels see a tensor part as `rows` blocks of `channels` x `per_channel` floats:
// a batch in rows (NCHW, N = b) is b blocks of H*W per channel, channel-major storage ([C][b][H*W],
// K > 1, engine/layer_steps.h) one block of b*H*W per channel.
//
// y[i] = act(x[i] * scale[c] + shift[c]) with c = (i / per_channel) % channels, for i < rows *
// channels * per_channel; a null scale means 1, a null shift 0. x may equal y. The bias (and
// fused activation) of conv2d and fully_connected, batchnorm (as a per-channel scale and shift)
// and standalone activations (rows = channels = 1) in one kernel. Returns the launch error.
cudaError_t launch_channel_affine(const float* x, float* y, const float* scale, const float* shift,
                                  int64_t rows, int channels, int64_t per_channel, Activation act,
                                  cudaStream_t stream);

// y[i] = a[i] + b[i] for i < n (y may equal a or b).
cudaError_t launch_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);

// y[i] = a[i] * b[i / per_b] for i < n: per_b = 1 multiplies element-wise, per_b = H * W scales
// each channel of a by one value of b (squeeze-and-excitation). y may equal a.
cudaError_t launch_mul(const float* a, const float* b, float* y, int64_t n, int64_t per_b,
                       cudaStream_t stream);

// ShuffleNet's channel shuffle of `rows` blocks of C x area floats (x != y): in each, y's channel
// j * groups + i is x's channel i * (C / groups) + j.
cudaError_t launch_channel_shuffle(const float* x, float* y, int64_t rows, int channels, int groups,
                                   int64_t area, cudaStream_t stream);

// Channel-major [C][b][area] into rows [b][C][area] (x != y): the flattened input of a
// fully_connected layer as the b x (C * area) matrix its GEMM reads.
cudaError_t launch_rows_of_channel_major(const float* x, float* y, int64_t batch, int64_t channels,
                                         int64_t area, cudaStream_t stream);

// The channel-local layers users' networks add (issue 15), on this rank's channels (x != y):
// prelu: y = x above 0, slopes[c] * x below (one slope per channel; rows, channels and
// per_channel as for launch_channel_affine).
cudaError_t launch_prelu(const float* x, float* y, const float* slopes, int64_t rows, int channels,
                         int64_t per_channel, cudaStream_t stream);
// pad and upsample work on `planes` contiguous h x w planes (channels times rows, in either
// layout: every (channel, row) plane is contiguous).
// pad: the input in the middle of out_h x out_w, `top` rows above and `left` columns before it;
// the border from the input's mirror image without its edge (reflect, PyTorch's
// ReflectionPad2d) or its edge repeated (ReplicationPad2d).
cudaError_t launch_pad(const float* x, float* y, int64_t planes, int h, int w, int top, int left,
                       int out_h, int out_w, bool reflect, cudaStream_t stream);
// upsample by integers sh, sw: output pixel (i, j) is input (i / sh, j / sw) rounded down
// (nearest), or the bilinear mix at ((i + 1/2) / sh - 1/2, (j + 1/2) / sw - 1/2) clamped to the
// input (PyTorch's align_corners=False).
cudaError_t launch_upsample(const float* x, float* y, int64_t planes, int h, int w, int sh, int sw,
                            bool bilinear, cudaStream_t stream);
// layer_norm of each of `batch` rows of n features: (x - mean) / sqrt(var + epsilon) * weight +
// bias, the biased variance (PyTorch's LayerNorm); one block per row. Feature f of row r of x is
// at (f / in_area) * in_area * interleave + r * in_area + f % in_area, of y likewise with
// out_area: in rows both areas are n and interleave 1 (r * n + f); channel-major, interleave is
// batch, in_area the area x is stored with ([C][b][area]) and out_area 1 (y is [F][b]).
cudaError_t launch_layer_norm(const float* x, float* y, const float* weight, const float* bias,
                              int64_t batch, int64_t n, int64_t in_area, int64_t out_area,
                              int64_t interleave, float epsilon, cudaStream_t stream);

}  // namespace serf::engine::cuda
