// The CUDA backend's slots and factory. A slot (CudaExecutable) owns one stream (a green-context
// stream when T < F, sm_share.h), a cuDNN and a cuBLAS handle bound to it, every activation buffer
// on the device, the convolution and cuBLAS workspaces and pinned host staging, each sized for
// the b rows of a batch; new_slot() also runs each kernel once so lazy module loading happens
// there. run() then only copies and launches.
//
// Inter-node (K > 1): the ActivationExchange is host-based, so an all-gather stages through pinned
// host memory: this rank's part device -> host, exchange, the other ranks' parts host -> device.
// (NCCL all-gathers between devices would skip the two copies: future work.) The parts are the
// CPU backend's (cuda_model.h: channel-major at b > 1), so CPU and CUDA ranks can share a unit.

#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "engine/cuda/cublas_api.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/kernels.h"
#include "engine/prepared_cache.h"

namespace serf::engine {
namespace cuda {
namespace {

using model::LayerKind;

// cuBLAS's recommended workspace on Hopper; set explicitly so cuBLAS never allocates on a request.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

class CudaExecutable final : public Executable {
 public:
  static StatusOr<std::unique_ptr<CudaExecutable>> create(
      std::shared_ptr<const CudaPreparedModel> model);
  ~CudaExecutable() override;
  Status run(const float* input, float* output, ActivationExchange& exchange,
             LayerTimings* timings) override;
  Partition partition() const override { return model_->partition_; }
  int threads() const override { return model_->threads_; }

 private:
  explicit CudaExecutable(std::shared_ptr<const CudaPreparedModel> model)
      : model_(std::move(model)) {}
  float* buffer(int index) const {
    return index < 0 ? input_.floats() : buffers_[static_cast<size_t>(index)].floats();
  }
  Status launch(const GpuStep& g);                                // stages, then compute()
  Status compute(const GpuStep& g, const float* in, float* out);  // the layer's kernels
  Status fully_connected(const GpuStep& g, const float* in, float* out);
  // All-gather of the activation in device buffer `full` through the pinned staging buffer.
  Status gather(float* full, const GatherLayout& layout, ActivationExchange& exchange);

