#include "engine/cpu/gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "engine/cpu/aligned_floats.h"

namespace serf::engine {
namespace {

// Rows per pass: eight concurrent weight streams keep more cache-line fills in flight than four
// (bench/fc_bench on a Zen 5 core: 4 rows 78-90 % of triad, 8 rows 90-108 %, 12 and 16 fewer).
constexpr int kRows = 8;
// Each stream also prefetches into L2 4 KiB ahead: the hardware prefetcher stops at 4 KiB page
// ends, the software one does not. A prefetch past the weights' end is harmless (no fault).
constexpr int64_t kPrefetchFloats = 1024;

// The 16 lanes of `acc` summed in a fixed pairwise order: lane i plus lane i + 8 (i < 8), then
// i + 4, i + 2, i + 1, as whole-register adds of shuffled copies (lane 0 ends with the sum; GCC 12
// compiled the same order written over an array into ~50 scalar loads, adds and stores through
// the stack). Zero-masked shuffles: GCC 12's unmasked ones and its extracts trip
// -Wmaybe-uninitialized, as _mm512_reduce_add_ps does. Every kernel here finishes through it, so
// their rows stay equal bit for bit.
__attribute__((target("avx512f,fma"))) inline float lane_sum(__m512 acc) {
  constexpr __mmask16 all = 0xFFFF;
  __m512 s = _mm512_add_ps(acc, _mm512_maskz_shuffle_f32x4(all, acc, acc, _MM_SHUFFLE(3, 2, 3, 2)));
  s = _mm512_add_ps(s, _mm512_maskz_shuffle_f32x4(all, s, s, _MM_SHUFFLE(1, 1, 1, 1)));
  s = _mm512_add_ps(s, _mm512_maskz_shuffle_ps(all, s, s, _MM_SHUFFLE(3, 2, 3, 2)));
  s = _mm512_add_ps(s, _mm512_maskz_shuffle_ps(all, s, s, _MM_SHUFFLE(1, 1, 1, 1)));
  return _mm512_cvtss_f32(s);
}

__attribute__((target("avx512f,fma"))) inline void finish(__m512 acc, const float* b, float* y,
                                                          int64_t row, bool relu) {
  const float v = lane_sum(acc) + b[row];
  y[row] = relu ? std::max(v, 0.0f) : v;
}

// Rows [begin, end) R at a time while R fit; returns the first row not done. Every row has its
// own accumulator over the same column order, so R does not change a row's value.
template <int R>
__attribute__((target("avx512f,fma"))) int64_t gemv_groups(const float* w, const float* x,
                                                           const float* b, float* y, int64_t begin,
                                                           int64_t end, int64_t in, bool relu) {
  const int64_t full = in / 16 * 16;
  const auto tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
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

// A batch (gemm_f32), on weights packed column-wise (pack_gemm_panels): the outputs in panels of
// kPanelWidth = 32 (two vectors; the last panel zero-padded), each panel's weights stored k by k,
// [in][32], so that one load of 16 weights serves 16 outputs and a broadcast of one input x[n][k]
// multiplies it (the outer-product form of BLAS kernels). A register tile holds MR <= 12 batch rows
// x 32 outputs of sums (24 of the 32 zmm registers; per k, 2 weight loads and MR broadcasts for
// 2 MR FMAs). Why not the former panels of 8 rows x 16 columns (a 16-lane sum per (output, batch
// row), finished by a lane tree): each of those sums was a whole vector, 16 times the state, so
// a batch's partial sums could not stay in the caches with a block of x (docs/engine.md, sessions
// 29-31: at b = 32 fc2 ran at ~60 % of the FMA peak, where x's 1 MiB went through L2 once per 64
// rows). Here a sum is one float: the sums of a whole set of panels fit in L1/L2 beside one block
// of x, which then serves every panel of the set.
//
// The summation order, the same at every b, every thread count and every slice of outputs (so a
// row of a batch equals the same input alone, and a rank's slice the unsliced layer, bit for bit):
// the inputs in blocks of kBlockK, each block summed by fused multiply-adds k by k from 0, the
// block sums added in order (the first taken as it is), then the bias. The blocks bound the
// float32 rounding of long rows (vgg16's 25088 inputs) as the former lane sums did.
//
// The weights are laid out in the order the kernel walks them, so the walk is one linear stream:
// sets of kSetPanels panels, each set block by block, each block panel by panel ([set][block]
// [panel][k][32]); a set's block of x (the batch over kBlockK inputs, packed per call tile by
// tile) stays in L1 while the set's panels stream past it, and the set's sums wait in L1/L2. The
// next block is prefetched line by line, spread over the block's tiles.
constexpr int64_t kPanelWidth = 32;
constexpr int kMaxTileRows = 12;
constexpr int64_t kBlockK = 128;
constexpr int64_t kSetPanels = 8;

int64_t panel_count(int64_t out) { return (out + kPanelWidth - 1) / kPanelWidth; }

// Where block `k0` of panel j of the set whose first panel is `first` (n panels) starts: the layout
// above, with the last block (in - k0 < kBlockK) as long as it is.
int64_t block_offset(int64_t first, int64_t n, int64_t j, int64_t k0, int64_t in) {
  const int64_t kc = std::min(kBlockK, in - k0);
  return (first * in + k0 * n + j * kc) * kPanelWidth;
}

// How a block's sums end: kOnly (one block: y = sum + bias), kFirst (total = sum), kMiddle (total
// += sum), kLast (y = total + sum + bias).
enum class Sums { kOnly, kFirst, kMiddle, kLast };

struct Tile {
  const float* w;  // the panel's block, [kc][32]
  const float* x;  // the tile's rows over the block, [kc][MR]
  int64_t kc;
  float* total;        // the rows' running sums over the blocks, [MR][32]
  const float* ahead;  // the next block of the walk: lines [pf_begin, pf_end) of it,
  int64_t pf_begin;    // pf_per a k
  int64_t pf_end;
  int pf_per;
  const float* bias;  // the panel's first output
  float* y;           // the tile's first row at the panel's first output
  int64_t ldy;
  __mmask16 m0, m1;  // the panel's outputs that exist, in its two vectors
  bool relu;
};

template <int MR>
__attribute__((target("avx512f,fma"))) void tile(const Tile& t, Sums sums) {
  __m512 a[MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) a[r][0] = a[r][1] = _mm512_setzero_ps();
  const float* w = t.w;
  const float* x = t.x;
  int64_t q = t.pf_begin;
  for (int64_t k = 0; k < t.kc; ++k, w += kPanelWidth, x += MR) {
    for (int s = 0; s < t.pf_per && q < t.pf_end; ++s, ++q)
      _mm_prefetch(reinterpret_cast<const char*>(t.ahead + q * 16), _MM_HINT_T0);
    const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r]);
      a[r][0] = _mm512_fmadd_ps(w0, xb, a[r][0]);
      a[r][1] = _mm512_fmadd_ps(w1, xb, a[r][1]);
    }
  }
  const __m512 b0 = _mm512_maskz_loadu_ps(t.m0, t.bias),
               b1 = _mm512_maskz_loadu_ps(t.m1, t.bias + 16), zero = _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) {
    float* total = t.total + r * kPanelWidth;
    __m512 v0 = a[r][0], v1 = a[r][1];
    if (sums == Sums::kMiddle || sums == Sums::kLast) {
      v0 = _mm512_add_ps(_mm512_load_ps(total), v0);
      v1 = _mm512_add_ps(_mm512_load_ps(total + 16), v1);
    }
    if (sums == Sums::kFirst || sums == Sums::kMiddle) {
      _mm512_store_ps(total, v0);
      _mm512_store_ps(total + 16, v1);
      continue;
    }
    v0 = _mm512_add_ps(v0, b0), v1 = _mm512_add_ps(v1, b1);
    // max(0, v) keeps a NaN (and -0) as std::max(v, 0) does: the second operand when unordered.
    // Zero-masked: GCC 12's unmasked max trips -Wmaybe-uninitialized (as lane_sum's shuffles).
    if (t.relu)
      v0 = _mm512_maskz_max_ps(0xFFFF, zero, v0), v1 = _mm512_maskz_max_ps(0xFFFF, zero, v1);
    _mm512_mask_storeu_ps(t.y + r * t.ldy, t.m0, v0);
    _mm512_mask_storeu_ps(t.y + r * t.ldy + 16, t.m1, v1);
  }
}

