// engine/cpu/gemv.h: the hand-written batch-1 fully connected kernel against a double-precision
// loop, on sizes with row and column remainders, and row slices against the whole layer. Tag
// [avx512]: on a CPU without it these cases skip (CTest entry test_engine_gemv shows the skip).
#include "engine/cpu/gemv.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <utility>
#include <vector>

#include "test_skip.h"

namespace serf::engine {
namespace {

std::vector<float> values(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
  return v;
}

constexpr const char* kNoAvx512 = "no AVX-512 on this CPU: the engine uses oneDNN's inner product";

TEST_CASE("gemv_f32 matches a double loop, with remainders, relu and threads", "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  for (int64_t out : {1, 3, 4, 7, 9, 64}) {
    for (int64_t in : {1, 15, 16, 17, 100, 9216}) {
      const std::vector<float> w = values(static_cast<size_t>(out * in), 1), x = values(in, 2),
                               b = values(out, 3);
      for (bool relu : {false, true}) {
        for (int threads : {1, 2, 3}) {
          std::vector<float> y(out, NAN);
          gemv_f32(w.data(), x.data(), b.data(), y.data(), out, in, relu, threads);
          for (int64_t o = 0; o < out; ++o) {
            double want = b[o];
            for (int64_t i = 0; i < in; ++i) want += double{w[o * in + i]} * x[i];
            if (relu) want = std::max(want, 0.0);
            INFO("out " << out << " in " << in << " relu " << relu << " threads " << threads
                        << " row " << o);
            CHECK(std::abs(y[o] - want) <= 1e-5 * std::max(1.0, std::sqrt(double(in))));
          }
        }
      }
    }
  }
}

TEST_CASE("gemv_f32 on a slice of rows gives the whole layer's values bit for bit",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  const int64_t out = 23, in = 37;
  const std::vector<float> w = values(out * in, 4), x = values(in, 5), b = values(out, 6);
  std::vector<float> whole(out), sliced(out);
  gemv_f32(w.data(), x.data(), b.data(), whole.data(), out, in, true, 2);
  for (int64_t begin : {0, 5, 11, 22}) {
    const int64_t end = std::min(out, begin + 6);
    gemv_f32(w.data() + begin * in, x.data(), b.data() + begin, sliced.data() + begin, end - begin,
             in, true, 1);
    for (int64_t o = begin; o < end; ++o) CHECK(sliced[o] == whole[o]);
  }
}

// The order every kernel sums a row in (gemv.h): 16 lane sums, lane l over columns l, l + 16, ...
// by fused multiply-adds (padding past `in` adds 0 x 0), then lane l plus lane l + 8 (l < 8), + 4,
// + 2, + 1, then the bias. Slices and batches equal the whole layer bit for bit because of it.
float row_in_kernel_order(const float* w, const float* x, float bias, int64_t in, bool relu) {
  float lane[16];
  for (int l = 0; l < 16; ++l) {
    lane[l] = 0.0f;
    for (int64_t i = l; i < (in + 15) / 16 * 16; i += 16)
      lane[l] = i < in ? std::fma(w[i], x[i], lane[l]) : std::fma(0.0f, 0.0f, lane[l]);
  }
  for (int width = 8; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] = lane[l] + lane[l + width];
  }
  const float v = lane[0] + bias;
  return relu ? std::max(v, 0.0f) : v;
}

}  // namespace

TEST_CASE("gemv_f32 and gemm_f32 sum a row in the documented lane order, bit for bit",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  // 11 rows: a group of 8 and 3 single rows; 37 columns: 2 whole chunks and a 5-column tail;
  // 1100 columns: three 512-column blocks of the batched walk, the last partial.
  for (int64_t in : {37, 1100}) {
    const int64_t out = 11;
    const std::vector<float> w = values(static_cast<size_t>(out * in), 7), b = values(out, 8);
    std::vector<float> panels(static_cast<size_t>(gemm_panel_floats(out, in)), NAN);
    pack_gemm_panels(w.data(), out, in, panels.data());
    for (int64_t batch : {1, 2, 8}) {
      const std::vector<float> x = values(static_cast<size_t>(batch * in), 9);
      std::vector<float> y(static_cast<size_t>(batch * out), NAN), one(out, NAN);
      gemm_f32(panels.data(), x.data(), b.data(), y.data(), out, in, batch, true, 1);
      for (int64_t n = 0; n < batch; ++n) {
        gemv_f32(w.data(), x.data() + n * in, b.data(), one.data(), out, in, true, 1);
        for (int64_t o = 0; o < out; ++o) {
          const float want =
              row_in_kernel_order(w.data() + o * in, x.data() + n * in, b[o], in, true);
          INFO("in " << in << " batch " << batch << " row " << n << " out " << o);
          CHECK(y[n * out + o] == want);
          CHECK(one[o] == want);
        }
      }
    }
  }
}

