// One slot of a CpuPreparedModel: its own input, activation, staging and scratchpad buffers, with
// every call's operands bound to them once (new_slot), so run() allocates nothing.
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "cpu_model.h"
#include "engine/cpu/gemv.h"

namespace serf::engine::cpu {
namespace {

// When the calling thread was given exactly T cores (a runtime slot is, see mpi/node.cc), pins its
// OpenMP thread i to the i-th of them. Left to Linux, the team of a request that arrives after an
// idle gap is often woken onto one core (wake-affine placement): measured on a 2-core node, T = 2
// then served a lone request in 17-22 ms against 12 ms back to back. A thread with more cores
// than T (`serf infer`, or tests running several slots in one process) is left floating.
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

// fully_connected by the AVX-512 kernel on the layer's panels (any batch, batch 1 included).
void run_fc(const GemvCall& g, const float* x, float* y, int threads) {
  gemm_f32(g.weights, x, g.bias, y, g.rows, g.cols, g.batch, g.relu, threads);
}

class CpuExecutable final : public Executable {
 public:
  explicit CpuExecutable(std::shared_ptr<const CpuPreparedModel> model);
  Status run(const float* input, float* output, ActivationExchange& exchange,
             LayerTimings* timings) override;
  Partition partition() const override { return model_->partition_; }
  int threads() const override { return model_->threads_; }

 private:
  struct Bound {  // a Call with its arguments
    dnnl_primitive_t prim = nullptr;
    std::vector<dnnl_exec_arg_t> args;
  };
  struct BoundStep {
    std::vector<Bound> calls;
    const float* gemv_x = nullptr;
    float* gemv_y = nullptr;
  };
  float* address(const Operand& op) const;
  Bound bind(const Call& call);
  Status execute(const Bound& call) const;