  std::shared_ptr<const CudaPreparedModel> model_;
  SlotStream stream_;
  CudnnHandle cudnn_;
  const CublasApi* blas_ = nullptr;
  CublasHandle cublas_;
  DeviceBuffer input_;
  std::vector<DeviceBuffer> buffers_;
  DeviceBuffer workspace_, cublas_workspace_;
  DeviceBuffer stage_in_, stage_out_;  // aligned copies of misaligned parts (GpuStep::stage_*)
  PinnedBuffer host_input_, host_stage_;
};

StatusOr<std::unique_ptr<CudaExecutable>> CudaExecutable::create(
    std::shared_ptr<const CudaPreparedModel> model) {
  std::unique_ptr<CudaExecutable> e(new CudaExecutable(std::move(model)));
  const CudaPreparedModel& m = *e->model_;
  SERF_CUDA(cudaSetDevice(m.device_));
  SERF_ASSIGN_OR_RETURN(e->stream_, m.sms_->stream_for(m.threads_));
  SERF_CUDNN(cudnnCreate(e->cudnn_.out()));
  SERF_CUDNN(cudnnSetStream(e->cudnn_.get(), e->stream_.get()));
  SERF_ASSIGN_OR_RETURN(e->blas_, cublas_api());
  const CublasApi& blas = *e->blas_;
  SERF_CUBLAS("cublasCreate", blas.create(e->cublas_.out()));
  SERF_CUBLAS("cublasSetStream", blas.set_stream(e->cublas_.get(), e->stream_.get()));
  SERF_CUBLAS("cublasSetMathMode",
              blas.set_math_mode(e->cublas_.get(), CUBLAS_DEFAULT_MATH));  // FP32, no TF32
  SERF_ASSIGN_OR_RETURN(e->cublas_workspace_, DeviceBuffer::create(kCublasWorkspaceBytes));
  SERF_CUBLAS("cublasSetWorkspace",
              blas.set_workspace(e->cublas_.get(), e->cublas_workspace_.data(),
                                 e->cublas_workspace_.bytes()));

  const int64_t in_floats = m.plan_.spec.input.elements() * m.batch_;
  SERF_ASSIGN_OR_RETURN(e->input_,
                        DeviceBuffer::create(sizeof(float) * static_cast<size_t>(in_floats)));
  for (int64_t floats : m.layout_.buffer_sizes) {
    SERF_ASSIGN_OR_RETURN(DeviceBuffer b,
                          DeviceBuffer::create(sizeof(float) * static_cast<size_t>(floats)));
    e->buffers_.push_back(std::move(b));
  }
  SERF_ASSIGN_OR_RETURN(e->workspace_, DeviceBuffer::create(m.workspace_bytes_));
  const size_t stage_bytes = sizeof(float) * static_cast<size_t>(m.stage_floats_);
  SERF_ASSIGN_OR_RETURN(e->stage_in_, DeviceBuffer::create(stage_bytes));
  SERF_ASSIGN_OR_RETURN(e->stage_out_, DeviceBuffer::create(stage_bytes));
  SERF_ASSIGN_OR_RETURN(e->host_input_,
                        PinnedBuffer::create(sizeof(float) * static_cast<size_t>(in_floats)));
  const int64_t stage =
      std::max(m.layout_.max_gather_floats, m.plan_.output().elements() * m.batch_);
  SERF_ASSIGN_OR_RETURN(e->host_stage_,
                        PinnedBuffer::create(sizeof(float) * static_cast<size_t>(stage)));

  // Warm-up on the zeroed buffers, without exchanges: loads every kernel's module now.
  for (const GpuStep& g : m.steps_) {
    if (!g.step.noop) SERF_RETURN_IF_ERROR(e->launch(g));
  }
  SERF_CUDA(cudaStreamSynchronize(e->stream_.get()));
  return e;
}

CudaExecutable::~CudaExecutable() {
  // Work still queued on the stream must not outlive the buffers it uses.
  if (stream_.get() != nullptr) cudaStreamSynchronize(stream_.get());
}

Status CudaExecutable::launch(const GpuStep& g) {
  const CudaPreparedModel& m = *model_;
  const LayerStep& s = g.step;
  cudaStream_t st = stream_.get();
  float* const target = buffer(s.output.buffer) + s.output.offset;
  if (s.kind == LayerKind::kAdd) {
    // Element-wise over this rank's part: inputs 2.. are added into the output in turn.
    const float* acc = buffer(s.inputs[0].buffer) + s.inputs[0].offset;
    for (size_t k = 1; k < s.inputs.size(); ++k) {
      SERF_CUDA(
          launch_add(acc, buffer(s.inputs[k].buffer) + s.inputs[k].offset, target, s.elements, st));
      acc = target;
    }
    return Status::Ok();
  }
  if (s.kind == LayerKind::kMul) {
    // Element-wise over this rank's part, or this rank's channels scaled by their values.
    const model::LayerInfo& info = m.plan_.layers[static_cast<size_t>(s.layer)];
    // A scale is one float per (channel, row) in the storage its tensor has (a channel's H*W
    // floats of each row in a run), so b[i / (H*W)] is the right one in both (cuda_model.h).
    const bool scale = info.ins[1] != info.ins[0];
    const int64_t per_b = scale ? int64_t{info.in.height} * info.in.width : 1;
    const int64_t n = scale ? s.channels.count * per_b * m.batch_ : s.elements;
    SERF_CUDA(launch_mul(buffer(s.inputs[0].buffer) + s.inputs[0].offset,
                         buffer(s.inputs[1].buffer) + s.inputs[1].offset, target, n, per_b, st));
    return Status::Ok();
  }
  if (s.kind == LayerKind::kConcat) {
    // Each input is one contiguous block of each of the output's rows() blocks, in order (rows:
    // of each request's row; channel-major: of the whole tensor).
    const model::LayerInfo& info = m.plan_.layers[static_cast<size_t>(s.layer)];
    const size_t out_pitch =
        sizeof(float) * static_cast<size_t>(info.out.elements() * m.interleave());
    size_t at = 0;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const size_t width =
          sizeof(float) * static_cast<size_t>(info.ins[k].elements() * m.interleave());
      SERF_CUDA(cudaMemcpy2DAsync(reinterpret_cast<char*>(target) + at, out_pitch,
                                  buffer(s.inputs[k].buffer) + s.inputs[k].offset, width, width,
                                  static_cast<size_t>(m.rows()), cudaMemcpyDeviceToDevice, st));
      at += width;
    }
    return Status::Ok();
  }
  if (s.kind == LayerKind::kSlice || s.kind == LayerKind::kChannelShuffle) {
    // Whole tensors: channels [begin, end) are one block of each of rows() blocks (a channel's
    // floats in a block: interleave() times H*W); the shuffle a kernel over the same blocks.
    const model::LayerSpec& l = m.plan_.spec.layers[static_cast<size_t>(s.layer)];
    const model::Shape& x = m.plan_.layers[static_cast<size_t>(s.layer)].in;
    const int64_t area = int64_t{x.height} * x.width * m.interleave();
    const float* src = buffer(s.inputs[0].buffer) + s.inputs[0].offset;
    if (s.kind == LayerKind::kChannelShuffle) {
      SERF_CUDA(launch_channel_shuffle(src, target, m.rows(), x.channels, l.groups, area, st));
      return Status::Ok();
    }
    const size_t width = sizeof(float) * static_cast<size_t>((l.slice_end - l.slice_begin) * area);
    SERF_CUDA(cudaMemcpy2DAsync(target, width, src + l.slice_begin * area,
                                sizeof(float) * static_cast<size_t>(x.channels * area), width,
                                static_cast<size_t>(m.rows()), cudaMemcpyDeviceToDevice, st));
    return Status::Ok();
  }
  const float* in = buffer(s.inputs[0].buffer) + s.inputs[0].offset;
  float* out = g.stage_out ? stage_out_.floats() : target;
  if (g.stage_in) {
    SERF_CUDA(cudaMemcpyAsync(stage_in_.data(), in,
                              sizeof(float) * static_cast<size_t>(g.in_floats),
                              cudaMemcpyDeviceToDevice, st));
    in = stage_in_.floats();
  }
  if (g.stage_out && s.accumulate) {  // the residual the convolution adds to
    SERF_CUDA(cudaMemcpyAsync(out, target, sizeof(float) * static_cast<size_t>(g.out_floats),
                              cudaMemcpyDeviceToDevice, st));
  }
  SERF_RETURN_IF_ERROR(compute(g, in, out));
  if (g.stage_out) {
    SERF_CUDA(cudaMemcpyAsync(target, out, sizeof(float) * static_cast<size_t>(g.out_floats),
                              cudaMemcpyDeviceToDevice, st));
  }
  return Status::Ok();
}

// One GEMM over the b rows: W is [count][in] row-major, i.e. column-major in x count (ld in).
// Rows out ([b][count], column-major count x b): Y^T = W X^T, X^T being rows [b][in] read
// column-major (in x b, ld in). Channel-major out ([count][b], column-major b x count): Y = X W^T,
// X either [in][b] as stored (column-major b x in, ld b) or made rows first (then X^T, ld in).
Status CudaExecutable::fully_connected(const GpuStep& g, const float* in, float* out) {
  const CudaPreparedModel& m = *model_;
  const float one = 1.0f, zero = 0.0f;
  const int b = m.batch_, count = g.step.out_slice.count, k = g.fc_in;
  const float* w = g.weights.floats();
  if (!m.channel_major_) {
    SERF_CUBLAS("cublasSgemm", blas_->sgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, count, b, k,
                                            &one, w, k, in, k, &zero, out, count));
    return Status::Ok();
  }
  const float* x = in;
  cublasOperation_t op = CUBLAS_OP_N;
  int ldx = b;
  if (g.input_area > 1) {  // [C][b][area]: rows first
    SERF_CUDA(launch_rows_of_channel_major(in, stage_in_.floats(), b, k / g.input_area,
                                           g.input_area, stream_.get()));
    x = stage_in_.floats();
    op = CUBLAS_OP_T;
    ldx = k;
  }
  SERF_CUBLAS("cublasSgemm", blas_->sgemm(cublas_.get(), op, CUBLAS_OP_N, b, count, k, &one, x, ldx,
                                          w, k, &zero, out, b));
  return Status::Ok();
}

Status CudaExecutable::compute(const GpuStep& g, const float* in, float* out) {
  const CudaPreparedModel& m = *model_;
  const LayerStep& s = g.step;
  const float one = 1.0f, zero = 0.0f;
  // A residual accumulation: cuDNN adds beta * y to the convolution (out = conv(x) + R).
  const float beta = s.accumulate ? 1.0f : 0.0f;
  cudnnHandle_t h = cudnn_.get();
  cudaStream_t st = stream_.get();
  switch (s.kind) {
    case LayerKind::kConv2d:
      SERF_CUDNN(cudnnConvolutionForward(h, &one, g.x.get(), in, g.w.get(), g.weights.floats(),
                                         g.conv.get(), g.algo, workspace_.data(), g.workspace_bytes,
                                         &beta, g.y.get(), out));
      SERF_CUDA(launch_channel_affine(out, out, nullptr, g.bias.floats(), m.rows(),
                                      s.out_slice.count, g.out_per_channel, g.act, st));
      break;
    case LayerKind::kFullyConnected:
      SERF_RETURN_IF_ERROR(fully_connected(g, in, out));
      SERF_CUDA(launch_channel_affine(out, out, nullptr, g.bias.floats(), m.rows(),
                                      s.out_slice.count, g.out_per_channel, g.act, st));
      break;
    case LayerKind::kRelu:
    case LayerKind::kClip:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSilu:
    case LayerKind::kLeakyRelu:
    case LayerKind::kTanh:
    case LayerKind::kElu:
    case LayerKind::kGelu:
      SERF_CUDA(launch_channel_affine(in, out, nullptr, nullptr, 1, 1, s.elements, g.act, st));
      break;
    case LayerKind::kConvTranspose2d:
    case LayerKind::kPrelu:
    case LayerKind::kLayerNorm:
    case LayerKind::kUpsample:
    case LayerKind::kPad:
      return run_user_layer(m, g, in, out, h, workspace_.data(), st);
    case LayerKind::kBatchNorm:
      SERF_CUDA(launch_channel_affine(in, out, g.weights.floats(), g.bias.floats(), m.rows(),
                                      s.channels.count, g.out_per_channel, Activation{}, st));
      break;
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
    case LayerKind::kGlobalAvgPool:
      SERF_CUDNN(cudnnPoolingForward(h, g.pool.get(), &one, g.x.get(), in, &zero, g.y.get(), out));
      break;
    case LayerKind::kLrn:
      SERF_CUDNN(cudnnLRNCrossChannelForward(h, g.lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                             g.x.get(), in, &zero, g.y.get(), out));
      break;
    case LayerKind::kSoftmax:
      SERF_CUDNN(cudnnSoftmaxForward(h, g.log_softmax ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                     CUDNN_SOFTMAX_MODE_CHANNEL, &one, g.x.get(), in, &zero,
                                     g.y.get(), out));
      break;
    case LayerKind::kAdd:
    case LayerKind::kMul:
    case LayerKind::kConcat:
    case LayerKind::kSlice:
    case LayerKind::kChannelShuffle:
    case LayerKind::kFlatten:
      break;  // launch() runs them
  }
  return Status::Ok();
}

Status CudaExecutable::gather(float* full, const GatherLayout& layout,
                              ActivationExchange& exchange) {
  const int r = exchange.rank();
  float* host = host_stage_.floats();
  const size_t own_offset = static_cast<size_t>(layout.offsets[static_cast<size_t>(r)]);
  const size_t own_count = static_cast<size_t>(layout.counts[static_cast<size_t>(r)]);
  cudaStream_t st = stream_.get();
  SERF_CUDA(cudaMemcpyAsync(host + own_offset, full + own_offset, sizeof(float) * own_count,
                            cudaMemcpyDeviceToHost, st));
  SERF_CUDA(cudaStreamSynchronize(st));
  SERF_RETURN_IF_ERROR(exchange.all_gather(host, layout));
  // The others' parts back: before and after this rank's block. Stream order keeps the next
  // gather's device -> host copy behind these.
  if (own_offset > 0) {
    SERF_CUDA(cudaMemcpyAsync(full, host, sizeof(float) * own_offset, cudaMemcpyHostToDevice, st));
  }
  const size_t tail = static_cast<size_t>(layout.total) - own_offset - own_count;
  if (tail > 0) {
    SERF_CUDA(cudaMemcpyAsync(full + own_offset + own_count, host + own_offset + own_count,
                              sizeof(float) * tail, cudaMemcpyHostToDevice, st));
  }
  return Status::Ok();
}

Status CudaExecutable::run(const float* input, float* output, ActivationExchange& exchange,
                           LayerTimings* timings) {
  const CudaPreparedModel& m = *model_;
  SERF_RETURN_IF_ERROR(check_exchange(exchange, m.partition_));
  if (timings != nullptr) {
    if (timings->compute_ms.size() != m.steps_.size()) timings->resize(m.steps_.size());
    std::fill(timings->exchange_ms.begin(), timings->exchange_ms.end(), 0.0);  // summed below
  }
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  SERF_CUDA(cudaSetDevice(m.device_));  // the calling thread may be new to this device
  cudaStream_t st = stream_.get();
  const model::Shape& in_shape = m.plan_.spec.input;
  const size_t in_bytes = sizeof(float) * static_cast<size_t>(in_shape.elements() * m.batch_);
  // The previous request's copies out of host_input_ have completed (run() ends synchronized).
  if (m.channel_major_) {
    rows_to_channel_major(input, host_input_.floats(), m.batch_, in_shape.channels,
                          int64_t{in_shape.height} * in_shape.width);
  } else {
    std::memcpy(host_input_.floats(), input, in_bytes);
  }
  SERF_CUDA(
      cudaMemcpyAsync(input_.data(), host_input_.floats(), in_bytes, cudaMemcpyHostToDevice, st));

  auto timed_gather = [&](const GatherStep& gs) -> Status {
    const auto t0 = clock::now();
    SERF_RETURN_IF_ERROR(gather(buffer(gs.buffer), gs.layout, exchange));
    if (timings != nullptr)
      timings->exchange_ms[static_cast<size_t>(gs.charged_layer)] += ms_since(t0);
    return Status::Ok();
  };
  for (size_t i = 0; i < m.steps_.size(); ++i) {
    const GpuStep& g = m.steps_[i];
    for (const GatherStep& gs : g.step.gathers) SERF_RETURN_IF_ERROR(timed_gather(gs));
    if (timings != nullptr) timings->fused[i] = g.step.fused_into >= 0;
    if (g.step.noop) {
      if (timings != nullptr) timings->compute_ms[i] = 0.0;
      continue;
    }
    const auto t0 = clock::now();
    SERF_RETURN_IF_ERROR(launch(g));
    if (timings != nullptr) {
      SERF_CUDA(cudaStreamSynchronize(st));
      timings->compute_ms[i] = ms_since(t0);
    }
  }
  const int64_t out_row = m.plan_.output().elements();
  const size_t out_floats = static_cast<size_t>(out_row * m.batch_);
  float* out = buffer(m.layout_.output.buffer);
  if (!m.layout_.output_gathers.empty()) {
    for (const GatherStep& gs : m.layout_.output_gathers) SERF_RETURN_IF_ERROR(timed_gather(gs));
    // host_stage_ already holds the whole output; wait for the copies back before the next request.
    SERF_CUDA(cudaStreamSynchronize(st));
  } else {
    SERF_CUDA(cudaMemcpyAsync(host_stage_.floats(), out, sizeof(float) * out_floats,
                              cudaMemcpyDeviceToHost, st));
    SERF_CUDA(cudaStreamSynchronize(st));
  }
  if (m.channel_major_) {
    const int64_t area = m.stored_area_.back();  // the last layer's
    channel_major_to_rows(host_stage_.floats(), output, m.batch_, out_row / area, area);
  } else {
    std::memcpy(output, host_stage_.floats(), sizeof(float) * out_floats);
  }
  return Status::Ok();
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, std::shared_ptr<SmPartitioner> sms)
      : device_(device), sms_(std::move(sms)) {}
  std::string name() const override { return "cuda"; }
  StatusOr<std::shared_ptr<PreparedModel>> prepare(const model::ModelPlan& plan,
                                                   const model::Weights& weights,
                                                   Partition partition, int threads,
                                                   int batch = 1) override {
    return cache_.get_or_create(plan, weights, partition, threads, batch, [&] {
      return CudaPreparedModel::create(sms_, device_, plan, weights, partition, threads, batch);
    });
  }
  int64_t resident_weight_bytes() const override { return cache_.held_weight_bytes(); }

