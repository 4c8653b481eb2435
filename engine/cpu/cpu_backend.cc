// The oneDNN CPU backend. prepare() turns the plan's LayerSteps (engine/layer_steps.h: which
// layers run on this rank's slice, where the K ranks all-gather, which relu is fused) into Steps:
// one oneDNN primitive per layer (a fused relu as a post-op) and this rank's weight slice
// reordered into the primitive's preferred layout. new_slot() allocates one request's activations
// and scratchpad and binds every primitive argument, so run() only calls dnnl_primitive_execute
// and the exchange.
//
// With K > 1 activations between layers are plain NCHW (flat after flatten), one buffer per
// layer, and the all-gather is in place. With K = 1 they keep the layout each primitive prefers
// until flatten. lrn and softmax run on the whole activation on every rank (cheap next to the
// weighted layers, and lrn needs neighbouring channels).

#include "engine/cpu/cpu_backend.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/aligned_floats.h"
#include "engine/cpu/gemv.h"
#include "engine/layer_steps.h"
#include "engine/prepared_cache.h"

namespace serf::engine {
namespace {

using model::LayerKind;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Sets the calling thread's OpenMP thread count (a per-thread ICV) for the scope.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// When the calling thread was given exactly T cores (a runtime slot is, see mpi/node.cc), pins its
// OpenMP thread i to the i-th of them. Left to Linux, the team of a request that arrives after an
// idle gap is often woken onto one core (wake-affine placement): measured on a 2-core node, T = 2
// then served a lone request in 17-22 ms against 12 ms back to back. A thread with more cores
// than T (an in-process Executor's slots, `serf infer`) is left floating.
void pin_team(int threads) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) != threads) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  }
#pragma omp parallel num_threads(threads)
  {
    const int i = omp_get_thread_num();
    if (i < static_cast<int>(cpus.size())) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[static_cast<size_t>(i)], &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);  // best effort: placement only
    }
  }
}

dnnl::memory::dims nchw_dims(int c, int h, int w) { return {1, c, h, w}; }

// Layouts can flow from layer to layer when one flatten turns the spatial part into the flat part
// and only flat layers (fully_connected, relu, softmax) follow it: the output is then plain.
bool layouts_may_flow(const model::ModelPlan& plan) {
  size_t flatten = plan.spec.layers.size();
  for (size_t i = 0; i < plan.spec.layers.size(); ++i) {
    const LayerKind kind = plan.spec.layers[i].kind;
    if (kind == LayerKind::kFlatten) {
      if (flatten != plan.spec.layers.size()) return false;
      flatten = i;
    } else if (flatten < i && kind != LayerKind::kFullyConnected && kind != LayerKind::kRelu &&
               kind != LayerKind::kSoftmax) {
      return false;
    }
  }
  return flatten < plan.spec.layers.size();
}

// One layer as executed by this rank: its LayerStep (buffers, slices, gathers, fused relu) and the
// oneDNN objects that carry it out.
struct Step : LayerStep {
  explicit Step(const LayerStep& s) : LayerStep(s) {}
  dnnl::primitive prim;
  dnnl::memory::desc plain_src, plain_dst;  // the layer's view of the activation buffers
  dnnl::memory::desc src_md, dst_md;        // what the primitive wants
  dnnl::memory::desc scratch_md;
  dnnl::primitive src_reorder, dst_reorder;  // empty when the layouts agree
  dnnl::memory weights, bias;                // shared, read-only
  bool gemv = false;    // fully_connected run by gemv_f32 instead of `prim` (engine/cpu/gemv.h)
  int64_t gemv_in = 0;  // its input length
};

