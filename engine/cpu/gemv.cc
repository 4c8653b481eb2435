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
// floats: 16 KiB, in L1): the batch's first tile reads the block from memory, the others from L1
// (a large batch walks sets of panels block by block instead: kSetGroups below).
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
// Batch 1 walks 3 panels side by side (3 x 8 accumulators); on fc2 (4096 x 8192, fc_bench,
// alternating, under the measurement lock) 1 stream reached 55-67 % of a triad, 2 streams
// 96-105 %, 3 streams 101-106 % (the plain GEMV 83-100 % in the same runs).
constexpr int kPanelStreams = 3;
// Batches of 2..kInterleaveBatch walk kInterleaveStreams groups side by side, alternating blocks
// of kInterleaveBlock columns (4 KiB of a panel). fc2, fc_bench, T = 1 and 2, two alternating
// rounds under the measurement lock (load ~9): x_bound at b = 2-4 went from 1.60-1.72 (one
// group) to 1.14-1.50 (2 groups, 128 columns); 3 groups were no better, 64 or 256+ columns
// worse, and at b >= 8 interleaving lost (1.6-1.9 -> 1.8-2.5: the tiles' L1 reuse wants the
// 512-column blocks).
constexpr int kInterleaveBatch = 4;
constexpr int kInterleaveStreams = 2;
constexpr int64_t kInterleaveBlock = 128;
constexpr int64_t kAheadBlocks = 1;
// Batches of more than kSetMinBatch rows whose x is at least kSetMinXFloats (half of this CPU's
// 1 MiB L2) walk sets of kSetGroups groups, block by block (gemm_set_rows), on a packed copy of
// x in blocks of kSetBlock columns: walked group by group, the whole x went through L2 once per
// group of 8 rows and no longer stayed there. fc_bench, the two walks alternating, six rounds
// under the measurement lock (load 11.4-12.9, docs/engine.md): fc2 (4096 x 8192) at b = 16 and
// 32, T = 1 and 2, faster in 22 of 24 pairs, by 3-26 % (b = 32 T = 1 17.7-26.1 -> 15.6-22.7 ms);
// b = 8 and 12, and fc1 (8192 x 2048, x of 256 KiB at b = 32) at b = 32, 0-20 % slower. Blocks
// of 128, 384 or 512 columns and sets of 4 or 16 groups were within the noise of these.
constexpr int64_t kSetMinBatch = 8;
constexpr int64_t kSetMinXFloats = int64_t{128} << 10;
constexpr int64_t kSetGroups = 8;
constexpr int64_t kSetBlock = 256;

int64_t padded(int64_t in) { return (in + 15) / 16 * 16; }

struct Tile {
  const float* w;      // the block in the panel, [chunks][R][16]
  const float* ahead;  // the next block of the walk
  int64_t pf_begin;    // this tile prefetches lines [pf_begin, pf_end) of `ahead`,
  int64_t pf_end;      // pf_per a column step
  int pf_per;
  const float* x;  // the tile's first batch row at the block's first column
  float* acc;      // partial sums of (row 0, batch row 0): [R][batch][16]
  int64_t ldx;     // floats from one batch row of x to the next
  int64_t batch;
};

