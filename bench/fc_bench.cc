// fc_bench: the kernel choice for batch-1 fully connected layers. Times one layer (default
// 4096 x 9216, imagenet1k's fc6) as oneDNN inner product with weights in the layout oneDNN picks
// (`any`), [out, in] (`oi`), [in, out] (`io`), as gemv_f32 (engine/cpu/gemv.h) on plain rows and
// as gemm_f32 at b = 1 on its panels (what the engine runs), all weights on 2 MiB pages like the
// engine's. Each round runs a STREAM triad and then every
// kernel once; the ratios to that round's triad are reported as medians over the rounds.
// --batches b1,b2,... times the batched kernel instead (gemm_f32 on its panels, per round and b
// a triad and an FMA-peak loop with the same T, then one call, `ms`, and a second right after
// it, `again_ms`) against the layer's bound max(weight bytes / triad, b x FLOPs / FMA
// peak), medians over the rounds. The first call is what a request sees (its layer follows other
// layers' weights and activations through memory); the second reads the same weights again at
// once, which ran 0-25 % faster here (docs/engine.md, session 27), so both are shown.
// --kernel onednn times oneDNN's inner product on the same batches instead of gemm_f32 (weights
// in its `any` layout for each b, reordered once before the rounds).
//   fc_bench [--out N] [--in N] [--threads 1,2] [--repeat n] [--batches 2,8,32]
//            [--kernel serf|onednn]
#include <functional>
#include <iostream>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <unordered_map>

#include "bench_util.h"
#include "engine/cpu/gemv.h"
#include "fma_peak.h"

using namespace serf;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

std::vector<int> ints(const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  for (std::string t; std::getline(ss, t, ',');) out.push_back(std::atoi(t.c_str()));
  return out;
}

// oneDNN's inner product on a batch of n rows of `x`, weights in the layout it picks for that
// shape (`any`), reordered from W [out, in] once, as an engine would at load, into 2 MiB pages.
class OneDnnBatch {
 public:
  OneDnnBatch(const dnnl::engine& eng, const engine::AlignedFloats& w, float* x, float* b, float* y,
              int64_t out, int64_t in, int64_t n)
      : s_(eng),
        pd_({dnnl::prop_kind::forward_inference,
             {{n, in}, dt::f32, tag::nc},
             {{out, in}, dt::f32, tag::any},
             {{out}, dt::f32, tag::x},
             {{n, out}, dt::f32, tag::nc}},
            eng),
        storage_(static_cast<int64_t>(pd_.weights_desc().get_size() / 4)) {
    name_ = pd_.impl_info_str();
    packed_ = dnnl::memory(pd_.weights_desc(), eng, storage_.data());
    dnnl::memory user({{out, in}, dt::f32, tag::oi}, eng, const_cast<float*>(w.data()));
    dnnl::reorder(user, packed_).execute(s_, user, packed_);
    s_.wait();
    args_ = {{DNNL_ARG_SRC, dnnl::memory(pd_.src_desc(), eng, x)},
             {DNNL_ARG_WEIGHTS, packed_},
             {DNNL_ARG_BIAS, dnnl::memory(pd_.bias_desc(), eng, b)},
             {DNNL_ARG_DST, dnnl::memory(pd_.dst_desc(), eng, y)}};
    ip_ = dnnl::inner_product_forward(pd_);
  }
  void run() {
    ip_.execute(s_, args_);
    s_.wait();
  }
  const std::string& name() const { return name_; }

 private:
  dnnl::stream s_;
  dnnl::inner_product_forward::primitive_desc pd_;
  engine::AlignedFloats storage_;  // 2 MiB pages, as the engine's weights and gemm_f32's panels
  dnnl::memory packed_;
  std::unordered_map<int, dnnl::memory> args_;
  dnnl::inner_product_forward ip_;
  std::string name_;
};