class CpuPreparedModel;

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(std::shared_ptr<const CpuPreparedModel> model);
  Status run(const float* input, float* output, ActivationExchange& exchange,
             LayerTimings* timings) override;
  Partition partition() const override;
  int threads() const override;

 private:
  struct Call {
    dnnl_primitive_t prim = nullptr;
    std::vector<dnnl_exec_arg_t> args;
  };
  struct BoundStep {
    Call src_reorder, main, dst_reorder;
    const float *gemv_x = nullptr, *gemv_w = nullptr, *gemv_b = nullptr;  // when step.gemv
    float* gemv_y = nullptr;
  };
  static Status execute(const Call& call, dnnl_stream_t stream);

  std::shared_ptr<const CpuPreparedModel> model_;
  dnnl::stream stream_;
  AlignedFloats input_;
  std::vector<AlignedFloats> buffers_;
  AlignedFloats scratch_;
  std::vector<AlignedFloats> staging_;  // reordered src/dst per step (empty when not needed)
  std::vector<dnnl::memory> memories_;  // keeps every bound memory alive
  std::vector<BoundStep> bound_;
  std::thread::id team_pinned_for_;  // the calling thread whose OpenMP team pin_team placed
};

class CpuPreparedModel final : public PreparedModel,
                               public std::enable_shared_from_this<CpuPreparedModel> {
 public:
  static StatusOr<std::shared_ptr<CpuPreparedModel>> create(const model::ModelPlan& plan,
                                                            const model::Weights& weights,
                                                            Partition partition, int threads);
  StatusOr<std::unique_ptr<Executable>> new_slot() override {
    try {
      return std::unique_ptr<Executable>(new CpuExecutable(shared_from_this()));
    } catch (const dnnl::error& e) {
      return Internal(std::string("oneDNN: ") + e.what());
    } catch (const std::bad_alloc&) {
      return Internal("out of memory allocating a slot's activations and scratchpad");
    }
  }
  const model::ModelPlan& plan() const override { return plan_; }
  Partition partition() const override { return partition_; }
  int threads() const override { return threads_; }
  int64_t resident_weight_bytes() const override { return weight_bytes_; }

  model::ModelPlan plan_;
  Partition partition_;
  int threads_ = 1;
  int64_t weight_bytes_ = 0;
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  std::vector<Step> steps_;
  std::vector<AlignedFloats> weight_storage_;  // behind every Step's weights and bias
  std::vector<int64_t> buffer_sizes_;          // floats
  size_t scratch_bytes_ = 0;
  int output_buffer_ = -1;
  bool gather_output_ = false;
  int gather_output_layer_ = -1;
  GatherLayout output_gather_;

 private:
  Status build(const model::Weights& weights);
  StatusOr<const model::Tensor*> tensor(const model::Weights& weights, const std::string& name,
                                        const std::vector<int64_t>& shape) const;
  // Copies rows [offset, offset + count) of a [rows, ...] tensor into `md` via a reorder.
  dnnl::memory slice_into(const model::Tensor& t, int offset, int count,
                          const dnnl::memory::desc& plain, const dnnl::memory::desc& md);
  // The primitive, its layouts and scratchpad, and reorders to/from the plain activation layout.
  template <typename Primitive, typename PrimitiveDesc>
  void set_primitive(Step& step, const PrimitiveDesc& pd) {
    step.prim = Primitive(pd);
    step.src_md = pd.src_desc();
    step.dst_md = pd.dst_desc();
    finish_step(step, pd);
  }
  // The same for conv2d / fully_connected, plus this rank's weight and bias slices.
  template <typename Primitive, typename PrimitiveDesc>
  void set_weighted_primitive(Step& step, const PrimitiveDesc& pd, const model::Tensor& w,
                              const model::Tensor& b, Slice s, const dnnl::memory::desc& plain_w,
                              const dnnl::memory::desc& bias_md) {
    set_primitive<Primitive>(step, pd);
    step.weights = slice_into(w, s.offset, s.count, plain_w, pd.weights_desc());
    step.bias = slice_into(b, s.offset, s.count, bias_md, pd.bias_desc());
  }
  void finish_step(Step& step, const dnnl::primitive_desc_base& pd);
  static void fuse_relu(dnnl::primitive_attr& attr) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
};

