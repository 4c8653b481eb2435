#pragma once
// Batch-1 fully connected layer, y = W x + b (optionally relu), W plain [out, in] row-major: a
// hand-written AVX-512 GEMV. Why not oneDNN's inner product: at batch 1 its jit GEMV streams the
// weights at 72-85 % of a STREAM triad on this project's machine, this kernel at 89-105 %
// (bench/fc_bench, docs/engine.md). It reads eight rows per pass, eight weight streams in
// flight at once and each load of x feeding eight FMAs, and gives each row its own accumulator
// summed in the same order whatever the row range, so a rank's slice of rows matches the unsliced
// layer bit for bit.

#include <cstdint>

namespace serf::engine {

// True when the CPU runs the kernel (AVX-512F); otherwise use oneDNN.
bool gemv_supported();

// Rows [0, out) of y = W x + b, relu when asked. `threads` OpenMP threads split the rows in
// contiguous blocks; threads == 1 opens no parallel region. Requires gemv_supported().
void gemv_f32(const float* w, const float* x, const float* b, float* y, int64_t out, int64_t in,
              bool relu, int threads);

// A batch: Y = X W^T + b for `batch` input rows X [batch, in] and outputs Y [batch, out], both
// row-major. W is read from memory once per batch (8 rows x 512 columns at a time, packed into L1
// and swept by 8 x 3 register tiles over the batch); `threads` split the output columns (rows of
// W), never the batch. Row n of Y equals gemv_f32 on row n of X bit for bit.
void gemm_f32(const float* w, const float* x, const float* b, float* y, int64_t out, int64_t in,
              int64_t batch, bool relu, int threads);

}  // namespace serf::engine
