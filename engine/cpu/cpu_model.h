#pragma once
// Internal to engine/cpu: what CpuPreparedModel holds (shared read-only by every slot) and how a
// slot binds it. A layer's step is a short list of calls (oneDNN primitives, reorders between
// layouts, or the AVX-512 GEMV) whose memory operands name a place in a slot's buffers (the input,
// an activation buffer or a staging buffer) rather than an address, so one prepared model serves
// any number of slots, each with its own buffers.

#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/aligned_floats.h"
#include "engine/layer_steps.h"
#include "shared_weights.h"

namespace serf::engine::cpu {

// oneDNN's memory types, spelled short in every step builder (cpu_steps.cc and the *_step(s).cc).
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
using md_t = dnnl::memory::desc;

inline constexpr auto kForward = dnnl::prop_kind::forward_inference;

// The plain (row-major) float layout of `dims`: a, ab or abcd (cpu_steps.cc).
md_t plain(const dnnl::memory::dims& dims);

enum class Space { kInput, kActivation, kStaging };

// A memory argument in a slot's buffers.
struct Operand {
  Space space = Space::kActivation;
  int buffer = 0;      // activation or staging buffer index
  int64_t offset = 0;  // floats
  dnnl::memory::desc md;
};

// One primitive execution: operands bound per slot, weights shared by every slot.
struct Call {
  dnnl::primitive prim;
  std::vector<std::pair<int, Operand>> operands;
  std::vector<std::pair<int, dnnl::memory>> constants;
  dnnl::memory::desc scratch_md;  // empty: no scratchpad
};

// fully_connected by gemm_f32 on packed panels (engine/cpu/gemv.h) instead of a primitive:
// x is [batch, cols], y [batch, rows], both plain.
struct GemvCall {
  const float* weights = nullptr;
  const float* bias = nullptr;
  Operand x, y;
  int64_t rows = 0, cols = 0;
  int64_t batch = 1;
  bool relu = false;
};

struct CpuStep {
  LayerStep plan;
  int threads = 1;          // OpenMP threads this step runs on (step_threads), <= the model's T
  std::vector<Call> calls;  // in order
  bool gemv = false;        // run `gemv` (then `calls`, e.g. a reorder of its input before it)
  GemvCall gemv_call;
  size_t gemv_after = 0;  // how many of `calls` run before the GEMV
};

class CpuPreparedModel final : public PreparedModel,
                               public std::enable_shared_from_this<CpuPreparedModel> {
 public:
  static StatusOr<std::shared_ptr<CpuPreparedModel>> create(const model::ModelPlan& plan,
                                                            const model::Weights& weights,
                                                            Partition partition, int threads,
                                                            int batch,
                                                            std::shared_ptr<SharedWeights> shared);
  StatusOr<std::unique_ptr<Executable>> new_slot() override;
  const model::ModelPlan& plan() const override { return plan_; }
  Partition partition() const override { return partition_; }
  int threads() const override { return threads_; }
  int batch() const override { return batch_; }
  int64_t resident_weight_bytes() const override { return weight_bytes_; }
  int activation_reorders() const override;
  // Of those, the bytes another model of the backend had packed already (shared_weights.h).
  int64_t reused_weight_bytes() const { return reused_bytes_; }

  model::ModelPlan plan_;
  Partition partition_;
  int threads_ = 1;
  int batch_ = 1;
  // K > 1, b > 1: tensors are channel-major (cpu_steps.cc), so run() transposes the input rows in.
  bool channel_major_input_ = false;
  int64_t weight_bytes_ = 0;
  int64_t reused_bytes_ = 0;
  std::shared_ptr<SharedWeights> shared_;  // the backend's packed tensors
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  LayerSteps layout_;
  std::vector<CpuStep> steps_;
  // Behind every Call's constants and GEMV: packed tensors, most shared with the backend's
  // other models (the same weights at another batch size, shared_weights.h).
  std::vector<std::shared_ptr<const AlignedFloats>> weight_storage_;
  std::vector<int64_t> buffer_floats_;   // per activation buffer (grown to their layouts)
  std::vector<int64_t> staging_floats_;  // per staging buffer
  size_t scratch_bytes_ = 0;
  std::vector<Call> output_calls;  // after the last step: make the output plain (K = 1)
  Operand output;                  // where the plain, whole output is after them

 private:
  Status build(const model::Weights& weights);
};

// Builds the CpuStep of each layer: one builder per layer kind (cpu_steps.cc).
class StepBuilder {
 public:
  StepBuilder(CpuPreparedModel& model, const model::Weights& weights);
  Status build(const LayerStep& step, CpuStep* out);
  // After the last step: the calls that leave the whole output plain, and where it is.
  Status finish_output();