StatusOr<const model::Tensor*> CpuPreparedModel::tensor(const model::Weights& weights,
                                                        const std::string& name,
                                                        const std::vector<int64_t>& shape) const {
  const model::Tensor* t = weights.find(name);
  if (t == nullptr) return NotFound("weights: tensor '" + name + "' is missing");
  if (t->shape != shape) {
    std::string want, got;
    for (int64_t d : shape) want += (want.empty() ? "" : "x") + std::to_string(d);
    for (int64_t d : t->shape) got += (got.empty() ? "" : "x") + std::to_string(d);
    return InvalidArgument("weights: tensor '" + name + "' has shape " + got +
                           ", the model needs " + want);
  }
  return t;
}

dnnl::memory CpuPreparedModel::slice_into(const model::Tensor& t, int offset, int count,
                                          const dnnl::memory::desc& plain,
                                          const dnnl::memory::desc& md) {
  const int64_t row = t.elements() / t.shape[0];
  float* src = const_cast<float*>(t.data.data()) + int64_t{offset} * row;
  dnnl::memory user(plain, engine_, src);
  // Our storage rather than oneDNN's: big slices go on 2 MiB pages (aligned_floats.h).
  weight_storage_.emplace_back(
      static_cast<int64_t>((md.get_size() + sizeof(float) - 1) / sizeof(float)));
  dnnl::memory packed(md, engine_, weight_storage_.back().data());
  dnnl::stream s(engine_);
  dnnl::reorder(user, packed).execute(s, user, packed);
  s.wait();
  weight_bytes_ += static_cast<int64_t>(md.get_size());
  (void)count;
  return packed;
}

void CpuPreparedModel::finish_step(Step& step, const dnnl::primitive_desc_base& pd) {
  step.scratch_md = pd.scratchpad_desc();
  scratch_bytes_ = std::max(scratch_bytes_, step.scratch_md.get_size());
  if (step.src_md != step.plain_src)
    step.src_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine_, step.plain_src, engine_, step.src_md));
  if (step.dst_md != step.plain_dst)
    step.dst_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine_, step.dst_md, engine_, step.plain_dst));
}

StatusOr<std::shared_ptr<CpuPreparedModel>> CpuPreparedModel::create(const model::ModelPlan& plan,
                                                                     const model::Weights& weights,
                                                                     Partition partition,
                                                                     int threads) {
  if (threads < 1) {
    return InvalidArgument("intra-node parallelism T = " + std::to_string(threads) +
                           " must be at least 1");
  }
  auto prepared = std::make_shared<CpuPreparedModel>();
  prepared->plan_ = plan;
  prepared->partition_ = partition;
  prepared->threads_ = threads;
  // Primitives pick their work split from the creating thread's OpenMP thread count.
  ScopedOmpThreads omp_threads(threads);
  SERF_RETURN_IF_ERROR(prepared->build(weights));
  return prepared;
}