 private:
  int device_;
  std::shared_ptr<SmPartitioner> sms_;
  PreparedCache<CudaPreparedModel> cache_;  // one copy of the weights on the GPU per configuration
};

// Unavailable naming the cause when `device` cannot be used.
Status check_device(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for the next caller
    // Without any driver the runtime reports cudaErrorInsufficientDriver: say both readings.
    const std::string why = e == cudaErrorInsufficientDriver
                                ? "no NVIDIA driver, or one older than this build's CUDA " +
                                      std::to_string(CUDART_VERSION / 1000) + " runtime"
                                : std::string(cudaGetErrorString(e));
    return Unavailable("backend 'cuda': no usable CUDA device (cudaGetDeviceCount: " + why + ", " +
                       cudaGetErrorName(e) + "); use --backend cpu");
  }
  if (count == 0) {
    return Unavailable(
        "backend 'cuda': no usable CUDA device (cudaGetDeviceCount found 0); use --backend cpu");
  }
  if (device < 0 || device >= count) {
    return InvalidArgument("CUDA device " + std::to_string(device) +
                           " does not exist (devices 0.." + std::to_string(count - 1) + ")");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Executable>> CudaPreparedModel::new_slot() {
  SERF_ASSIGN_OR_RETURN(auto slot, CudaExecutable::create(shared_from_this()));
  return std::unique_ptr<Executable>(std::move(slot));
}

}  // namespace cuda