using TileFn = void (*)(const Tile&, Sums);
constexpr TileFn kTiles[kMaxTileRows + 1] = {nullptr,  tile<1>,  tile<2>, tile<3>, tile<4>,
                                             tile<5>,  tile<6>,  tile<7>, tile<8>, tile<9>,
                                             tile<10>, tile<11>, tile<12>};

// The batch's rows in tiles of at most kMaxTileRows, as even as they go (b = 16: 8 + 8; b = 32:
// 11 + 11 + 10): tile m's first row and its row count.
struct Tiles {
  int64_t count, base, rem;
  explicit Tiles(int64_t batch)
      : count((batch + kMaxTileRows - 1) / kMaxTileRows), base(batch / count), rem(batch % count) {}
  int64_t first(int64_t m) const { return m * base + std::min(m, rem); }
  int rows(int64_t m) const { return static_cast<int>(base + (m < rem ? 1 : 0)); }
};

// x [batch, in] tile by tile, each tile's rows side by side k by k: tile m's (row r, input k) at
// first(m) * in + k * rows(m) + r, so that a tile's broadcasts for one k are one run of floats.
// One copy per call, by the calling thread (a batch of one is x itself).
const float* packed_x(const float* x, int64_t in, int64_t batch) {
  if (batch == 1) return x;
  thread_local AlignedFloats buffer;
  if (buffer.size() < batch * in) buffer = AlignedFloats(batch * in);
  float* xp = buffer.data();
  const Tiles tiles(batch);
  for (int64_t m = 0; m < tiles.count; ++m) {
    const int64_t n0 = tiles.first(m);
    const int mr = tiles.rows(m);
    float* dst = xp + n0 * in;
    for (int r = 0; r < mr; ++r) {
      const float* src = x + (n0 + r) * in;
      for (int64_t k = 0; k < in; ++k) dst[k * mr + r] = src[k];
    }
  }
  return xp;
}

