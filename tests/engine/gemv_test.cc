// engine/cpu/gemv.h: the hand-written fully connected kernels (gemv_f32 on plain rows, gemm_f32 on
// its panels at any batch) against a double-precision loop and against scalar loops in their
// documented summation orders, on sizes with remainders, and slices against the whole layer. Tag
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

// The order gemv_f32 sums a row in (gemv.h): 16 lane sums, lane l over columns l, l + 16, ... by
// fused multiply-adds (padding past `in` adds 0 x 0), then lane l plus lane l + 8 (l < 8), + 4,
// + 2, + 1, then the bias.
float row_in_lane_order(const float* w, const float* x, float bias, int64_t in, bool relu) {
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

// The order gemm_f32 sums an output in (gemv.h): the inputs in blocks of 128, each block by fused
// multiply-adds from 0, the block sums added in order (the first taken as it is), then the bias.
// Batches, thread counts and slices of outputs equal each other bit for bit because of it.
float row_in_block_order(const float* w, const float* x, float bias, int64_t in, bool relu) {
  float total = 0.0f;
  for (int64_t k0 = 0; k0 < in; k0 += 128) {
    float sum = 0.0f;
    for (int64_t k = k0; k < std::min(in, k0 + 128); ++k) sum = std::fma(w[k], x[k], sum);
    total = k0 == 0 ? sum : total + sum;
  }
  const float v = total + bias;
  return relu ? std::max(v, 0.0f) : v;
}

std::vector<float> panels_of(const std::vector<float>& w, int64_t out, int64_t in) {
  std::vector<float> panels(static_cast<size_t>(gemm_panel_floats(out, in)), NAN);
  pack_gemm_panels(w.data(), out, in, panels.data());
  return panels;
}

// A layer W [out, in], b [out] and a batch x [batch, in] from seeds `seed`, + 1, + 2, and its
// outputs by gemm_f32 on W's panels.
struct Dense {
  int64_t out, in, batch;
  std::vector<float> w, b, x;
  Dense(int64_t out_, int64_t in_, int64_t batch_, unsigned seed)
      : out(out_),
        in(in_),
        batch(batch_),
        w(values(static_cast<size_t>(out * in), seed)),
        b(values(static_cast<size_t>(out), seed + 1)),
        x(values(static_cast<size_t>(batch * in), seed + 2)) {}
  std::vector<float> run(int threads) const {
    std::vector<float> y(static_cast<size_t>(batch * out));
    gemm_f32(panels_of(w, out, in).data(), x.data(), b.data(), y.data(), out, in, batch, false,
             threads);
    return y;
  }
};

}  // namespace

TEST_CASE("gemv_f32 sums a row in the documented lane order, bit for bit", "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  for (int64_t in : {37, 1100}) {
    const int64_t out = 11;
    const std::vector<float> w = values(static_cast<size_t>(out * in), 7), b = values(out, 8),
                             x = values(in, 9);
    std::vector<float> one(out, NAN);
    gemv_f32(w.data(), x.data(), b.data(), one.data(), out, in, true, 1);
    for (int64_t o = 0; o < out; ++o) {
      INFO("in " << in << " out " << o);
      CHECK(one[o] == row_in_lane_order(w.data() + o * in, x.data(), b[o], in, true));
    }
  }
}

