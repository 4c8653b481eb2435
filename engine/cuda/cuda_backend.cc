// The CUDA backend's slots and factory. A slot (CudaExecutable) owns one stream (a green-context
// stream when T < F, sm_share.h), a cuDNN and a cuBLAS handle bound to it, every activation buffer
// on the device, the convolution and cuBLAS workspaces and pinned host staging; new_slot() also
// runs each kernel once so lazy module loading happens there. run() then only copies and launches.
//
// Inter-node (K > 1): the ActivationExchange is host-based, so an all-gather stages through pinned
// host memory: this rank's part device -> host, exchange, the other ranks' parts host -> device.
// (NCCL all-gathers between devices would skip the two copies: future work.)

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

  const int64_t in_floats = m.plan_.spec.input.elements();
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
  const int64_t stage = std::max(m.layout_.max_gather_floats, m.plan_.output().elements());
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
    const model::LayerInfo& info = model_->plan_.layers[static_cast<size_t>(s.layer)];
    const bool scale = info.ins[1] != info.ins[0];
    const int64_t per_b = scale ? int64_t{info.in.height} * info.in.width : 1;
    const int64_t n = scale ? s.channels.count * per_b : s.elements;
    SERF_CUDA(launch_mul(buffer(s.inputs[0].buffer) + s.inputs[0].offset,
                         buffer(s.inputs[1].buffer) + s.inputs[1].offset, target, n, per_b, st));
    return Status::Ok();
  }
  if (s.kind == LayerKind::kConcat) {
    // Batch 1 NCHW: each input is one contiguous block of the output, in order.
    int64_t at = 0;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const int64_t n = model_->plan_.layers[static_cast<size_t>(s.layer)].ins[k].elements();
      SERF_CUDA(cudaMemcpyAsync(target + at, buffer(s.inputs[k].buffer) + s.inputs[k].offset,
                                sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice,
                                st));
      at += n;
    }
    return Status::Ok();
  }
  if (s.kind == LayerKind::kSlice || s.kind == LayerKind::kChannelShuffle) {
    // Batch 1 NCHW, whole tensors: channels [begin, end) are one block; the shuffle a kernel.
    const model::LayerSpec& l = model_->plan_.spec.layers[static_cast<size_t>(s.layer)];
    const model::Shape& x = model_->plan_.layers[static_cast<size_t>(s.layer)].in;
    const int64_t area = int64_t{x.height} * x.width;
    const float* src = buffer(s.inputs[0].buffer) + s.inputs[0].offset;
    if (s.kind == LayerKind::kChannelShuffle) {
      SERF_CUDA(launch_channel_shuffle(src, target, x.channels, l.groups, area, st));
      return Status::Ok();
    }
    SERF_CUDA(
        cudaMemcpyAsync(target, src + l.slice_begin * area,
                        sizeof(float) * static_cast<size_t>((l.slice_end - l.slice_begin) * area),
                        cudaMemcpyDeviceToDevice, st));
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

Status CudaExecutable::compute(const GpuStep& g, const float* in, float* out) {
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
      SERF_CUDA(launch_channel_affine(out, out, nullptr, g.bias.floats(), s.out_slice.count,
                                      g.out_per_channel, g.act, st));
      break;
    case LayerKind::kFullyConnected:
      // W (count x in, row-major) is W^T (in x count) column-major: y = op(A) x with op = T.
      SERF_CUBLAS("cublasSgemv",
                  blas_->sgemv(cublas_.get(), CUBLAS_OP_T, g.fc_in, s.out_slice.count, &one,
                               g.weights.floats(), g.fc_in, in, 1, &zero, out, 1));
      SERF_CUDA(launch_channel_affine(out, out, nullptr, g.bias.floats(), s.out_slice.count, 1,
                                      g.act, st));
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
      SERF_CUDA(launch_channel_affine(in, out, nullptr, nullptr, 1, s.elements, g.act, st));
      break;
    case LayerKind::kConvTranspose2d:
    case LayerKind::kPrelu:
    case LayerKind::kLayerNorm:
    case LayerKind::kUpsample:
    case LayerKind::kPad: {
      const auto layer = static_cast<size_t>(s.layer);
      return run_user_layer(g, model_->plan_.spec.layers[layer], model_->plan_.layers[layer], in,
                            out, h, workspace_.data(), st);
    }
    case LayerKind::kBatchNorm:
      SERF_CUDA(launch_channel_affine(in, out, g.weights.floats(), g.bias.floats(),
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
                                     CUDNN_SOFTMAX_MODE_INSTANCE, &one, g.x.get(), in, &zero,
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
  const size_t in_bytes = sizeof(float) * static_cast<size_t>(m.plan_.spec.input.elements());
  // The previous request's copies out of host_input_ have completed (run() ends synchronized).
  std::memcpy(host_input_.floats(), input, in_bytes);
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
  const size_t out_floats = static_cast<size_t>(m.plan_.output().elements());
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
  std::memcpy(output, host_stage_.floats(), sizeof(float) * out_floats);
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
    // Batches are the CPU backend's for now: the cuDNN descriptors and the GEMV/GEMM calls here are
    // built for N = 1.
    if (batch != 1) {
      return InvalidArgument("batch b = " + std::to_string(batch) +
                             ": the cuda backend runs batch 1 only; use b = 1 or --backend cpu");
    }
    return cache_.get_or_create(plan, weights, partition, threads, batch, [&] {
      return CudaPreparedModel::create(sms_, device_, plan, weights, partition, threads);
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