StatusOr<std::unique_ptr<Backend>> make_cuda_backend(int device) {
  SERF_RETURN_IF_ERROR(cuda::check_device(device));
  SERF_RETURN_IF_ERROR(cuda_libraries_available());
  SERF_CUDA(cudaSetDevice(device));
  SERF_ASSIGN_OR_RETURN(auto sms, cuda::SmPartitioner::create(device));
  if (!sms->green_contexts()) {  // say once per process that T has no effect on this machine
    static std::once_flag logged;
    std::call_once(logged, [&] { std::fprintf(stderr, "serf: cuda: %s\n", sms->note().c_str()); });
  }
  return std::unique_ptr<Backend>(new cuda::CudaBackend(device, std::move(sms)));
}

Status cuda_libraries_available() { return cuda::cublas_api().status(); }

StatusOr<CudaDeviceInfo> cuda_device_info(int device) {
  SERF_RETURN_IF_ERROR(cuda::check_device(device));
  cudaDeviceProp prop{};
  SERF_CUDA(cudaGetDeviceProperties(&prop, device));
  SERF_CUDA(cudaSetDevice(device));
  SERF_ASSIGN_OR_RETURN(auto sms, cuda::SmPartitioner::create(device));
  CudaDeviceInfo info;
  info.name = prop.name;
  info.device = device;
  info.sm_count = prop.multiProcessorCount;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.compute_capability = prop.major * 10 + prop.minor;
  info.green_contexts = sms->green_contexts();
  info.sm_units = sms->units();
  info.sms_per_unit = sms->sms_per_unit();
  info.note = sms->note();
  return info;
}

}  // namespace serf::engine