  std::shared_ptr<const CpuPreparedModel> model_;
  dnnl::stream stream_;
  AlignedFloats input_, scratch_;
  std::vector<AlignedFloats> buffers_, staging_;
  std::vector<dnnl::memory> memories_;  // keeps every bound memory alive
  std::vector<BoundStep> bound_;
  std::vector<Bound> output_calls_;
  std::thread::id team_pinned_for_;  // the calling thread whose OpenMP team pin_team placed
};

CpuExecutable::CpuExecutable(std::shared_ptr<const CpuPreparedModel> model)
    : model_(std::move(model)), stream_(model_->engine_) {
  const CpuPreparedModel& m = *model_;
  input_ = AlignedFloats(m.plan_.spec.input.elements() * m.batch_);
  for (int64_t floats : m.buffer_floats_) buffers_.emplace_back(floats);
  for (int64_t floats : m.staging_floats_) staging_.emplace_back(floats);
  scratch_ =
      AlignedFloats(static_cast<int64_t>((m.scratch_bytes_ + sizeof(float) - 1) / sizeof(float)));
  for (const CpuStep& step : m.steps_) {
    BoundStep b;
    for (const Call& call : step.calls) b.calls.push_back(bind(call));
    if (step.gemv) {
      b.gemv_x = address(step.gemv_call.x);
      b.gemv_y = address(step.gemv_call.y);
    }
    bound_.push_back(std::move(b));
  }
  for (const Call& call : m.output_calls) output_calls_.push_back(bind(call));
}

float* CpuExecutable::address(const Operand& op) const {
  const AlignedFloats& base = op.space == Space::kInput ? input_
                              : op.space == Space::kActivation
                                  ? buffers_[static_cast<size_t>(op.buffer)]
                                  : staging_[static_cast<size_t>(op.buffer)];
  return base.data() + op.offset;
}

CpuExecutable::Bound CpuExecutable::bind(const Call& call) {
  Bound b;
  b.prim = call.prim.get();
  const dnnl::engine& engine = model_->engine_;
  for (const auto& [arg, op] : call.operands) {
    memories_.emplace_back(op.md, engine, address(op));
    b.args.push_back({arg, memories_.back().get()});
  }
  for (const auto& [arg, mem] : call.constants) b.args.push_back({arg, mem.get()});
  if (call.scratch_md && call.scratch_md.get_size() > 0) {
    memories_.emplace_back(call.scratch_md, engine, scratch_.data());
    b.args.push_back({DNNL_ARG_SCRATCHPAD, memories_.back().get()});
  }
  return b;
}

Status CpuExecutable::execute(const Bound& call) const {
  const dnnl_status_t s = dnnl_primitive_execute(
      call.prim, stream_.get(), static_cast<int>(call.args.size()), call.args.data());
  if (s != dnnl_success) {
    return Internal("oneDNN primitive execution failed (status " + std::to_string(s) + ")");
  }
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
  auto gather = [&](const GatherStep& g) -> Status {
    const auto t0 = clock::now();
    SERF_RETURN_IF_ERROR(
        exchange.all_gather(buffers_[static_cast<size_t>(g.buffer)].data(), g.layout));
    if (timings != nullptr)
      timings->exchange_ms[static_cast<size_t>(g.charged_layer)] += ms_since(t0);
    return Status::Ok();
  };
  if (m.channel_major_input_) {
    // Rows [b][C][H*W] in, channel-major [C][b][H*W] for the partitioned layers.
    const model::Shape& in = m.plan_.spec.input;
    rows_to_channel_major(input, input_.data(), m.batch_, in.channels,
                          int64_t{in.height} * in.width);
  } else {
    std::memcpy(input_.data(), input, sizeof(float) * static_cast<size_t>(input_.size()));
  }
  int team = m.threads_;  // the calling thread's OpenMP thread count now
  for (size_t i = 0; i < m.steps_.size(); ++i) {
    const CpuStep& step = m.steps_[i];
    // oneDNN's CPU stream runs in order and returns when done: a buffer is ready once written.
    for (const GatherStep& g : step.plan.gathers) SERF_RETURN_IF_ERROR(gather(g));
    if (timings != nullptr) timings->fused[i] = step.plan.fused_into >= 0;
    if (step.plan.noop) {
      if (timings != nullptr) timings->compute_ms[i] = 0.0;
      continue;
    }
    if (step.threads != team) {  // a small step runs on fewer threads (step_threads)
      team = step.threads;
      omp_set_num_threads(team);
    }
    if (timings != nullptr) timings->threads[i] = team;
    const auto t0 = clock::now();
    const BoundStep& b = bound_[i];
    for (size_t c = 0; c < b.calls.size(); ++c) {
      if (step.gemv && c == step.gemv_after) {
        const GemvCall& g = step.gemv_call;
        run_fc(g, b.gemv_x, b.gemv_y, team);
      }
      SERF_RETURN_IF_ERROR(execute(b.calls[c]));
    }
    if (step.gemv && step.gemv_after == b.calls.size()) {
      const GemvCall& g = step.gemv_call;
      run_fc(g, b.gemv_x, b.gemv_y, team);
    }
    if (timings != nullptr) timings->compute_ms[i] = ms_since(t0);
  }
  if (team != m.threads_) omp_set_num_threads(m.threads_);  // the output reorders were made at T
  for (const GatherStep& g : m.layout_.output_gathers) SERF_RETURN_IF_ERROR(gather(g));
  for (const Bound& call : output_calls_) SERF_RETURN_IF_ERROR(execute(call));
  std::memcpy(output, address(m.output),
              sizeof(float) * static_cast<size_t>(m.plan_.output().elements() * m.batch_));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Executable>> CpuPreparedModel::new_slot() {
  try {
    return std::unique_ptr<Executable>(new CpuExecutable(shared_from_this()));
  } catch (const dnnl::error& e) {
    return Internal(std::string("oneDNN: ") + e.what());
  } catch (const std::bad_alloc&) {
    return Internal("out of memory allocating a slot's activations and scratchpad");
  }
}

}  // namespace serf::engine::cpu
