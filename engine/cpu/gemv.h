#pragma once
// Batch-1 fully connected layer, y = W x + b (optionally relu), W plain [out, in] row-major: a
// hand-written AVX-512 GEMV. Why not oneDNN's inner product: at batch 1 its jit GEMV streams the
// weights at 72-85 % of a STREAM triad on this project's machine, this kernel at 89-105 %
// (bench/fc_bench, docs/engine.md). It reads eight rows per pass, eight weight streams in
// flight at once and each load of x feeding eight FMAs, and gives each row its own accumulator
// summed in the same order whatever the row range, so a rank's slice of rows matches the unsliced
// layer bit for bit. The order, in every kernel here: 16 lane sums, lane l over columns l, l + 16,
// ... by fused multiply-adds (0 x 0 past `in`), then lane l plus lane l + 8 (l < 8), + 4, + 2,
// + 1, then the bias (tests/engine/gemv_test.cc checks it against a scalar loop).

#include <cstdint>

namespace serf::engine {

// True when the CPU runs the kernel (AVX-512F); otherwise use oneDNN.
bool gemv_supported();

// Rows [0, out) of y = W x + b, relu when asked. `threads` OpenMP threads split the rows in
// contiguous blocks; threads == 1 opens no parallel region. Requires gemv_supported().
void gemv_f32(const float* w, const float* x, const float* b, float* y, int64_t out, int64_t in,
              bool relu, int threads);

// A batch: Y = X W^T + b for `batch` input rows X [batch, in] and outputs Y [batch, out], both
// row-major, with W given as `panels` (pack_gemm_panels): each group of 8 rows one contiguous
// panel, so that a batch reads W from memory once, in one linear stream (8 rows x 512 columns at
// a time, swept from L1 by 8 x 3 register tiles over the batch; a batch of more than 8 rows whose
// x is 512 KiB or more walks 8 panels at a time in blocks of 256 columns on a packed copy of x, so
// that x stays in the caches); at batch 1, three panels side by side (three streams, faster than
// gemv_f32 on plain rows). The panels do not depend on the
// batch, so one packed copy serves every b. `threads` split the output columns (rows of W),
// never the batch. Row n of Y equals gemv_f32 on row n of X bit for bit.
void gemm_f32(const float* panels, const float* x, const float* b, float* y, int64_t out,
              int64_t in, int64_t batch, bool relu, int threads);

// Floats of gemm_f32's panels for W [out, in]: out x in rounded up to a multiple of 16.
int64_t gemm_panel_floats(int64_t out, int64_t in);

// W [out, in] row-major into gemm_panel_floats(out, in) floats at `panels`: rows in groups of 8
// (the last out % 8 rows one by one), each group's columns in chunks of 16 (the last chunk
// zero-padded) with the group's rows side by side: [in_p / 16][8][16].
void pack_gemm_panels(const float* w, int64_t out, int64_t in, float* panels);

}  // namespace serf::engine