// One column chunk of a tile: a[j][c] += w[j] x[c] for the R weight vectors at `wp` and the C
// vectors of x in `xv`.
template <int R, int C>
__attribute__((target("avx512f,fma"), always_inline)) inline void tile_chunk(const float* wp,
                                                                             const __m512 (&xv)[C],
                                                                             __m512 (&a)[R][C]) {
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

// Columns [k0, k1) of one tile (k1 - k0 a multiple of 16), then one chunk with x masked when
// `tail` is not zero. `first` zeroes the sums instead of loading them; `last` finishes the rows.
// Every loop over the sums is unrolled whole: one with a run-time index (the tail's and the
// epilogue's were) made GCC 12 keep all R x C sums on the stack outside the column loop and
// copy them in and out at each call, besides ~50 scalar instructions per finished sum.
template <int R, int C>
__attribute__((target("avx512f,fma"))) void tile(const Tile& t, int64_t k0, int64_t k1,
                                                 __mmask16 tail, bool first, bool last,
                                                 const float* b, float* y, int64_t ldy, int64_t o,
                                                 bool relu) {
  const float* ahead = t.ahead;
  float* acc = t.acc;
  const int64_t ldx = t.ldx, ld_acc = t.batch * 16, pf_end = t.pf_end;
  const int pf_per = t.pf_per;
  __m512 a[R][C];
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      a[j][c] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + j * ld_acc + c * 16);
  }
  int64_t q = t.pf_begin;
  const float* wp = t.w;
  const float* xp = t.x;
  for (int64_t i = k0; i < k1; i += 16, wp += R * 16, xp += 16) {
    for (int s = 0; s < pf_per && q < pf_end; ++s, ++q)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + q * 16), _MM_HINT_T0);
    __m512 xv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(xp + c * ldx);
    tile_chunk<R, C>(wp, xv, a);
  }
  if (tail != 0) {
    __m512 xv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) xv[c] = _mm512_maskz_loadu_ps(tail, xp + c * ldx);
    tile_chunk<R, C>(wp, xv, a);
  }
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      if (last) {
        finish(a[j][c], b, y + c * ldy, o + j, relu);
      } else {
        _mm512_store_ps(acc + j * ld_acc + c * 16, a[j][c]);
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

// What every block of one walk over the weights shares: the batch (its x rows, plain or packed),
// the outputs, the block size.
struct Sweep {
  const float* x;  // plain rows [batch, in], or packed_x's blocks when `packed`
  int64_t ldx;     // floats from one x row of a block to the next
  bool packed;
  const float* b;
  float* y;
  int64_t out, batch;
  bool relu;
  int64_t full;  // columns in whole 16-column chunks
  __mmask16 tail;
  int64_t block, blocks;
};

Sweep sweep(const float* x, const float* b, float* y, int64_t out, int64_t in, int64_t batch,
            bool relu, int64_t block) {
  Sweep s{};
  s.x = x, s.ldx = in, s.packed = false, s.b = b, s.y = y, s.out = out, s.batch = batch;
  s.relu = relu, s.full = in / 16 * 16, s.block = block;
  s.tail = static_cast<__mmask16>((1u << (in - s.full)) - 1u);
  s.blocks = std::max<int64_t>(1, (s.full + block - 1) / block);
  return s;
}

// Block k of one group's panel (R rows from `row`) against every tile of the batch; the lines of
// the block at `ahead` (the walk's next) are prefetched once each, spread over the tiles.
template <int R>
void block_tiles(const Sweep& s, const float* panel, const float* ahead, float* sums, int64_t row,
                 int64_t k) {
  const int64_t k0 = k * s.block, k1 = std::min(s.full, k0 + s.block);
  const bool first = k == 0, last = k + 1 == s.blocks;
  const int64_t tiles = (s.batch + kTileBatch - 1) / kTileBatch;
  const int64_t lines = R * s.block / 16;  // 64-byte lines of a whole block
  const int64_t per_tile = (lines + tiles - 1) / tiles;
  const int per = static_cast<int>((per_tile + s.block / 16 - 1) / (s.block / 16));
  const float* x = s.packed ? s.x + k * s.batch * s.ldx : s.x + k0;
  for (int64_t n = 0, m = 0; n < s.batch; n += kTileBatch, ++m) {
    const Tile t{panel + k0 * R,
                 ahead,
                 std::min(m * per_tile, lines),
                 std::min((m + 1) * per_tile, lines),
                 per,
                 x + n * s.ldx,
                 sums + n * 16,
                 s.ldx,
                 s.batch};
    tile_of<R>(t, s.batch - n, k0, k1, last ? s.tail : __mmask16{0}, first, last, s.b,
               s.y + n * s.out, s.out, row, s.relu);
  }
}

// Rows [o[p], o[p] + R) of P groups against the whole batch, block by block; panel[p] is group
// p's panel. With P > 1 the groups' blocks alternate (block k of each group in turn), so the walk
// reads P streams at once, each group's partial sums in its own part of `acc`.
template <int R, int P>
void gemm_group(const float* const* panel, const float* x, const float* b, float* y, float* acc,
                const int64_t* o, int64_t out, int64_t in, int64_t batch, bool relu) {
  const int64_t full = in / 16 * 16, tiles = (batch + kTileBatch - 1) / kTileBatch;
  // One group and one tile covering the batch: no reuse to keep in L1, so one block (no partial
  // sums stored).
  const int64_t block = P > 1 ? kInterleaveBlock : tiles > 1 ? kBlock : std::max<int64_t>(16, full);
  const Sweep s = sweep(x, b, y, out, in, batch, relu, block);
  for (int64_t k = 0; k < s.blocks; ++k) {
    for (int p = 0; p < P; ++p) {
      // kAheadBlocks blocks on in the group's linear walk (past this panel: into the next one;
      // a prefetch past the weights' end or into another thread's rows is harmless).
      const float* ahead = panel[p] + (k + kAheadBlocks) * block * R;
      block_tiles<R>(s, panel[p], ahead, acc + p * R * batch * 16, o[p], k);
    }
  }
}

// The partial sums of up to kSetGroups groups, [kSetGroups][kTileRows][batch][16] floats, per
// thread, grown on demand (allocated at a slot's first batch, then reused: the request path
// allocates nothing after it).
float* partial_sums(int64_t batch) {
  thread_local AlignedFloats buffer;
  const int64_t want = kTileRows * batch * 16 * std::max<int64_t>(kInterleaveStreams, kSetGroups);
  if (buffer.size() < want) buffer = AlignedFloats(want);
  return buffer.data();
}

// x [batch, in] copied per thread block by block, each block's rows side by side: block k's row n
// at (k * batch + n) * ldx floats, ldx = block + 16 (the last block's masked tail chunk fits).
// One block of x is then one contiguous run, where the plain rows, in x 4 bytes apart (often a
// multiple of 4 KiB), fall into the same few cache sets.
float* packed_x(const float* x, int64_t in, int64_t batch, int64_t block, int64_t blocks) {
  thread_local AlignedFloats buffer;
  const int64_t ldx = block + 16, want = blocks * batch * ldx;
  if (buffer.size() < want) buffer = AlignedFloats(want);
  float* xp = buffer.data();
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t k0 = k * block, k1 = k + 1 == blocks ? in : std::min(in, k0 + block);
    for (int64_t n = 0; n < batch; ++n)
      std::copy(x + n * in + k0, x + n * in + k1, xp + (k * batch + n) * ldx);
  }
  return xp;
}