TEST_CASE("gemm_f32 sums every output in the documented block order, bit for bit, at any b and T",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  // Outputs around the 32-wide panels (1, 31, 33) and across sets of 8 panels (300 = 9 panels and
  // 12 outputs: at T = 2 and 3 the threads' runs cut a set); inputs around the 128-input blocks
  // (127, 128, 129) and several of them (1041, 2055); batches that leave every split of the
  // 12-row register tiles (1, 2, 5, 12, 13, 25, 32, 40). Every panel float written (no NaN left),
  // nothing written past the batch's outputs (the NaN guard after y). A row of a batch equals
  // the same input run alone (b = 1) bit for bit, as it equals the scalar loop.
  for (int64_t out : {1, 7, 31, 33, 300}) {
    for (int64_t in : {1, 17, 127, 128, 129, 1041, 2055}) {
      const std::vector<float> w = values(static_cast<size_t>(out * in), 1), b = values(out, 3);
      const std::vector<float> panels = panels_of(w, out, in);
      for (int64_t batch : {1, 2, 5, 12, 13, 25, 32, 40}) {
        const std::vector<float> x = values(static_cast<size_t>(batch * in), 4);
        for (int threads : {1, 2, 3}) {
          const auto n_y = static_cast<size_t>(batch * out);
          std::vector<float> y(n_y + 16, NAN), one(out + 16, NAN);
          gemm_f32(panels.data(), x.data(), b.data(), y.data(), out, in, batch, true, threads);
          for (int64_t n = 0; n < batch; ++n) {
            gemm_f32(panels.data(), x.data() + n * in, b.data(), one.data(), out, in, 1, true,
                     threads);
            INFO("out " << out << " in " << in << " batch " << batch << " threads " << threads
                        << " row " << n);
            for (int64_t o = 0; o < out; ++o) {
              const float want =
                  row_in_block_order(w.data() + o * in, x.data() + n * in, b[o], in, true);
              CHECK(y[static_cast<size_t>(n * out + o)] == want);
              CHECK(one[static_cast<size_t>(o)] == want);
            }
          }
          CHECK(std::all_of(y.begin() + static_cast<std::ptrdiff_t>(n_y), y.end(),
                            [](float v) { return std::isnan(v); }));
        }
      }
    }
  }
}

TEST_CASE("gemm_f32 on a slice of outputs gives the whole layer's values bit for bit",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  // A rank of K packs its own rows (cpu_steps.cc pack_panels): its panels start at its first
  // output, so the slices fall across panels and sets differently from the whole layer's.
  const Dense layer(301, 300, 13, 14);
  const int64_t out = layer.out, in = layer.in, batch = layer.batch;
  const std::vector<float> whole = layer.run(2);
  const std::vector<float>& w = layer.w;
  for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 151}, {151, 301}, {37, 290}}) {
    const int64_t rows = end - begin;
    const std::vector<float> slice(w.begin() + begin * in, w.begin() + end * in);
    std::vector<float> y(static_cast<size_t>(batch * rows));
    gemm_f32(panels_of(slice, rows, in).data(), layer.x.data(), layer.b.data() + begin, y.data(),
             rows, in, batch, false, 1);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t o = 0; o < rows; ++o) {
        INFO("slice " << begin << ".." << end << " row " << n << " out " << o);
        CHECK(y[static_cast<size_t>(n * rows + o)] ==
              whole[static_cast<size_t>(n * out + begin + o)]);
      }
    }
  }
}

TEST_CASE("gemm_f32's blocked sums stay within float32 rounding of a double loop on long rows",
          "[engine][avx512]") {
  if (!gemv_supported()) SERF_SKIP(kNoAvx512);
  // vgg16's classifier reads 25088 inputs: summed in 196 blocks of 128, not in one chain of 25088.
  // On these values the largest error over the sum of |terms| is 4.3e-7 in blocks; one chain of
  // fused multiply-adds gives 6.4e-6 and gemv_f32's 16 lanes 8.8e-7, so the bound tells them apart.
  const Dense layer(40, 25088, 3, 17);
  const int64_t out = layer.out, in = layer.in, batch = layer.batch;
  const std::vector<float>&w = layer.w, &b = layer.b, &x = layer.x;
  const std::vector<float> y = layer.run(2);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < out; ++o) {
      double want = b[o], scale = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        want += double{w[o * in + i]} * x[n * in + i];
        scale += std::abs(double{w[o * in + i]} * x[n * in + i]);
      }
      INFO("row " << n << " out " << o);
      CHECK(std::abs(y[static_cast<size_t>(n * out + o)] - want) <= 1e-6 * scale);
    }
  }
}

}  // namespace serf::engine
