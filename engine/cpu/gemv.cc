#include "engine/cpu/gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

namespace serf::engine {
namespace {

constexpr int kRows = 4;  // rows per pass: 4 beat 1 and 8 in bench/fc_bench

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

// Rows [begin, end): kRows at a time, then one at a time; every row the same arithmetic.
__attribute__((target("avx512f,fma"))) void gemv_rows(const float* w, const float* x,
                                                     const float* b, float* y, int64_t begin,
                                                     int64_t end, int64_t in, bool relu) {
  const int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
  int64_t o = begin;
  for (; o + kRows <= end; o += kRows) {
    const float* r = w + o * in;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + in + i), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r + 2 * in + i), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r + 3 * in + i), xv, a3);
    }
    if (tail != 0) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + full), xv, a0);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + in + full), xv, a1);
      a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + 2 * in + full), xv, a2);
      a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + 3 * in + full), xv, a3);
    }
    finish(a0, b, y, o, relu);
    finish(a1, b, y, o + 1, relu);
    finish(a2, b, y, o + 2, relu);
    finish(a3, b, y, o + 3, relu);
  }
  for (; o < end; ++o) {
    const float* r = w + o * in;
    __m512 a = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16)
      a = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i), a);
    if (tail != 0)
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, r + full),
                          _mm512_maskz_loadu_ps(tail, x + full), a);
    finish(a, b, y, o, relu);
  }
}

}  // namespace

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