// n consecutive groups of R rows from `row` (their panels from `first` on, R x in_p floats each)
// against the batch: block k of every group in turn, then block k + 1, so that one block of x
// (the batch over s.block columns) serves all n groups from the caches, where a walk group by
// group reads the whole x once per group. The walk's next block is prefetched.
template <int R>
void gemm_set(const Sweep& s, const float* first, int64_t n, int64_t row, int64_t in_p,
              float* acc) {
  const int64_t step = R * in_p;
  for (int64_t k = 0; k < s.blocks; ++k) {
    for (int64_t g = 0; g < n; ++g) {
      const float* panel = first + g * step;
      // Next: the next group's block k, else the first group's block k + 1, else (the set's
      // last block) the next set's first, right after this set's panels.
      const float* ahead = g + 1 < n          ? panel + step + k * s.block * R
                           : k + 1 < s.blocks ? first + (k + 1) * s.block * R
                                              : first + n * step;
      block_tiles<R>(s, panel, ahead, acc + g * R * s.batch * 16, row + g * R, k);
    }
  }
}

// Rows [begin, end) against a batch of more than kSetMinBatch rows and kSetMinXFloats of x, in
// sets of kSetGroups groups (gemm_set), on x packed once per call (packed_x); the last (end -
// begin) % kTileRows rows, a panel of one row each, as one set.
void gemm_set_rows(const float* panels, const float* x, const float* b, float* y, int64_t begin,
                   int64_t end, int64_t out, int64_t in, int64_t batch, bool relu) {
  Sweep s = sweep(x, b, y, out, in, batch, relu, kSetBlock);
  s.x = packed_x(x, in, batch, s.block, s.blocks);
  s.ldx = s.block + 16;
  s.packed = true;
  float* acc = partial_sums(batch);
  const int64_t in_p = padded(in), groups = (end - begin) / kTileRows;
  for (int64_t g = 0; g < groups; g += kSetGroups) {
    const int64_t row = begin + g * kTileRows;
    gemm_set<kTileRows>(s, panels + row * in_p, std::min<int64_t>(kSetGroups, groups - g), row,
                        in_p, acc);
  }
  const int64_t o = begin + groups * kTileRows;
  if (o < end) gemm_set<1>(s, panels + o * in_p, end - o, o, in_p, acc);
}

// Batch 1 on the panels: P groups of kTileRows rows walked side by side (P streams through
// memory, as the plain GEMV's 8 row streams: the hardware prefetcher runs ahead of each), each
// line also prefetched kPanelAhead floats ahead of its stream. Every row keeps its own accumulator
// over the GEMV's column order (the zero padding adds 0 x 0 where the GEMV's masked tail does), so
// the values equal gemv_f32's bit for bit.
constexpr int64_t kPanelAhead = 1024;