 private:
  Status conv(const LayerStep& s, CpuStep* out);
  Status conv_transpose(const LayerStep& s, CpuStep* out);  // conv_transpose_step.cc
  Status fully_connected(const LayerStep& s, CpuStep* out);
  Status pool(const LayerStep& s, CpuStep* out);
  Status activation(const LayerStep& s, CpuStep* out);
  Status batchnorm(const LayerStep& s, CpuStep* out);
  Status lrn(const LayerStep& s, CpuStep* out);
  Status add(const LayerStep& s, CpuStep* out);
  Status mul(const LayerStep& s, CpuStep* out);
  // add, mul of equal shapes: dnnl::binary `alg` over the inputs in turn.
  Status elementwise(const LayerStep& s, dnnl::algorithm alg, CpuStep* out);
  Status concat(const LayerStep& s, CpuStep* out);
  Status slice(const LayerStep& s, CpuStep* out);            // channel_steps.cc
  Status channel_shuffle(const LayerStep& s, CpuStep* out);  // channel_steps.cc
  Status prelu(const LayerStep& s, CpuStep* out);            // prelu_resample_steps.cc
  Status upsample(const LayerStep& s, CpuStep* out);         // prelu_resample_steps.cc
  Status pad(const LayerStep& s, CpuStep* out);              // prelu_resample_steps.cc
  Status softmax(const LayerStep& s, CpuStep* out);
  Status layer_norm(const LayerStep& s, CpuStep* out);  // layer_norm_step.cc

  // Layer `layer` is a convolution that reads and writes nChw16c activations (K = 1, b > 1).
  bool blocked_conv(int layer) const;
  // Every reader of layer `layer`'s output (of `channels` channels, two or more readers) is a
  // blocked_conv: the output is stored in nChw16c, reordered once.
  bool readers_blocked(int layer, int channels) const;
  const model::LayerSpec& spec(const LayerStep& s) const;
  const model::LayerInfo& info(const LayerStep& s) const;
  dnnl::memory::dims nchw(int c, int h, int w) const { return {batch_, c, h, w}; }
  // How a whole tensor, or a rank's part of it, is stored when not in a primitive's own layout:
  // plain, or channel-major with K > 1 and b > 1.
  dnnl::memory::desc canon(const dnnl::memory::dims& dims) const;
  // The layout the step's whole output tensor is stored in (K > 1).
  dnnl::memory::desc whole(const LayerStep& s) const;
  // The stored layout of input k of the step (K = 1: as its producer wrote it).
  const dnnl::memory::desc& stored(const LayerStep& s, size_t k) const;
  // Input k with dims `dims` (the step's view of its part). `as_stored`: the caller accepts the
  // stored layout when its dims match; otherwise the input is made plain (reordered into staging
  // when it is not).
  Operand read(const LayerStep& s, size_t k, const dnnl::memory::dims& dims, bool as_stored,
               CpuStep* out);
  // The step's output in layout `md` (recorded as the tensor's stored layout; grows the buffer).
  Operand write(const LayerStep& s, const dnnl::memory::desc& md);
  Operand staging(const dnnl::memory::desc& md);
  void reorder(const Operand& from, const Operand& to, CpuStep* out);
  // A call of `prim` with src/dst operands; weights and bias given by the caller.
  Call& call(dnnl::primitive prim, const dnnl::primitive_desc_base& pd, CpuStep* out);
  // The primitive wants `want` for operand `have`: a reorder into staging when they differ.
  Operand adapt(const Operand& have, const dnnl::memory::desc& want, CpuStep* out);
  StatusOr<const model::Tensor*> tensor(const std::string& name,
                                        const std::vector<int64_t>& shape) const;
  // Rows [offset, offset + count) of a [rows, ...] tensor in layout `md` (weights storage).
  dnnl::memory pack(const model::Tensor& t, int offset, const dnnl::memory::desc& plain,
                    const dnnl::memory::desc& md);
  dnnl::memory pack_values(const std::vector<float>& values);
  // Rows [offset, offset + rows) of a fully connected weight in gemm_f32's panels (gemv.h).
  const float* pack_panels(const model::Tensor& t, int offset, int rows);
  // The backend's packed tensor for `key`, or `fill` packs `floats` floats; counted in the
  // model's bytes either way.
  const float* packed(const SharedWeights::Key& key, int64_t floats,
                      const std::function<void(float*)>& fill);
  dnnl::primitive_attr attributes(const LayerStep& s) const;

  CpuPreparedModel& m_;
  const model::Weights& weights_;
  bool flow_;  // K = 1: tensors keep the layouts their producers chose
  int batch_ = 1;
  std::vector<dnnl::memory::desc> stored_;  // per layer: its tensor's stored layout (whole)
  dnnl::memory::desc input_md_;
  int staging_used_ = 0;  // staging buffers taken by the current step
};

}  // namespace serf::engine::cpu
