// fc_bench: why fully connected layers use oneDNN inner product with [in, out] weights. Times one
// batch-1 fully connected layer (default 4096 x 9216, imagenet1k's fc6) as oneDNN inner product
// with weights in the layout oneDNN picks (`any`), [out, in] (`oi`), [in, out] (`io`), and as a
// hand-written OpenMP GEMV, against a STREAM triad in the same run.
//   fc_bench [--out N] [--in N] [--threads 1,2] [--repeat n]
#include <iostream>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>

#include "bench/bench_util.h"

using namespace serf;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

int main(int argc, char** argv) {
  int64_t out = 4096, in = 9216;
  int repeat = 20;
  std::vector<int> thread_counts = {1, 2};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--out")
      out = std::atoll(v.c_str());
    else if (a == "--in")
      in = std::atoll(v.c_str());
    else if (a == "--repeat")
      repeat = std::atoi(v.c_str());
    else if (a == "--threads") {
      thread_counts.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');) thread_counts.push_back(std::atoi(t.c_str()));
    } else {
      std::cerr << "fc_bench: error: unknown argument " << a
                << " (use --out --in --threads --repeat)\n";
      return 2;
    }
  }
  if (out < 1 || in < 1 || repeat < 1) {
    std::cerr << "fc_bench: error: --out, --in and --repeat must be at least 1\n";
    return 2;
  }
  std::vector<float> w(static_cast<size_t>(out * in)), x(in), y(out), b(out, 0.1f);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (int64_t i = 0; i < in; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  const double mb = out * in * 4 / 1e6;
  std::printf("fully connected %lld x %lld (%.1f MB of weights), batch 1, median of %d\n",
              (long long)out, (long long)in, mb, repeat);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  for (int T : thread_counts) {
    omp_set_num_threads(T);
    const double triad = bench::triad_gb_per_s(T);
    std::printf("T=%d  STREAM triad %.2f GB/s\n", T, triad);
    auto report = [&](const std::string& what, std::vector<double> ms) {
      const double m = bench::median(std::move(ms));
      std::printf("  %-34s %8.3f ms %7.2f GB/s %5.0f%% of triad\n", what.c_str(), m, mb / m,
                  100.0 * (mb / m) / triad);
    };
    for (tag wt : {tag::any, tag::oi, tag::io}) {
      dnnl::stream s(eng);
      const dnnl::memory::desc src({1, in}, dt::f32, tag::nc), dst({1, out}, dt::f32, tag::nc),
          bias({out}, dt::f32, tag::x), wmd({out, in}, dt::f32, wt);
      dnnl::inner_product_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, src, wmd, bias, dst}, eng);
      dnnl::memory user({{out, in}, dt::f32, tag::oi}, eng, w.data()),
          packed(pd.weights_desc(), eng);
      dnnl::reorder(user, packed).execute(s, user, packed);
      dnnl::memory xs(src, eng, x.data()), yd(dst, eng, y.data()), bb(bias, eng, b.data());
      dnnl::inner_product_forward ip(pd);
      std::vector<double> ms;
      for (int r = 0; r < repeat + 2; ++r) {
        const double t0 = bench::now_ms();
        ip.execute(s, {{DNNL_ARG_SRC, xs},
                       {DNNL_ARG_WEIGHTS, packed},
                       {DNNL_ARG_BIAS, bb},
                       {DNNL_ARG_DST, yd}});
        s.wait();
        if (r >= 2) ms.push_back(bench::now_ms() - t0);
      }
      const char* name = wt == tag::any ? "any" : wt == tag::oi ? "oi" : "io";
      report(std::string("oneDNN ") + pd.impl_info_str() + " (" + name + ")", ms);
    }
    std::vector<double> ms;
    for (int r = 0; r < repeat + 2; ++r) {
      const double t0 = bench::now_ms();
      const float* pw = w.data();
      const float* px = x.data();
#pragma omp parallel for num_threads(T) schedule(static)
      for (int64_t o = 0; o < out; ++o) {
        const float* row = pw + o * in;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < in; ++i) acc += row[i] * px[i];
        y[o] = acc + b[o];
      }
      if (r >= 2) ms.push_back(bench::now_ms() - t0);
    }
    report("hand-written OpenMP GEMV (oi)", ms);
  }
  return 0;
}