template <int P>
__attribute__((target("avx512f,fma"))) void panel_gemv(const float* const* w, const float* x,
                                                       const float* b, float* y, const int64_t* row,
                                                       int64_t in, bool relu) {
  constexpr int R = kTileRows;
  const int64_t full = in / 16 * 16, chunks = padded(in) / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (in - full)) - 1u);
  __m512 a[P][R];
  for (int p = 0; p < P; ++p) {
    for (int j = 0; j < R; ++j) a[p][j] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i = c * 16;
    const __m512 xv = i < full ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(tail, x + i);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const float* wp = w[p] + c * R * 16;
#pragma GCC unroll 8
      for (int j = 0; j < R; ++j) {
        _mm_prefetch(reinterpret_cast<const char*>(wp + j * 16 + kPanelAhead), _MM_HINT_T0);
        a[p][j] = _mm512_fmadd_ps(_mm512_loadu_ps(wp + j * 16), xv, a[p][j]);
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    for (int j = 0; j < R; ++j) finish(a[p][j], b, y, row[p] + j, relu);
  }
}

// Rows [begin, end) group by group: the full groups of kTileRows rows in P parts walked side by
// side, several(w, row) for P groups at once (w[p] the panel of the group whose first row is
// row[p]); then one(w, row) for each group the parts do not share; then last(w, o) for each of
// the last (end - begin) % kTileRows rows, a panel of one row each.
template <int P, typename Several, typename One, typename Last>
void walk_groups(const float* panels, int64_t begin, int64_t end, int64_t in, Several several,
                 One one, Last last) {
  const int64_t in_p = padded(in), groups = (end - begin) / kTileRows;
  int64_t part[P + 1];
  for (int p = 0; p <= P; ++p) part[p] = groups * p / P;
  const int64_t common = part[1] - part[0];  // every part has common or common + 1 groups
  auto at = [&](int64_t group) { return begin + group * kTileRows; };
  for (int64_t g = 0; g < common; ++g) {
    const float* w[P];
    int64_t row[P];
    for (int p = 0; p < P; ++p) row[p] = at(part[p] + g), w[p] = panels + row[p] * in_p;
    several(w, row);
  }
  for (int p = 0; p < P; ++p) {
    for (int64_t g = part[p] + common; g < part[p + 1]; ++g) {
      const float* w[1] = {panels + at(g) * in_p};
      const int64_t row[1] = {at(g)};
      one(w, row);
    }
  }
  for (int64_t o = at(groups); o < end; ++o) {
    const float* w[1] = {panels + o * in_p};
    last(w, &o);
  }
}

// Rows [begin, end) at batch 1 on the panels (P streams).
template <int P>
void gemv_panel_rows(const float* panels, const float* x, const float* b, float* y, int64_t begin,
                     int64_t end, int64_t in, bool relu) {
  walk_groups<P>(
      panels, begin, end, in,
      [&](const float* const* w, const int64_t* row) { panel_gemv<P>(w, x, b, y, row, in, relu); },
      [&](const float* const* w, const int64_t* row) { panel_gemv<1>(w, x, b, y, row, in, relu); },
      [&](const float* const* w, const int64_t* o) {
        gemm_group<1, 1>(w, x, b, y, nullptr, o, 0, in, 1, relu);
      });
}

// Rows [begin, end) against the whole batch (P groups side by side).
template <int P>
void gemm_rows(const float* panels, const float* x, const float* b, float* y, int64_t begin,
               int64_t end, int64_t out, int64_t in, int64_t batch, bool relu) {
  float* acc = partial_sums(batch);
  walk_groups<P>(
      panels, begin, end, in,
      [&](const float* const* w, const int64_t* row) {
        gemm_group<kTileRows, P>(w, x, b, y, acc, row, out, in, batch, relu);
      },
      [&](const float* const* w, const int64_t* row) {
        gemm_group<kTileRows, 1>(w, x, b, y, acc, row, out, in, batch, relu);
      },
      [&](const float* const* w, const int64_t* o) {
        gemm_group<1, 1>(w, x, b, y, acc, o, out, in, batch, relu);
      });
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
  auto rows = [&](int64_t begin, int64_t end) {
    if (batch == 1) {
      gemv_panel_rows<kPanelStreams>(panels, x, b, y, begin, end, in, relu);
    } else if (batch <= kInterleaveBatch) {
      gemm_rows<kInterleaveStreams>(panels, x, b, y, begin, end, out, in, batch, relu);
    } else if (batch > kSetMinBatch && batch * in >= kSetMinXFloats) {
      gemm_set_rows(panels, x, b, y, begin, end, out, in, batch, relu);
    } else {
      gemm_rows<1>(panels, x, b, y, begin, end, out, in, batch, relu);
    }
  };
  if (threads <= 1 || out < 2 * kRows) {
    rows(0, out);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t groups = (out + kRows - 1) / kRows;
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t begin = std::min(out, groups * t / n * kRows);
    const int64_t end = std::min(out, groups * (t + 1) / n * kRows);
    rows(begin, end);
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
