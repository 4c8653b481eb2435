// fc_bench: the kernel choice for batch-1 fully connected layers. Times one layer (default
// 4096 x 9216, imagenet1k's fc6) as oneDNN inner product with weights in the layout oneDNN picks
// (`any`), [out, in] (`oi`), [in, out] (`io`), and as the engine's gemv_f32 (engine/cpu/gemv.h),
// all weights on 2 MiB pages like the engine's. Each round runs a STREAM triad and then every
// kernel once; the ratios to that round's triad are reported as medians over the rounds.
//   fc_bench [--out N] [--in N] [--threads 1,2] [--repeat n]
#include <functional>
#include <iostream>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>

#include "bench_util.h"
#include "engine/cpu/gemv.h"

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
  engine::AlignedFloats w(out * in), x(in), y(out), b(out);
  for (int64_t i = 0; i < out * in; ++i)
    w.data()[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (int64_t i = 0; i < in; ++i) x.data()[i] = static_cast<float>(i % 7) - 3.0f;
  std::fill(b.data(), b.data() + out, 0.1f);
  const double mb = out * in * 4 / 1e6;
  std::printf("fully connected %lld x %lld (%.1f MB of weights), batch 1, median of %d rounds\n",
              (long long)out, (long long)in, mb, repeat);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  bench::Triad triad;
  struct Kernel {
    std::string name;
    std::function<void()> run;
    dnnl::memory packed;  // oneDNN's weights, in its layout
    std::vector<double> ms, ratio;
  };
  for (int T : thread_counts) {
    omp_set_num_threads(T);  // oneDNN fixes its thread count when a primitive is created
    std::vector<Kernel> kernels;
    std::vector<engine::AlignedFloats> storage;
    for (tag wt : {tag::any, tag::oi, tag::io}) {
      const dnnl::memory::desc src({1, in}, dt::f32, tag::nc), dst({1, out}, dt::f32, tag::nc),
          bias({out}, dt::f32, tag::x), wmd({out, in}, dt::f32, wt);
      dnnl::inner_product_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, src, wmd, bias, dst}, eng);
      storage.emplace_back(static_cast<int64_t>(pd.weights_desc().get_size() / 4));
      dnnl::memory user({{out, in}, dt::f32, tag::oi}, eng, w.data()),
          packed(pd.weights_desc(), eng, storage.back().data());
      dnnl::reorder(user, packed).execute(s, user, packed);
      s.wait();
      dnnl::memory xs(src, eng, x.data()), yd(dst, eng, y.data()), bb(bias, eng, b.data());
      dnnl::inner_product_forward ip(pd);
      const char* name = wt == tag::any ? "any" : wt == tag::oi ? "oi" : "io";
      kernels.push_back({std::string("oneDNN ") + pd.impl_info_str() + " (" + name + ")",
                         [=, &s]() mutable {
                           ip.execute(s, {{DNNL_ARG_SRC, xs},
                                          {DNNL_ARG_WEIGHTS, packed},
                                          {DNNL_ARG_BIAS, bb},
                                          {DNNL_ARG_DST, yd}});
                           s.wait();
                         },
                         packed,
                         {},
                         {}});
    }
    if (engine::gemv_supported()) {
      kernels.push_back(
          {"serf gemv_f32 (oi, AVX-512)",
           [&, T] { engine::gemv_f32(w.data(), x.data(), b.data(), y.data(), out, in, false, T); },
           {},
           {},
           {}});
    }
    for (auto& k : kernels) k.run();  // warm-up
    std::vector<double> triads;
    for (int r = 0; r < repeat; ++r) {
      triads.push_back(triad.gb_per_s(T));
      for (auto& k : kernels) {
        const double t0 = bench::now_ms();
        k.run();
        k.ms.push_back(bench::now_ms() - t0);
        k.ratio.push_back(mb / k.ms.back() / triads.back());
      }
    }
    std::printf("T=%d  STREAM triad %.2f GB/s (median)\n", T, bench::median(triads));
    for (auto& k : kernels) {
      const double m = bench::median(k.ms);
      std::printf("  %-34s %8.3f ms %7.2f GB/s %5.0f%% of triad\n", k.name.c_str(), m, mb / m,
                  100.0 * bench::median(k.ratio));
    }
  }
  return 0;
}