// The running sums of one set's panels, [kSetPanels][batch][32] floats, per thread, grown on
// demand (allocated at a slot's first batch, then reused: the request path allocates nothing
// after it).
float* set_totals(int64_t batch) {
  thread_local AlignedFloats buffer;
  const int64_t want = kSetPanels * batch * kPanelWidth;
  if (buffer.size() < want) buffer = AlignedFloats(want);
  return buffer.data();
}

struct Batch {
  const float* panels;
  const float* xp;  // packed_x
  const float* b;
  float* y;
  int64_t out, in, batch;
  bool relu;
};

// Block k0 of panel j of a set (n panels from `first`) against every tile of the batch.
void block_tiles(const Batch& s, const Tiles& tiles, int64_t first, int64_t n, int64_t j,
                 int64_t k0, Sums sums, float* totals) {
  const int64_t kc = std::min(kBlockK, s.in - k0), o0 = (first + j) * kPanelWidth;
  const float* w = s.panels + block_offset(first, n, j, k0, s.in);
  const int64_t valid = std::min(kPanelWidth, s.out - o0);
  const auto mask = [](int64_t lanes) {
    return static_cast<__mmask16>(lanes >= 16 ? 0xFFFF : lanes <= 0 ? 0 : (1u << lanes) - 1u);
  };
  // The walk's next block follows this one in memory (a prefetch past the weights' end or into
  // another thread's panels is harmless); its lines, about 2 per k, are shared out by the tiles.
  const int64_t lines = kc * kPanelWidth / 16, per_tile = (lines + tiles.count - 1) / tiles.count;
  const int per = static_cast<int>((per_tile + kc - 1) / kc);
  for (int64_t m = 0; m < tiles.count; ++m) {
    const int64_t n0 = tiles.first(m);
    const int mr = tiles.rows(m);
    const Tile t{w,
                 s.xp + n0 * s.in + k0 * mr,
                 kc,
                 totals + (j * s.batch + n0) * kPanelWidth,
                 w + kc * kPanelWidth,
                 std::min(m * per_tile, lines),
                 std::min((m + 1) * per_tile, lines),
                 per,
                 s.b + o0,
                 s.y + n0 * s.out + o0,
                 s.out,
                 mask(valid),
                 mask(valid - 16),
                 s.relu};
    kTiles[mr](t, sums);
  }
}

