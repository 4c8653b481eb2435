#pragma once
// Fully connected layers, y = W x + b (optionally relu), by hand-written AVX-512 kernels. gemv_f32:
// batch 1 on W plain [out, in] row-major (the engine runs gemm_f32 below on packed panels at every
// batch; gemv_f32 stays as the plain-row baseline of bench/fc_bench). Why not oneDNN's inner
// product: at batch 1 its jit GEMV streams the
// weights at 72-85 % of a STREAM triad on this project's machine, this kernel at 89-105 %
// (bench/fc_bench, docs/engine.md). It reads eight rows per pass, eight weight streams in
// flight at once and each load of x feeding eight FMAs, and gives each row its own accumulator
// summed in the same order whatever the row range, so a rank's slice of rows matches the unsliced
// layer bit for bit. Its order: 16 lane sums, lane l over columns l, l + 16,
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

// Any batch, batch 1 included (what the engine runs): Y = X W^T + b for `batch` input rows X
// [batch, in] and outputs Y [batch, out], both row-major, with W given as `panels`
// (pack_gemm_panels): the outputs in panels of 32, each stored input by input, so that a register
// tile of up to 12 batch rows x 32 outputs multiplies one load of 16 weights by a broadcast input
// (the outer-product form), and the weights are read from memory once per batch in one linear
// stream. The panels do not depend on the batch, so one packed copy serves every b. `threads`
// split the output panels, never the batch. Each output sums its inputs in blocks of 128, each
// block by fused multiply-adds in input order from 0, the block sums in order, then the bias:
// the same at every b, T and slice of outputs, so a row of a batch equals the same input alone,
// and a rank's slice the whole layer, bit for bit (tests/engine/gemv_test.cc). That order is not
// gemv_f32's (its values differ in the last bits).
void gemm_f32(const float* panels, const float* x, const float* b, float* y, int64_t out,
              int64_t in, int64_t batch, bool relu, int threads);

// Floats of gemm_f32's panels for W [out, in]: out rounded up to a multiple of 32, times in.
int64_t gemm_panel_floats(int64_t out, int64_t in);

// W [out, in] row-major into gemm_panel_floats(out, in) floats at `panels`: outputs in panels of
// 32 (the last zero-padded), panels in sets of 8 (the last set as many as are left), each set
// block by block (128 inputs, the last block what is left), each block panel by panel, each
// panel's block input by input with its 32 outputs side by side: [set][block][panel][k][32], the
// order gemm_f32 walks them.
void pack_gemm_panels(const float* w, int64_t out, int64_t in, float* panels);

}  // namespace serf::engine
