#include "engine/cpu/gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "engine/cpu/aligned_floats.h"

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
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchFloats), _MM_HINT_T0);
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

// A batch (gemm_f32). A register tile holds R weight rows x C batch rows of accumulators (8 x 3:
// 24 of the 32 zmm registers, 11 loads per 24 FMAs). The weights are walked once per batch, a
// group of R rows at a time and, within it, in blocks of kBlock columns: the tile with the
// batch's first C rows reads a block from memory and copies it into a contiguous per-thread pack
// (R x kBlock floats: 16 KiB; the R rows themselves lie 8-32 KiB apart and share L1 sets), and
// the batch's other tiles read the pack from L1, so only the first touch costs memory bandwidth.
// The next block's lines are prefetched once each, spread over all of the block's tiles so that
// memory streams while the FMAs run. Between blocks the partial sums wait in a per-thread buffer
// as whole vectors, so every (row, input) pair sums its lanes in the GEMV's order and a row of
// the batch equals the same input alone bit for bit. Hot in cache, the kernel ran at 90-103
// GFLOP/s of thread CPU time at b = 30-32 against a 92-99 GFLOP/s FMA loop (bench/fma_peak.h).
constexpr int kTileRows = 8;
constexpr int kTileBatch = 3;
constexpr int64_t kBlock = 512;

struct Tile {
  const float* w;      // the group's first weight row, column 0
  const float* ahead;  // the next block in the walk (row 0, its first column)
  int64_t pf_begin;    // this tile prefetches lines [pf_begin, pf_end) of `ahead`, row-major
  int64_t pf_end;      // (kBlock / 16 lines a row), pf_per a column step
  int pf_per;
  const float* x;  // the tile's first batch row, column 0
  float* acc;      // partial sums of (row 0, batch row 0): [R][batch][16]
  float* pack;     // the block's weights, [kBlock / 16][R][16]: one contiguous 16 KiB
  int64_t in;
  int64_t batch;
};

// Columns [k0, k1) of one tile (k1 - k0 a multiple of 16), then the masked tail when `tail` is
// not zero. `first` zeroes the sums instead of loading them; `last` finishes the rows into y.
template <int R, int C, bool kFill>
__attribute__((target("avx512f,fma"))) void tile(const Tile& t, int64_t k0, int64_t k1,
                                                 __mmask16 tail, bool first, bool last,
                                                 const float* b, float* y, int64_t ldy, int64_t o,
                                                 bool relu) {
  __m512 a[R][C];
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      a[j][c] = first ? _mm512_setzero_ps() : _mm512_load_ps(t.acc + (j * t.batch + c) * 16);
  }
  int64_t q = t.pf_begin;
  for (int64_t i = k0; i < k1; i += 16) {
    for (int s = 0; s < t.pf_per && q < t.pf_end; ++s, ++q) {
      const float* line = t.ahead + (q / (kBlock / 16)) * t.in + (q % (kBlock / 16)) * 16;
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    }
    __m512 xv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(t.x + c * t.in + i);
#pragma GCC unroll 8
    for (int j = 0; j < R; ++j) {
      float* packed = t.pack + ((i - k0) / 16 * R + j) * 16;
      __m512 wv;
      if (kFill) {
        wv = _mm512_loadu_ps(t.w + j * t.in + i);
        _mm512_store_ps(packed, wv);
      } else {
        wv = _mm512_load_ps(packed);
      }
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a[j][c] = _mm512_fmadd_ps(wv, xv[c], a[j][c]);
    }
  }
  if (tail != 0) {
    __m512 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_ps(tail, t.x + c * t.in + k1);
    for (int j = 0; j < R; ++j) {
      const __m512 wv = _mm512_maskz_loadu_ps(tail, t.w + j * t.in + k1);
      for (int c = 0; c < C; ++c) a[j][c] = _mm512_fmadd_ps(wv, xv[c], a[j][c]);
    }
  }
  for (int j = 0; j < R; ++j) {
    for (int c = 0; c < C; ++c) {
      if (last) {
        finish(a[j][c], b, y + c * ldy, o + j, relu);
      } else {
        _mm512_store_ps(t.acc + (j * t.batch + c) * 16, a[j][c]);
      }
    }
  }
}

