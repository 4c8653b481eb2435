#pragma once
// This core's FP32 peak, measured: a loop of independent fused multiply-adds on 512-bit (or, on
// CPUs without AVX-512, 256-bit) registers, as many chains as keep both FMA pipes busy through
// their latency. It is the reference the convolutions' GFLOP/s are compared with (engine_bench):
// a number measured on this machine, not a datasheet's.

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace serf::bench {

namespace detail {

constexpr int kChains = 12;  // > FMA latency (4) x pipes (2): the pipes never wait

// Returns a value that depends on every FMA, so the loop cannot be dropped.
__attribute__((target("avx512f"))) inline float fma_loop_512(int64_t iterations) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(0.001f * static_cast<float>(k));
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (__m512& a : acc) a = _mm512_fmadd_ps(a, mul, add);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm512_add_ps(sum, acc[k]);
  alignas(64) float out[16];
  _mm512_store_ps(out, sum);
  return out[0];
}

__attribute__((target("avx2,fma"))) inline float fma_loop_256(int64_t iterations) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(0.001f * static_cast<float>(k));
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (__m256& a : acc) a = _mm256_fmadd_ps(a, mul, add);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm256_add_ps(sum, acc[k]);
  alignas(32) float out[8];
  _mm256_store_ps(out, sum);
  return out[0];
}

}  // namespace detail

// Vector width in floats of the FMA loop this CPU runs (16 with AVX-512, else 8).
inline int fma_width() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? 16 : 8;
}

// FP32 GFLOP/s (an FMA is two) of `threads` threads running the loop at once, best of `trials`
// runs of about 50 ms each.
inline double fma_peak_gflops(int threads, int trials = 3) {
  const int width = fma_width();
  const int64_t iterations = 4000000;  // x 12 chains: about 50 ms per thread at 4 GHz
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int t = 0; t < trials; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += width == 16 ? detail::fma_loop_512(iterations) : detail::fma_loop_256(iterations);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = total;
    const double flops = 2.0 * width * detail::kChains * static_cast<double>(iterations) * threads;
    best = std::max(best, flops / s / 1e9);
  }
  (void)sink;
  return best;
}

}  // namespace serf::bench