Status CpuPreparedModel::build(const model::Weights& weights) {
  SERF_ASSIGN_OR_RETURN(const LayerSteps layout, plan_layer_steps(plan_, partition_));
  buffer_sizes_ = layout.buffer_sizes;
  gather_output_ = layout.gather_output;
  gather_output_layer_ = layout.gather_output_layer;
  output_gather_ = layout.output_gather;
  const auto fwd = dnnl::prop_kind::forward_inference;

  // With K = 1 nothing is gathered, so each layer's output may stay in the layout its primitive
  // prefers (blocked / channels-last) until flatten: no reorder pair around every conv2d.
  // `cur_md` is the layout the current activation is stored in.
  const bool flow = partition_.ranks == 1 && layouts_may_flow(plan_);
  dnnl::memory::desc cur_md(
      nchw_dims(plan_.spec.input.channels, plan_.spec.input.height, plan_.spec.input.width),
      dt::f32, tag::nchw);
  // A flatten that makes a flowing layout plain writes a copy to a buffer of its own; the layers
  // after it read that copy instead of `flattened_from`.
  int flattened_from = -2, flattened_to = -2;
  auto reads = [&](int buffer) { return buffer == flattened_from ? flattened_to : buffer; };

  for (const LayerStep& planned : layout.steps) {
    const model::LayerSpec& spec = plan_.spec.layers[static_cast<size_t>(planned.layer)];
    const model::LayerInfo& info = plan_.layers[static_cast<size_t>(planned.layer)];
    Step step(planned);
    step.in_buffer = reads(step.in_buffer);
    step.out_buffer = reads(step.out_buffer);
    const dnnl::memory::desc plain_in(nchw_dims(info.in.channels, info.in.height, info.in.width),
                                      dt::f32, tag::nchw);
    if (spec.kind == LayerKind::kFlatten && flow && cur_md != plain_in) {
      step.noop = false;
      flattened_from = step.in_buffer;
      flattened_to = step.out_buffer = static_cast<int>(buffer_sizes_.size());
      buffer_sizes_.push_back(info.in.elements());
      step.plain_src = step.src_md = cur_md;
      step.plain_dst = step.dst_md = plain_in;
      step.prim = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, cur_md, engine_, plain_in));
      cur_md = plain_in;
      steps_.push_back(std::move(step));
      continue;
    }
    if (step.noop) {
      steps_.push_back(std::move(step));
      continue;
    }
    dnnl::primitive_attr attr;  // a fresh one: copies of a dnnl handle share the object
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

    try {
      switch (spec.kind) {
        case LayerKind::kConv2d: {
          const Slice s = step.out_slice;
          const int cin = info.in.channels;
          SERF_ASSIGN_OR_RETURN(const model::Tensor* w,
                                tensor(weights, spec.name + ".weight",
                                       {info.out.channels, cin, spec.kernel, spec.kernel}));
          SERF_ASSIGN_OR_RETURN(const model::Tensor* b,
                                tensor(weights, spec.name + ".bias", {info.out.channels}));
          step.plain_src = {nchw_dims(cin, info.in.height, info.in.width), dt::f32, tag::nchw};
          step.plain_dst = {nchw_dims(s.count, info.out.height, info.out.width), dt::f32,
                            tag::nchw};
          const dnnl::memory::dims wdims = {s.count, cin, spec.kernel, spec.kernel};
          if (flow) step.plain_src = cur_md;
          const dnnl::memory::desc any_src(step.plain_src.dims(), dt::f32, tag::any);
          const dnnl::memory::desc any_dst(step.plain_dst.dims(), dt::f32, tag::any);
          const dnnl::memory::desc any_w(wdims, dt::f32, tag::any);
          const dnnl::memory::desc bias_md({s.count}, dt::f32, tag::x);
          dnnl::convolution_forward::desc d(fwd, dnnl::algorithm::convolution_direct, any_src,
                                            any_w, bias_md, any_dst, {spec.stride, spec.stride},
                                            {spec.pad, spec.pad}, {spec.pad, spec.pad});
          if (step.fused_relu) fuse_relu(attr);
          const dnnl::convolution_forward::primitive_desc pd(d, attr, engine_);
          if (flow) step.plain_dst = pd.dst_desc();
          set_weighted_primitive<dnnl::convolution_forward>(step, pd, *w, *b, s,
                                                            {wdims, dt::f32, tag::oihw}, bias_md);
          break;
        }
        case LayerKind::kFullyConnected: {
          const Slice s = step.out_slice;
          const int64_t in = info.in.elements();
          SERF_ASSIGN_OR_RETURN(const model::Tensor* w,
                                tensor(weights, spec.name + ".weight", {info.out.channels, in}));
          SERF_ASSIGN_OR_RETURN(const model::Tensor* b,
                                tensor(weights, spec.name + ".bias", {info.out.channels}));
          step.plain_src = {{1, in}, dt::f32, tag::nc};
          step.plain_dst = {{1, s.count}, dt::f32, tag::nc};
          const dnnl::memory::dims wdims = {s.count, in};
          const dnnl::memory::desc bias_md({s.count}, dt::f32, tag::x);
          // Plain [out, in] weights ("oi"): gemv_f32 reads them so, and where the CPU lacks AVX-512
          // oneDNN's jit GEMV for "oi" is its fastest batch-1 kernel (the brgemm one it picks for
          // `any` streams the weights at half the speed; bench/fc_bench).
          dnnl::inner_product_forward::desc d(fwd, step.plain_src, {wdims, dt::f32, tag::oi},
                                              bias_md, step.plain_dst);
          if (step.fused_relu) fuse_relu(attr);
          const dnnl::inner_product_forward::primitive_desc pd(d, attr, engine_);
          set_weighted_primitive<dnnl::inner_product_forward>(step, pd, *w, *b, s,
                                                              {wdims, dt::f32, tag::oi}, bias_md);
          step.gemv = gemv_supported();
          step.gemv_in = in;
          break;
        }
        case LayerKind::kRelu: {
          // Element-wise: on this rank's part only, viewed as a flat vector.
          step.plain_src = flow ? cur_md : dnnl::memory::desc({1, step.elements}, dt::f32, tag::nc);
          step.plain_dst = step.plain_src;
          dnnl::eltwise_forward::desc d(fwd, dnnl::algorithm::eltwise_relu, step.plain_src, 0.0f,
                                        0.0f);
          const dnnl::eltwise_forward::primitive_desc pd(d, attr, engine_);
          set_primitive<dnnl::eltwise_forward>(step, pd);
          break;
        }
        case LayerKind::kMaxPool:
        case LayerKind::kAvgPool: {
          // Channel-local: this rank's channel block only (all channels when not sliced).
          const int c = step.channels;
          step.plain_src = {nchw_dims(c, info.in.height, info.in.width), dt::f32, tag::nchw};
          step.plain_dst = {nchw_dims(c, info.out.height, info.out.width), dt::f32, tag::nchw};
          const auto alg = spec.kind == LayerKind::kMaxPool
                               ? dnnl::algorithm::pooling_max
                               : dnnl::algorithm::pooling_avg_include_padding;
          // PyTorch's floor rule gives right padding equal to the left one (oneDNN checks
          // (in - kernel + pad_l + pad_r) / stride + 1 == out with integer division).
          if (flow) step.plain_src = cur_md;
          dnnl::pooling_forward::desc d(
              fwd, alg, step.plain_src,
              flow ? dnnl::memory::desc(step.plain_dst.dims(), dt::f32, tag::any) : step.plain_dst,
              {spec.stride, spec.stride}, {spec.kernel, spec.kernel}, {spec.pad, spec.pad},
              {spec.pad, spec.pad});
          const dnnl::pooling_forward::primitive_desc pd(d, attr, engine_);
          if (flow) step.plain_dst = pd.dst_desc();
          set_primitive<dnnl::pooling_forward>(step, pd);
          break;
        }
        case LayerKind::kLrn: {
          step.plain_src = {nchw_dims(info.in.channels, info.in.height, info.in.width), dt::f32,
                            tag::nchw};
          step.plain_dst = step.plain_src;
          // LRN is fast only in the blocked layouts; let the primitive choose and reorder around
          // it.
          dnnl::memory::desc want = step.plain_src;
          if (info.in.channels % 16 == 0) want = {step.plain_src.dims(), dt::f32, tag::nChw16c};
          if (flow) {
            step.plain_src = cur_md;
            step.plain_dst = want;
          }
          dnnl::lrn_forward::desc d(fwd, dnnl::algorithm::lrn_across_channels, want, spec.lrn_size,
                                    spec.lrn_alpha, spec.lrn_beta, spec.lrn_k);
          const dnnl::lrn_forward::primitive_desc pd(d, attr, engine_);
          set_primitive<dnnl::lrn_forward>(step, pd);
          break;
        }
        case LayerKind::kSoftmax: {
          step.plain_src = {{1, info.in.elements()}, dt::f32, tag::nc};
          step.plain_dst = step.plain_src;
          dnnl::softmax_forward::desc d(fwd, step.plain_src, 1);
          const dnnl::softmax_forward::primitive_desc pd(d, attr, engine_);
          set_primitive<dnnl::softmax_forward>(step, pd);
          break;
        }
        case LayerKind::kFlatten:
          break;  // a noop step, or the reorder above
      }
    } catch (const dnnl::error& e) {
      return Internal("layer '" + spec.name + "': oneDNN: " + e.what());
    } catch (const std::bad_alloc&) {
      return Internal("layer '" + spec.name + "': out of memory for its weights");
    }
    // Blocked layouts may pad channels: size the buffer for the stored layout.
    buffer_sizes_[step.out_buffer] = std::max(
        buffer_sizes_[step.out_buffer],
        static_cast<int64_t>((step.plain_dst.get_size() + sizeof(float) - 1) / sizeof(float)));
    if (flow) cur_md = step.plain_dst;
    steps_.push_back(std::move(step));
  }
  output_buffer_ = reads(layout.output_buffer);
  return Status::Ok();
}

