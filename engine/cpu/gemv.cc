#include "engine/cpu/gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

namespace serf::engine {
namespace {

// Rows per pass: eight concurrent weight streams keep more cache-line fills in flight than four
// (bench/fc_bench on a Zen 4 core: 4 rows 78-90 % of triad, 8 rows 90-108 %, 12 and 16 fewer).
constexpr int kRows = 8;
// Each stream also prefetches into L2 4 KiB ahead: the hardware prefetcher stops at 4 KiB page
// ends, the software one does not. A prefetch past the weights' end is harmless (no fault).
constexpr int64_t kPrefetchFloats = 1024;

__attribute__((target("avx512f,fma"))) inline void finish(__m512 acc, const float* b, float* y,
                                                          int64_t row, bool relu) {
  // A fixed pairwise order (_mm512_reduce_add_ps trips GCC 12's -Wmaybe-uninitialized).
  alignas(64) float t[16];
  _mm512_store_ps(t, acc);
  for (int width = 8; width > 0; width /= 2) {
    for (int i = 0; i < width; ++i) t[i] += t[i + width];
  }
  const float v = t[0] + b[row];
  y[row] = relu ? std::max(v, 0.0f) : v;
}

// Rows [begin, end) R at a time while R fit; returns the first row not done. Every row has its
// own accumulator over the same column order, so R does not change a row's value.
template <int R>
__attribute__((target("avx512f,fma"))) int64_t gemv_groups(const float* w, const float* x,
                                                           const float* b, float* y, int64_t begin,
                                                           int64_t end, int64_t in, bool relu) {
  const int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
  int64_t o = begin;
  for (; o + R <= end; o += R) {
    const float* r = w + o * in;
    __m512 a[R];
    for (int j = 0; j < R; ++j) a[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      for (int j = 0; j < R; ++j) {
        const float* p = r + j * in + i;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchFloats), _MM_HINT_T1);
        a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(p), xv, a[j]);
      }
    }
    if (tail != 0) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
      for (int j = 0; j < R; ++j)
        a[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + j * in + full), xv, a[j]);
    }
    for (int j = 0; j < R; ++j) finish(a[j], b, y, o + j, relu);
  }
  return o;
}

void gemv_rows(const float* w, const float* x, const float* b, float* y, int64_t begin, int64_t end,
               int64_t in, bool relu) {
  const int64_t o = gemv_groups<kRows>(w, x, b, y, begin, end, in, relu);
  gemv_groups<1>(w, x, b, y, o, end, in, relu);
}

// A batch: rows [begin, end) of W, R at a time, against C input rows at a time (R x C
// accumulators). The first sweep over a group of R rows streams them from memory; the group
// (R x in floats: 64 KiB at in = 2048, 256 KiB at 8192) then stays in L2 for the batch's other
// sweeps, so W is read from memory once per batch. Each (row, input) pair sums in gemv_groups'
// order, so a row of the batch equals the same input alone bit for bit.
template <int R, int C>
__attribute__((target("avx512f,fma"))) void gemm_group(const float* r, const float* x, int64_t ldx,
                                                       const float* b, float* y, int64_t ldy,
                                                       int64_t o, int64_t in, bool relu) {
  const int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
  __m512 a[R][C];
  for (int j = 0; j < R; ++j) {
    for (int c = 0; c < C; ++c) a[j][c] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < full; i += 16) {
    __m512 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(x + c * ldx + i);
    for (int j = 0; j < R; ++j) {
      const float* p = r + j * in + i;
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchFloats), _MM_HINT_T1);
      const __m512 wv = _mm512_loadu_ps(p);
      for (int c = 0; c < C; ++c) a[j][c] = _mm512_fmadd_ps(wv, xv[c], a[j][c]);
    }
  }
  if (tail != 0) {
    __m512 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_ps(tail, x + c * ldx + full);
    for (int j = 0; j < R; ++j) {
      const __m512 wv = _mm512_maskz_loadu_ps(tail, r + j * in + full);
      for (int c = 0; c < C; ++c) a[j][c] = _mm512_fmadd_ps(wv, xv[c], a[j][c]);
    }
  }
  for (int j = 0; j < R; ++j) {
    for (int c = 0; c < C; ++c) finish(a[j][c], b, y + c * ldy, o + j, relu);
  }
}

template <int R>
void gemm_sweeps(const float* w, const float* x, const float* b, float* y, int64_t o, int64_t in,
                 int64_t out, int64_t batch, bool relu) {
  int64_t n = 0;
  for (; n + 2 <= batch; n += 2) gemm_group<R, 2>(w + o * in, x + n * in, in, b, y + n * out, out, o, in, relu);
  if (n < batch) gemm_group<R, 1>(w + o * in, x + n * in, in, b, y + n * out, out, o, in, relu);
}

void gemm_rows(const float* w, const float* x, const float* b, float* y, int64_t begin, int64_t end,
               int64_t out, int64_t in, int64_t batch, bool relu) {
  int64_t o = begin;
  for (; o + kRows <= end; o += kRows) gemm_sweeps<kRows>(w, x, b, y, o, in, out, batch, relu);
  for (; o < end; ++o) gemm_sweeps<1>(w, x, b, y, o, in, out, batch, relu);
}

}  // namespace

void gemm_f32(const float* w, const float* x, const float* b, float* y, int64_t out, int64_t in,
              int64_t batch, bool relu, int threads) {
  if (threads <= 1 || out < 2 * kRows) {
    gemm_rows(w, x, b, y, 0, out, out, in, batch, relu);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t groups = (out + kRows - 1) / kRows;
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t begin = std::min(out, groups * t / n * kRows);
    const int64_t end = std::min(out, groups * (t + 1) / n * kRows);
    gemm_rows(w, x, b, y, begin, end, out, in, batch, relu);
  }
}

bool gemv_supported() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"); }

void gemv_f32(const float* w, const float* x, const float* b, float* y, int64_t out, int64_t in,
              bool relu, int threads) {
  if (threads <= 1 || out < 2 * kRows) {
    gemv_rows(w, x, b, y, 0, out, in, relu);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // Contiguous blocks of whole kRows groups: each thread streams one part of W.
    const int64_t groups = (out + kRows - 1) / kRows;
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t begin = std::min(out, groups * t / n * kRows);
    const int64_t end = std::min(out, groups * (t + 1) / n * kRows);
    gemv_rows(w, x, b, y, begin, end, in, relu);
  }
}

}  // namespace serf::engine