// gemm_f32 on W [out, in] (plain in `w`) for each b and T: median ms over `repeat` rounds, each
// round and b a triad, an FMA-peak loop and two calls of it (or of
// oneDNN, `onednn`; all buffers written before timing).
int batch_rounds(const engine::AlignedFloats& w, int64_t out, int64_t in,
                 const std::vector<int>& batches, const std::vector<int>& thread_counts, int repeat,
                 bool onednn) {
  engine::AlignedFloats panels(engine::gemm_panel_floats(out, in)), b(out);
  engine::pack_gemm_panels(w.data(), out, in, panels.data());
  std::fill(b.data(), b.data() + out, 0.1f);
  const int max_b = *std::max_element(batches.begin(), batches.end());
  engine::AlignedFloats x(in * max_b), y(out * max_b);
  for (int64_t i = 0; i < in * max_b; ++i) x.data()[i] = static_cast<float>(i % 7) - 3.0f;
  const double mb = static_cast<double>(out * in) * 4 / 1e6, gflop = 2e-9 * out * in;
  std::printf("%s %lld x %lld (%.1f MB of weights), median of %d rounds\n",
              onednn ? "oneDNN inner product" : "gemm_f32", (long long)out, (long long)in, mb,
              repeat);
  bench::Triad triad;
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  for (int T : thread_counts) {
    std::vector<std::unique_ptr<OneDnnBatch>> ip;
    if (onednn) {
      omp_set_num_threads(T);  // oneDNN fixes its thread count when a primitive is created
      for (int n : batches) {
        ip.push_back(
            std::make_unique<OneDnnBatch>(eng, w, x.data(), b.data(), y.data(), out, in, n));
        std::printf("T=%d b=%d oneDNN %s\n", T, n, ip.back()->name().c_str());
      }
    }
    std::printf("T=%d %5s %9s %7s %7s %9s %8s %7s %9s %7s\n", T, "b", "ms", "triad", "peak",
                "bound_ms", "GFLOP/s", "x_bound", "again_ms", "x_bound");
    std::vector<std::vector<double>> ms(batches.size()), x_bound(batches.size()),
        again(batches.size()), again_x(batches.size());
    std::vector<double> triads, peaks;
    for (int r = 0; r < repeat + 1; ++r) {
      for (size_t i = 0; i < batches.size(); ++i) {
        const double gbs = triad.gb_per_s(T), peak = bench::fma_peak_gflops(T, 1);
        const int n = batches[i];
        auto call = [&] {
          const double t0 = bench::now_ms();
          if (onednn) {
            ip[i]->run();
          } else {
            engine::gemm_f32(panels.data(), x.data(), b.data(), y.data(), out, in, n, false, T);
          }
          return bench::now_ms() - t0;
        };
        const double t = call(), t_again = call();
        if (r == 0) continue;  // warm-up round
        const double bound = std::max(mb / gbs, n * gflop / peak * 1e3);
        ms[i].push_back(t);
        x_bound[i].push_back(t / bound);
        again[i].push_back(t_again);
        again_x[i].push_back(t_again / bound);
        triads.push_back(gbs), peaks.push_back(peak);
      }
    }
    const double gbs = bench::median(triads), peak = bench::median(peaks);
    for (size_t i = 0; i < batches.size(); ++i) {
      const double m = bench::median(ms[i]), n = batches[i];
      std::printf("    %5d %9.3f %7.1f %7.1f %9.3f %8.1f %7.2f %9.3f %7.2f\n", batches[i], m, gbs,
                  peak, std::max(mb / gbs, n * gflop / peak * 1e3), n * gflop / m * 1e3,
                  bench::median(x_bound[i]), bench::median(again[i]), bench::median(again_x[i]));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t out = 4096, in = 9216;
  int repeat = 20;
  std::vector<int> thread_counts = {1, 2}, batches;
  bool onednn = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--out")
      out = std::atoll(v.c_str());
    else if (a == "--in")
      in = std::atoll(v.c_str());
    else if (a == "--repeat")
      repeat = std::atoi(v.c_str());
    else if (a == "--threads")
      thread_counts = ints(v);
    else if (a == "--batches")
      batches = ints(v);
    else if (a == "--kernel" && v != "serf" && v != "onednn")
      return std::cerr << "fc_bench: error: --kernel " << v << ": want serf or onednn\n", 2;
    else if (a == "--kernel")
      onednn = v == "onednn";
    else {
      std::cerr << "fc_bench: error: unknown argument " << a
                << " (use --out --in --threads --repeat --batches --kernel serf|onednn)\n";
      return 2;
    }
  }
  const auto positive = [](const std::vector<int>& v) {
    return std::all_of(v.begin(), v.end(), [](int n) { return n >= 1; });
  };
  if (out < 1 || in < 1 || repeat < 1 || thread_counts.empty() || !positive(thread_counts) ||
      !positive(batches)) {
    std::cerr << "fc_bench: error: --out, --in, --repeat, --threads and --batches must be at "
                 "least 1\n";
    return 2;
  }
  engine::AlignedFloats w(out * in), x(in), y(out), b(out);
  for (int64_t i = 0; i < out * in; ++i)
    w.data()[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (int64_t i = 0; i < in; ++i) x.data()[i] = static_cast<float>(i % 7) - 3.0f;
  std::fill(b.data(), b.data() + out, 0.1f);
  if (!batches.empty()) {
    if (!engine::gemv_supported()) return std::cerr << "fc_bench: error: no AVX-512 here\n", 2;
    return batch_rounds(w, out, in, batches, thread_counts, repeat, onednn);
  }
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
      // The batched kernel at b = 1 on its panels: one weight copy could then serve every b.
      storage.emplace_back(engine::gemm_panel_floats(out, in));
      engine::pack_gemm_panels(w.data(), out, in, storage.back().data());
      const float* panels = storage.back().data();
      kernels.push_back({"serf gemm_f32 b=1 (panels)",
                         [&, T, panels] {
                           engine::gemm_f32(panels, x.data(), b.data(), y.data(), out, in, 1, false,
                                            T);
                         },
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