CpuExecutable::CpuExecutable(std::shared_ptr<const CpuPreparedModel> model)
    : model_(std::move(model)), stream_(model_->engine_) {
  const auto& eng = model_->engine_;
  input_ = AlignedFloats(model_->plan_.spec.input.elements());
  for (int64_t size : model_->buffer_sizes_) buffers_.emplace_back(size);
  scratch_ = AlignedFloats(
      static_cast<int64_t>((model_->scratch_bytes_ + sizeof(float) - 1) / sizeof(float)));
  auto buffer = [&](int index) { return index < 0 ? input_.data() : buffers_[index].data(); };
  auto bind = [&](const dnnl::memory::desc& md, void* p) {
    memories_.emplace_back(md, eng, p);
    return memories_.back().get();
  };
  auto staged = [&](const dnnl::memory::desc& md) {
    staging_.emplace_back(
        static_cast<int64_t>((md.get_size() + sizeof(float) - 1) / sizeof(float)));
    return bind(md, staging_.back().data());
  };
  for (const Step& step : model_->steps_) {
    BoundStep b;
    if (!step.noop) {
      dnnl_memory_t plain_src = bind(step.plain_src, buffer(step.in_buffer) + step.in_offset);
      dnnl_memory_t plain_dst = bind(step.plain_dst, buffer(step.out_buffer) + step.out_offset);
      dnnl_memory_t src = plain_src, dst = plain_dst;
      if (step.src_reorder) {
        src = staged(step.src_md);
        b.src_reorder = {step.src_reorder.get(), {{DNNL_ARG_FROM, plain_src}, {DNNL_ARG_TO, src}}};
      }
      if (step.dst_reorder) {
        dst = staged(step.dst_md);
        b.dst_reorder = {step.dst_reorder.get(), {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, plain_dst}}};
      }
      if (step.gemv) {
        b.gemv_x = buffer(step.in_buffer) + step.in_offset;
        b.gemv_y = buffer(step.out_buffer) + step.out_offset;
        b.gemv_w = static_cast<const float*>(step.weights.get_data_handle());
        b.gemv_b = static_cast<const float*>(step.bias.get_data_handle());
      }
      b.main.prim = step.prim.get();
      b.main.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
      if (step.weights) b.main.args.push_back({DNNL_ARG_WEIGHTS, step.weights.get()});
      if (step.bias) b.main.args.push_back({DNNL_ARG_BIAS, step.bias.get()});
      if (step.scratch_md.get_size() > 0) {
        b.main.args.push_back({DNNL_ARG_SCRATCHPAD, bind(step.scratch_md, scratch_.data())});
      }
    }
    bound_.push_back(std::move(b));
  }
}