TEST_CASE("gemm_f32: each row of a batch equals gemv_f32 on that row, bit for bit",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  // W packed into panels (every panel float written: no NaN left). Odd row and column counts,
  // columns across several of the kernel's 512-column blocks (1041, 2048 + 7), and batches that
  // leave every remainder of its 3-row tiles (2, 3, 5, 8, 17, 32); batch 1 walks 3 panels side by
  // side, with parts of unequal length at 203 rows (25 groups of 8 and 3 rows).
  for (int64_t out : {1, 7, 9, 17, 40, 203}) {
    for (int64_t in : {3, 15, 17, 1041, 2055}) {
      const std::vector<float> w = values(static_cast<size_t>(out * in), 1), b = values(out, 3);
      std::vector<float> panels(static_cast<size_t>(gemm_panel_floats(out, in)), NAN);
      pack_gemm_panels(w.data(), out, in, panels.data());
      for (int64_t batch : {1, 2, 3, 5, 8, 17, 32}) {
        const std::vector<float> x = values(static_cast<size_t>(batch * in), 4);
        for (int threads : {1, 2, 3}) {
          std::vector<float> y(static_cast<size_t>(batch * out), NAN), one(out, NAN);
          gemm_f32(panels.data(), x.data(), b.data(), y.data(), out, in, batch, true, threads);
          for (int64_t n = 0; n < batch; ++n) {
            gemv_f32(w.data(), x.data() + n * in, b.data(), one.data(), out, in, true, threads);
            INFO("out " << out << " in " << in << " batch " << batch << " threads " << threads
                        << " row " << n);
            CHECK(std::vector<float>(y.begin() + n * out, y.begin() + (n + 1) * out) == one);
          }
        }
      }
    }
  }
}

TEST_CASE("gemm_f32 walks sets of groups over a packed x, each row still gemv_f32's bit for bit",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  // Batches of more than 8 rows with batch x in >= 128 Ki floats walk up to 8 groups of 8 rows
  // block by block (256 columns) on a per-call copy of x (gemv.cc gemm_set_rows). 283 rows: per
  // thread at T = 2 two whole sets, a partial one and, on the second, the 3 single rows at the
  // end. Columns: the last block whole with the masked tail right after it (2056 = 8 x 256 + 8),
  // one chunk past a block (4112), a ragged last block (4100); b = 9 on both sides of the
  // threshold (14560 x 9 below it: the group-by-group walk).
  const int64_t out = 283;
  const std::pair<int64_t, int64_t> cases[] = {
      {2056, 64}, {4112, 40}, {4100, 33}, {14570, 9}, {14560, 9}};
  for (const auto& [in, batch] : cases) {
    const std::vector<float> w = values(static_cast<size_t>(out * in), 11), b = values(out, 12);
    std::vector<float> panels(static_cast<size_t>(gemm_panel_floats(out, in)), NAN);
    pack_gemm_panels(w.data(), out, in, panels.data());
    const std::vector<float> x = values(static_cast<size_t>(batch * in), 13);
    for (int threads : {1, 2}) {
      std::vector<float> y(static_cast<size_t>(batch * out), NAN), one(out, NAN);
      gemm_f32(panels.data(), x.data(), b.data(), y.data(), out, in, batch, false, threads);
      for (int64_t n = 0; n < batch; ++n) {
        gemv_f32(w.data(), x.data() + n * in, b.data(), one.data(), out, in, false, 1);
        INFO("in " << in << " batch " << batch << " threads " << threads << " row " << n);
        CHECK(std::vector<float>(y.begin() + n * out, y.begin() + (n + 1) * out) == one);
      }
    }
  }
}

}  // namespace serf::engine
