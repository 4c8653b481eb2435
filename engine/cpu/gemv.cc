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

// A batch (gemm_f32), on weights packed into panels (pack_gemm_panels): a group of R = 8 rows
// (each remaining row alone, R = 1) is one contiguous panel, [in_p / 16][R][16] with the columns
// zero-padded to in_p, a multiple of 16. A register tile holds R weight rows x C batch rows of
// accumulators (8 x 3: 24 of the 32 zmm registers, 11 loads per 24 FMAs). The weights are walked
// once per batch, panel by panel and, within a panel, in blocks of kBlock columns (R x kBlock
// floats: 16 KiB, in L1): the batch's first tile reads the block from memory, the others from L1.
// Why panels: the whole walk is one linear stream (the plain rows were R streams 8-32 KiB apart,
// and the old kernel copied each block into a pack before reuse), which the hardware prefetcher
// follows across pages and the software prefetch below runs ahead of with one pointer. The lines
// kAheadBlocks blocks ahead are prefetched once each, spread over all of the block's tiles, so
// that memory streams while the FMAs run. Between blocks the partial sums wait in a per-thread
// buffer as whole vectors, so every (row, input) pair sums its lanes in the GEMV's order (the
// padding adds 0 x 0 where the GEMV's masked tail does) and a row of the batch equals the same
// input alone bit for bit.
constexpr int kTileRows = 8;
constexpr int kTileBatch = 3;
// Measured on ranking_mlp's fc2 (4096 x 8192) at b = 2..32, T = 1 and 2, under the measurement
// lock (docs/engine.md): 1024-column blocks (32 KiB) ran 5-20 % slower, prefetching two blocks
// ahead into L1 or four into L2 0-15 % slower, than 512 columns one block ahead into L1.
constexpr int64_t kBlock = 512;
constexpr int64_t kAheadBlocks = 1;

int64_t padded(int64_t in) { return (in + 15) / 16 * 16; }

struct Tile {
  const float* w;      // the block in the panel, [chunks][R][16]
  const float* ahead;  // the block kAheadBlocks on in the walk
  int64_t pf_begin;    // this tile prefetches lines [pf_begin, pf_end) of `ahead`,
  int64_t pf_end;      // pf_per a column step
  int pf_per;
  const float* x;  // the tile's first batch row, column 0
  float* acc;      // partial sums of (row 0, batch row 0): [R][batch][16]
  int64_t in;
  int64_t batch;
};