// Rows [o, o + R) of W against the whole batch, block by block.
template <int R>
void gemm_group(const float* w, const float* x, const float* b, float* y, float* acc, int64_t o,
                int64_t out, int64_t in, int64_t batch, bool relu) {
  const int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
  const int64_t blocks = std::max<int64_t>(1, (full + kBlock - 1) / kBlock);
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t k0 = k * kBlock, k1 = std::min(full, k0 + kBlock);
    const bool first = k == 0, last = k + 1 == blocks;
    const __mmask16 mask = last ? tail : __mmask16{0};
    // The next block: later in these rows, or at the start of the next group's rows (a prefetch
    // past the weights' end or into another thread's rows is harmless). Into L1, one block
    // ahead: two blocks ahead (32 KiB beside the 16 KiB pack) or into L2 only ran 5-15 % slower
    // on ranking_mlp's fc2 at b = 8 (CPU time, /tmp probe), no software prefetch 15 % slower.
    const float* ahead = k + 1 < blocks ? w + o * in + (k + 1) * kBlock
                                        : w + (o + R) * in + (k + 1 - blocks) * kBlock;
    // The ahead block's lines spread over all of this block's tiles, so that memory streams
    // while the FMAs run instead of in a burst at the first tile.
    const int64_t tiles = (batch + kTileBatch - 1) / kTileBatch, lines = R * (kBlock / 16);
    const int per = static_cast<int>((lines + tiles * (kBlock / 16) - 1) / (tiles * (kBlock / 16)));
    for (int64_t n = 0, m = 0; n < batch; n += kTileBatch, ++m) {
      const int64_t pf = m * per * (kBlock / 16);
      const Tile t{
          w + o * in, ahead,      std::min(pf, lines), std::min(pf + per * (kBlock / 16), lines),
          per,        x + n * in, acc + n * 16,        acc + kTileRows * batch * 16,
          in,         batch};
      float* yn = y + n * out;
      if (batch - n >= kTileBatch) {
        if (n == 0) {
          tile<R, kTileBatch, true>(t, k0, k1, mask, first, last, b, yn, out, o, relu);
        } else {
          tile<R, kTileBatch, false>(t, k0, k1, mask, first, last, b, yn, out, o, relu);
        }
      } else if (batch - n == 2) {
        if (n == 0) {
          tile<R, 2, true>(t, k0, k1, mask, first, last, b, yn, out, o, relu);
        } else {
          tile<R, 2, false>(t, k0, k1, mask, first, last, b, yn, out, o, relu);
        }
      } else if (n == 0) {
        tile<R, 1, true>(t, k0, k1, mask, first, last, b, yn, out, o, relu);
      } else {
        tile<R, 1, false>(t, k0, k1, mask, first, last, b, yn, out, o, relu);
      }
    }
  }
}

// The partial sums of one group, [kTileRows][batch][16] floats, then the packed block, per
// thread, grown on demand (allocated at a slot's first batch, then reused: the request path
// allocates nothing after it).
float* partial_sums(int64_t batch) {
  thread_local AlignedFloats buffer;
  const int64_t want = kTileRows * batch * 16 + kTileRows * kBlock;
  if (buffer.size() < want) buffer = AlignedFloats(want);
  return buffer.data();
}

void gemm_rows(const float* w, const float* x, const float* b, float* y, int64_t begin, int64_t end,
               int64_t out, int64_t in, int64_t batch, bool relu) {
  float* acc = partial_sums(batch);
  int64_t o = begin;
  for (; o + kTileRows <= end; o += kTileRows)
    gemm_group<kTileRows>(w, x, b, y, acc, o, out, in, batch, relu);
  for (; o < end; ++o) gemm_group<1>(w, x, b, y, acc, o, out, in, batch, relu);
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
