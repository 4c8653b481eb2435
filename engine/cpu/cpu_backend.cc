// The oneDNN CPU backend. prepare() plans the graph's LayerSteps (engine/layer_steps.h: which part
// of each layer this rank computes, where the K ranks all-gather, which layers run fused, which
// buffers the tensors share) and turns each into calls (cpu_steps.cc: one builder per layer kind);
// new_slot() allocates one request's buffers and binds every call (cpu_executable.cc), so run()
// only executes primitives and the exchange.

#include "engine/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>

#include "cpu_model.h"
#include "engine/prepared_cache.h"

namespace serf::engine {
namespace cpu {
namespace {

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

// About 10 us of one core's work (measured on cifar10, docs/engine.md): 1M multiply-adds of a
// convolution at ~100 G/s, or 64K floats of a pooling, LRN or element-wise pass. Below that per
// thread, starting (and often waking) a team costs more than the split gains.
constexpr double kMinMacsPerThread = 1 << 20;
constexpr double kMinFloatsPerThread = 1 << 16;

}  // namespace

int step_threads(const LayerStep& step, const model::LayerInfo& info, int batch, int threads) {
  if (threads <= 1 || step.noop) return 1;
  // This rank's share of the layer: its output channels (conv2d, fully_connected) or the channels
  // it processes (channel-local steps); all of it when replicated or K = 1.
  double share = 1.0;
  if (!step.replicated && info.connections > 0 && step.out_slice.count > 0 &&
      info.out.channels > 0) {
    share = static_cast<double>(step.out_slice.count) / info.out.channels;
  } else if (!step.replicated && step.channels.count > 0 && info.in.channels > 0) {
    share = static_cast<double>(step.channels.count) / info.in.channels;
  }
  double floats = static_cast<double>(info.out.elements());
  for (const model::Shape& in : info.ins) floats += static_cast<double>(in.elements());
  const double macs = static_cast<double>(info.connections) * batch * share;
  // Whichever bounds the step: its multiply-adds, or the floats it moves (a depthwise or a pooling
  // layer does few multiply-adds per float).
  const double per_thread =
      std::max(macs / kMinMacsPerThread, floats * batch * share / kMinFloatsPerThread);
  return std::clamp(static_cast<int>(per_thread), 1, threads);
}

StatusOr<std::shared_ptr<CpuPreparedModel>> CpuPreparedModel::create(
    const model::ModelPlan& plan, const model::Weights& weights, Partition partition, int threads,
    int batch, std::shared_ptr<SharedWeights> shared) {
  if (threads < 1) {
    return InvalidArgument("intra-node parallelism T = " + std::to_string(threads) +
                           " must be at least 1");
  }
  if (batch < 1)
    return InvalidArgument("batch b = " + std::to_string(batch) + " must be at least 1");
  auto prepared = std::make_shared<CpuPreparedModel>();
  prepared->batch_ = batch;
  prepared->channel_major_input_ = partition.ranks > 1 && batch > 1;
  prepared->plan_ = plan;
  prepared->partition_ = partition;
  prepared->threads_ = threads;
  prepared->shared_ = std::move(shared);
  // Primitives pick their work split from the creating thread's OpenMP thread count.
  ScopedOmpThreads omp_threads(threads);
  SERF_RETURN_IF_ERROR(prepared->build(weights));
  return prepared;
}

Status CpuPreparedModel::build(const model::Weights& weights) {
  SERF_ASSIGN_OR_RETURN(layout_, plan_layer_steps(plan_, partition_, batch_));
  buffer_floats_ = layout_.buffer_sizes;
  StepBuilder builder(*this, weights);
  for (const LayerStep& planned : layout_.steps) {
    CpuStep step;
    step.threads =
        step_threads(planned, plan_.layers[static_cast<size_t>(planned.layer)], batch_, threads_);
    // Primitives pick their work split from the creating thread's OpenMP thread count.
    ScopedOmpThreads omp_threads(step.threads);
    SERF_RETURN_IF_ERROR(builder.build(planned, &step));
    steps_.push_back(std::move(step));
  }
  try {
    return builder.finish_output();
  } catch (const dnnl::error& e) {
    return Internal(std::string("output: oneDNN: ") + e.what());
  }
}

}  // namespace cpu

namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  StatusOr<std::shared_ptr<PreparedModel>> prepare(const model::ModelPlan& plan,
                                                   const model::Weights& weights,
                                                   Partition partition, int threads,
                                                   int batch = 1) override {
    return cache_.get_or_create(plan, weights, partition, threads, batch, [&] {
      return cpu::CpuPreparedModel::create(plan, weights, partition, threads, batch, shared_);
    });
  }
  int64_t resident_weight_bytes() const override { return shared_->resident_bytes(); }
  int weight_layouts_beyond_first() const override { return shared_->layouts_beyond_first(); }

 private:
  PreparedCache<cpu::CpuPreparedModel> cache_;  // shares a configuration's slices while held
  // Shares packed tensors across configurations, above all across batch sizes.
  std::shared_ptr<cpu::SharedWeights> shared_ = std::make_shared<cpu::SharedWeights>();
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace serf::engine