// Columns [k0, k1) of one tile (k1 - k0 a multiple of 16), then one chunk with x masked when
// `tail` is not zero. `first` zeroes the sums instead of loading them; `last` finishes the rows.
template <int R, int C>
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
  const float* wp = t.w;
  for (int64_t i = k0; i < k1; i += 16, wp += R * 16) {
    for (int s = 0; s < t.pf_per && q < t.pf_end; ++s, ++q)
      _mm_prefetch(reinterpret_cast<const char*>(t.ahead + q * 16), _MM_HINT_T0);
    __m512 xv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(t.x + c * t.in + i);
#pragma GCC unroll 8
    for (int j = 0; j < R; ++j) {
      __m512 wv = _mm512_loadu_ps(wp + j * 16);
      // Keep wv in a register: GCC otherwise folds the load into each of the C FMAs (27 loads
      // per 24 FMAs instead of 11); pinned, the tile ran 20-30 % faster hot in L2.
      __asm__("" : "+v"(wv));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a[j][c] = _mm512_fmadd_ps(wv, xv[c], a[j][c]);
    }
  }
  if (tail != 0) {
    __m512 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_ps(tail, t.x + c * t.in + k1);
    for (int j = 0; j < R; ++j) {
      const __m512 wv = _mm512_loadu_ps(wp + j * 16);
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

// One tile of C = min(kTileBatch, rows left) batch rows.
template <int R>
void tile_of(const Tile& t, int64_t left, int64_t k0, int64_t k1, __mmask16 tail, bool first,
             bool last, const float* b, float* y, int64_t ldy, int64_t o, bool relu) {
  if (left >= kTileBatch) {
    tile<R, kTileBatch>(t, k0, k1, tail, first, last, b, y, ldy, o, relu);
  } else if (left == 2) {
    tile<R, 2>(t, k0, k1, tail, first, last, b, y, ldy, o, relu);
  } else {
    tile<R, 1>(t, k0, k1, tail, first, last, b, y, ldy, o, relu);
  }
}

// Rows [o, o + R) against the whole batch, block by block; `panel` is their panel.
template <int R>
void gemm_group(const float* panel, const float* x, const float* b, float* y, float* acc, int64_t o,
                int64_t out, int64_t in, int64_t batch, bool relu) {
  const int64_t full = in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
  const int64_t tiles = (batch + kTileBatch - 1) / kTileBatch;
  // One tile covers the batch: no reuse to keep in L1, so one block (no partial sums stored).
  const int64_t block = tiles == 1 ? std::max<int64_t>(16, full) : kBlock;
  const int64_t blocks = std::max<int64_t>(1, (full + block - 1) / block);
  const int64_t lines = R * block / 16;  // 64-byte lines of a whole block
  const int64_t per_tile = (lines + tiles - 1) / tiles;
  const int per = static_cast<int>((per_tile + block / 16 - 1) / (block / 16));
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t k0 = k * block, k1 = std::min(full, k0 + block);
    const bool first = k == 0, last = k + 1 == blocks;
    const float* w = panel + k0 * R;
    // kAheadBlocks x kBlock columns on in the one linear walk (past this panel: into the next
    // one; a prefetch past the weights' end or into another thread's rows is harmless).
    const float* ahead = w + kAheadBlocks * R * kBlock;
    for (int64_t n = 0, m = 0; n < batch; n += kTileBatch, ++m) {
      const Tile t{w,
                   ahead,
                   std::min(m * per_tile, lines),
                   std::min((m + 1) * per_tile, lines),
                   per,
                   x + n * in,
                   acc + n * 16,
                   in,
                   batch};
      tile_of<R>(t, batch - n, k0, k1, last ? tail : __mmask16{0}, first, last, b, y + n * out, out,
                 o, relu);
    }
  }
}

// The partial sums of one group, [kTileRows][batch][16] floats, per thread, grown on demand
// (allocated at a slot's first batch, then reused: the request path allocates nothing after it).
float* partial_sums(int64_t batch) {
  thread_local AlignedFloats buffer;
  const int64_t want = kTileRows * batch * 16;
  if (buffer.size() < want) buffer = AlignedFloats(want);
  return buffer.data();
}

void gemm_rows(const float* panels, const float* x, const float* b, float* y, int64_t begin,
               int64_t end, int64_t out, int64_t in, int64_t batch, bool relu) {
  float* acc = partial_sums(batch);
  const int64_t in_p = padded(in);
  int64_t o = begin;
  for (; o + kTileRows <= end; o += kTileRows)
    gemm_group<kTileRows>(panels + o * in_p, x, b, y, acc, o, out, in, batch, relu);
  for (; o < end; ++o) gemm_group<1>(panels + o * in_p, x, b, y, acc, o, out, in, batch, relu);
}

}  // namespace

int64_t gemm_panel_floats(int64_t out, int64_t in) { return out * padded(in); }

void pack_gemm_panels(const float* w, int64_t out, int64_t in, float* panels) {
  const int64_t in_p = padded(in);
  for (int64_t o = 0; o < out;) {
    const int64_t r = out - o >= kTileRows ? kTileRows : 1;  // as gemm_rows walks them
    float* p = panels + o * in_p;
    for (int64_t c = 0; c < in_p / 16; ++c) {
      for (int64_t j = 0; j < r; ++j) {
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t col = c * 16 + l;
          p[(c * r + j) * 16 + l] = col < in ? w[(o + j) * in + col] : 0.0f;
        }
      }
    }
    o += r;
  }
}

void gemm_f32(const float* panels, const float* x, const float* b, float* y, int64_t out,
              int64_t in, int64_t batch, bool relu, int threads) {
  if (threads <= 1 || out < 2 * kRows) {
    gemm_rows(panels, x, b, y, 0, out, out, in, batch, relu);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t groups = (out + kRows - 1) / kRows;
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t begin = std::min(out, groups * t / n * kRows);
    const int64_t end = std::min(out, groups * (t + 1) / n * kRows);
    gemm_rows(panels, x, b, y, begin, end, out, in, batch, relu);
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