// Panels [p_begin, p_end) against the whole batch: set by set, block by block, panel by panel.
void gemm_panels(const Batch& s, int64_t p_begin, int64_t p_end) {
  const Tiles tiles(s.batch);
  float* totals = set_totals(s.batch);
  const int64_t panels = panel_count(s.out), blocks = (s.in + kBlockK - 1) / kBlockK;
  for (int64_t first = p_begin / kSetPanels * kSetPanels; first < p_end; first += kSetPanels) {
    const int64_t n = std::min(kSetPanels, panels - first);
    const int64_t j0 = std::max(p_begin, first) - first, j1 = std::min(p_end, first + n) - first;
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const Sums sums = blocks == 1        ? Sums::kOnly
                        : kb == 0          ? Sums::kFirst
                        : kb + 1 == blocks ? Sums::kLast
                                           : Sums::kMiddle;
      for (int64_t j = j0; j < j1; ++j)
        block_tiles(s, tiles, first, n, j, kb * kBlockK, sums, totals);
    }
  }
}

}  // namespace

int64_t gemm_panel_floats(int64_t out, int64_t in) { return panel_count(out) * kPanelWidth * in; }

void pack_gemm_panels(const float* w, int64_t out, int64_t in, float* panels) {
  const int64_t count = panel_count(out);
  for (int64_t first = 0; first < count; first += kSetPanels) {
    const int64_t n = std::min(kSetPanels, count - first);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t o0 = (first + j) * kPanelWidth;
      for (int64_t k0 = 0; k0 < in; k0 += kBlockK) {
        float* block = panels + block_offset(first, n, j, k0, in);
        for (int64_t k = k0; k < std::min(in, k0 + kBlockK); ++k) {
          for (int64_t l = 0; l < kPanelWidth; ++l) {
            const int64_t o = o0 + l;
            block[(k - k0) * kPanelWidth + l] = o < out ? w[o * in + k] : 0.0f;
          }
        }
      }
    }
  }
}

void gemm_f32(const float* panels, const float* x, const float* b, float* y, int64_t out,
              int64_t in, int64_t batch, bool relu, int threads) {
  const Batch s{panels, packed_x(x, in, batch), b, y, out, in, batch, relu};
  const int64_t count = panel_count(out);
  if (threads <= 1 || count < 2) {
    gemm_panels(s, 0, count);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // Contiguous runs of whole panels: each thread streams one part of the weights.
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    gemm_panels(s, count * t / n, count * (t + 1) / n);
  }
}

bool gemv_supported() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"); }

void gemv_f32(const float* w, const float* x, const float* b, float* y, int64_t out, int64_t in,
              bool relu, int threads) {
  if (threads <= 1 || out < int64_t{2} * kRows) {
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