Partition CpuExecutable::partition() const { return model_->partition_; }
int CpuExecutable::threads() const { return model_->threads_; }

Status CpuExecutable::execute(const Call& call, dnnl_stream_t stream) {
  if (call.prim == nullptr) return Status::Ok();
  const dnnl_status_t s = dnnl_primitive_execute(
      call.prim, stream, static_cast<int>(call.args.size()), call.args.data());
  if (s != dnnl_success)
    return Internal("oneDNN primitive execution failed (status " + std::to_string(s) + ")");
  return Status::Ok();
}

Status CpuExecutable::run(const float* input, float* output, ActivationExchange& exchange,
                          LayerTimings* timings) {
  const CpuPreparedModel& m = *model_;
  SERF_RETURN_IF_ERROR(check_exchange(exchange, m.partition_));
  if (timings != nullptr) {
    if (timings->compute_ms.size() != m.steps_.size()) timings->resize(m.steps_.size());
    std::fill(timings->exchange_ms.begin(), timings->exchange_ms.end(), 0.0);  // summed below
  }
  // Per-thread ICV: this request's OpenMP regions (oneDNN's included) use T threads.
  omp_set_num_threads(m.threads_);
  if (team_pinned_for_ != std::this_thread::get_id()) {
    pin_team(m.threads_);
    team_pinned_for_ = std::this_thread::get_id();
  }
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  std::memcpy(input_.data(), input, sizeof(float) * static_cast<size_t>(input_.size()));
  dnnl_stream_t stream = stream_.get();
  auto buffer = [&](int index) { return index < 0 ? input_.data() : buffers_[index].data(); };

  for (size_t i = 0; i < m.steps_.size(); ++i) {
    const Step& step = m.steps_[i];
    if (step.gather_before) {
      const auto t0 = clock::now();
      SERF_RETURN_IF_ERROR(exchange.all_gather(buffer(step.in_buffer), step.gather));
      if (timings != nullptr) timings->exchange_ms[step.gather_layer] += ms_since(t0);
    }
    if (timings != nullptr) timings->fused[i] = step.noop && step.kind == LayerKind::kRelu;
    if (step.noop) {
      if (timings != nullptr) timings->compute_ms[i] = 0.0;
      continue;
    }
    const auto t0 = clock::now();
    const BoundStep& b = bound_[i];
    if (step.gemv) {
      // oneDNN's CPU stream runs in order and returns when done: the input is ready here.
      gemv_f32(b.gemv_w, b.gemv_x, b.gemv_b, b.gemv_y, step.out_slice.count, step.gemv_in,
               step.fused_relu, m.threads_);
    } else {
      SERF_RETURN_IF_ERROR(execute(b.src_reorder, stream));
      SERF_RETURN_IF_ERROR(execute(b.main, stream));
      SERF_RETURN_IF_ERROR(execute(b.dst_reorder, stream));
    }
    if (timings != nullptr) {
      dnnl_stream_wait(stream);
      timings->compute_ms[i] = ms_since(t0);
    }
  }
  dnnl_stream_wait(stream);
  float* out = buffer(m.output_buffer_);
  if (m.gather_output_) {
    const auto t0 = clock::now();
    SERF_RETURN_IF_ERROR(exchange.all_gather(out, m.output_gather_));
    if (timings != nullptr) timings->exchange_ms[m.gather_output_layer_] += ms_since(t0);
  }
  std::memcpy(output, out, sizeof(float) * static_cast<size_t>(m.plan_.output().elements()));
  return Status::Ok();
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  StatusOr<std::shared_ptr<PreparedModel>> prepare(const model::ModelPlan& plan,
                                                   const model::Weights& weights,
                                                   Partition partition, int threads) override {
    return cache_.get_or_create(plan, weights, partition, threads, [&] {
      return CpuPreparedModel::create(plan, weights, partition, threads);
    });
  }

 private:
  PreparedCache<CpuPreparedModel> cache_;  // shares a configuration's slices while it is held
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace serf::engine
