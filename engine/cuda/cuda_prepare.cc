// CudaPreparedModel::create: one pass over the layer steps that builds every cuDNN descriptor
// (N = b, in the storage of cuda_model.h), picks each convolution's algorithm for that N and
// uploads this rank's weight slices. Everything a request needs except the per-slot buffers is
// decided here, so run() only launches.

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/cuda/cuda_model.h"

namespace serf::engine::cuda {
namespace {

using model::LayerKind;

std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

}  // namespace

std::string layer_name(const model::LayerSpec& spec, int index) {
  return "layers[" + std::to_string(index) + "] (" + spec.name + ")";
}

StatusOr<TensorDesc> CudaPreparedModel::activation_desc(int c, int h, int w) const {
  return channel_major_ ? make_channel_major_desc(batch_, c, h, w)
                        : make_nchw_desc(batch_, c, h, w);
}

StatusOr<TensorDesc> CudaPreparedModel::planes_desc(int c, int h, int w) const {
  return channel_major_ ? make_nchw_desc(1, c * batch_, h, w) : make_nchw_desc(batch_, c, h, w);
}

int64_t CudaPreparedModel::stored_area(int source) const {
  return source < 0 ? int64_t{plan_.spec.input.height} * plan_.spec.input.width
                    : stored_area_[static_cast<size_t>(source)];
}

StatusOr<DeviceBuffer> CudaPreparedModel::upload_rows(const model::Weights& weights,
                                                      const std::string& name,
                                                      const std::vector<int64_t>& shape,
                                                      Slice rows) {
  const model::Tensor* t = weights.find(name);
  if (t == nullptr) return NotFound("weights: tensor '" + name + "' is missing");
  if (t->shape != shape) {
    return InvalidArgument("weights: tensor '" + name + "' has shape " + dims(t->shape) +
                           ", the model needs " + dims(shape));
  }
  const int64_t row = t->elements() / shape[0];
  const size_t bytes = sizeof(float) * static_cast<size_t>(row * rows.count);
  SERF_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::create(bytes));
  // Rows of a row-major tensor are contiguous: the slice is one copy (prepare time, synchronous).
  SERF_CUDA(cudaMemcpy(b.data(), t->data.data() + int64_t{rows.offset} * row, bytes,
                       cudaMemcpyHostToDevice));
  weight_bytes_ += static_cast<int64_t>(bytes);
  return b;
}

namespace {

Activation activation_of(const model::LayerSpec& l) {
  switch (l.kind) {
    case LayerKind::kRelu:
      return {Act::kRelu, 0.0f, 0.0f};
    case LayerKind::kClip:
      return {Act::kClip, l.clip_min, l.clip_max};
    case LayerKind::kSigmoid:
      return {Act::kSigmoid, 0.0f, 0.0f};
    case LayerKind::kHardSigmoid:
      return {Act::kHardSigmoid, l.hardsigmoid_alpha, l.hardsigmoid_beta};
    case LayerKind::kHardSwish:
      return {Act::kHardSwish, 0.0f, 0.0f};
    case LayerKind::kSilu:
      return {Act::kSilu, 0.0f, 0.0f};
    case LayerKind::kLeakyRelu:
      return {Act::kLeakyRelu, l.leaky_relu_alpha, 0.0f};
    case LayerKind::kTanh:
      return {Act::kTanh, 0.0f, 0.0f};
    case LayerKind::kElu:
      return {Act::kElu, l.elu_alpha, 0.0f};
    case LayerKind::kGelu:
      return {Act::kGelu, 0.0f, 0.0f};
    default:
      return {};
  }
}

// cuDNN's 2-D convolution and pooling pad both sides alike.
Status check_symmetric(const model::LayerSpec& spec, int index, int pad_bottom, int pad_right) {
  const model::Window& w = spec.window;
  if (w.pad_top == pad_bottom && w.pad_left == pad_right) return Status::Ok();
  return InvalidArgument(layer_name(spec, index) +
                         ": cuDNN pads both sides of a window alike; this layer pads top/left " +
                         std::to_string(w.pad_top) + "/" + std::to_string(w.pad_left) +
                         " and bottom/right " + std::to_string(pad_bottom) + "/" +
                         std::to_string(pad_right) + " (use --backend cpu for this model)");
}

}  // namespace

Status CudaPreparedModel::build_conv(GpuStep& g, const model::LayerSpec& spec,
                                     const model::LayerInfo& info, const model::Weights& weights,
                                     cudnnHandle_t handle) {
  const LayerStep& step = g.step;
  const model::Window& win = spec.window;
  SERF_RETURN_IF_ERROR(check_symmetric(spec, step.layer, win.pad_bottom, win.pad_right));
  const Slice s = step.out_slice;
  const int per_group_in = info.in.channels / spec.groups;
  const int cin = step.group_slice.count * per_group_in;
  SERF_ASSIGN_OR_RETURN(
      g.weights, upload_rows(weights, spec.name + ".weight",
                             {info.out.channels, per_group_in, win.kernel_h, win.kernel_w}, s));
  SERF_ASSIGN_OR_RETURN(g.bias, upload_rows(weights, spec.name + ".bias", {info.out.channels}, s));
  SERF_ASSIGN_OR_RETURN(g.x, activation_desc(cin, info.in.height, info.in.width));
  SERF_ASSIGN_OR_RETURN(g.y, activation_desc(s.count, info.out.height, info.out.width));
  SERF_CUDNN(cudnnCreateFilterDescriptor(g.w.out()));
  SERF_CUDNN(cudnnSetFilter4dDescriptor(g.w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.count,
                                        per_group_in, win.kernel_h, win.kernel_w));
  SERF_CUDNN(cudnnCreateConvolutionDescriptor(g.conv.out()));
  SERF_CUDNN(cudnnSetConvolution2dDescriptor(g.conv.get(), win.pad_top, win.pad_left, win.stride_h,
                                             win.stride_w, win.dilation_h, win.dilation_w,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  SERF_CUDNN(cudnnSetConvolutionGroupCount(g.conv.get(), step.group_slice.count));
  // FMA math: FP32 kernels only. CUDNN_DEFAULT_MATH lets Ampere+ GPUs use TF32 tensor cores for
  // float convolutions (10-bit mantissa), which would break agreement with the CPU backend.
  SERF_CUDNN(cudnnSetConvolutionMathType(g.conv.get(), CUDNN_FMA_MATH));
  int n = 0, c = 0, h = 0, w = 0;
  SERF_CUDNN(
      cudnnGetConvolution2dForwardOutputDim(g.conv.get(), g.x.get(), g.w.get(), &n, &c, &h, &w));
  if (n != batch_ || c != s.count || h != info.out.height || w != info.out.width) {
    return Internal(layer_name(spec, step.layer) + ": cuDNN output " + std::to_string(h) + "x" +
                    std::to_string(w) + " differs from shape inference " +
                    std::to_string(info.out.height) + "x" + std::to_string(info.out.width));
  }
  int max_algos = 0;
  SERF_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_algos));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(1, max_algos)));
  int returned = 0;
  SERF_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(handle, g.x.get(), g.w.get(), g.conv.get(),
                                                    g.y.get(), static_cast<int>(perf.size()),
                                                    &returned, perf.data()));
  // The heuristics' best FP32 (FMA) algorithm for N = b and this storage within the workspace
  // cap; implicit GEMM (no workspace, any strides) when none qualifies.
  g.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  for (int i = 0; i < returned; ++i) {
    const auto& p = perf[static_cast<size_t>(i)];
    if (p.status == CUDNN_STATUS_SUCCESS && p.mathType == CUDNN_FMA_MATH &&
        p.memory <= kMaxWorkspaceBytes) {
      g.algo = p.algo;
      break;
    }
  }
  SERF_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(handle, g.x.get(), g.w.get(), g.conv.get(),
                                                     g.y.get(), g.algo, &g.workspace_bytes));
  workspace_bytes_ = std::max(workspace_bytes_, g.workspace_bytes);
  g.out_per_channel = int64_t{info.out.height} * info.out.width * interleave();
  g.in_floats = int64_t{cin} * info.in.height * info.in.width * batch_;
  g.out_floats = int64_t{s.count} * info.out.height * info.out.width * batch_;
  return Status::Ok();
}

Status CudaPreparedModel::build_fc(GpuStep& g, const model::LayerSpec& spec,
                                   const model::LayerInfo& info, const model::Weights& weights) {
  const int64_t in = info.in.elements();
  SERF_ASSIGN_OR_RETURN(g.weights, upload_rows(weights, spec.name + ".weight",
                                               {info.out.channels, in}, g.step.out_slice));
  SERF_ASSIGN_OR_RETURN(
      g.bias, upload_rows(weights, spec.name + ".bias", {info.out.channels}, g.step.out_slice));
  g.fc_in = static_cast<int>(in);
  g.out_per_channel = interleave();  // one float per neuron and row
  if (channel_major_) {
    g.input_area = stored_area(info.sources[0]);
    if (g.input_area > 1) stage_floats_ = std::max(stage_floats_, in * batch_);
  }
  return Status::Ok();
}

Status CudaPreparedModel::build_pool(GpuStep& g, const model::LayerSpec& spec,
                                     const model::LayerInfo& info) {
  const LayerStep& step = g.step;
  const int channels = step.channels.count;
  SERF_ASSIGN_OR_RETURN(g.x, planes_desc(channels, info.in.height, info.in.width));
  SERF_ASSIGN_OR_RETURN(g.y, planes_desc(channels, info.out.height, info.out.width));
  SERF_CUDNN(cudnnCreatePoolingDescriptor(g.pool.out()));
  if (step.kind == LayerKind::kGlobalAvgPool) {
    SERF_CUDNN(cudnnSetPooling2dDescriptor(
        g.pool.get(), CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_NOT_PROPAGATE_NAN,
        info.in.height, info.in.width, 0, 0, 1, 1));
  } else {
    const model::Window& w = spec.window;
    // ceil_mode may need more padding after the input than before it: not expressible here.
    const int bottom = std::max(
        w.pad_bottom, (info.out.height - 1) * w.stride_h + w.kernel_h - info.in.height - w.pad_top);
    const int right = std::max(
        w.pad_right, (info.out.width - 1) * w.stride_w + w.kernel_w - info.in.width - w.pad_left);
    SERF_RETURN_IF_ERROR(check_symmetric(spec, step.layer, bottom, right));
    cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
    if (step.kind == LayerKind::kAvgPool) {
      mode = spec.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    }
    SERF_CUDNN(cudnnSetPooling2dDescriptor(g.pool.get(), mode, CUDNN_NOT_PROPAGATE_NAN, w.kernel_h,
                                           w.kernel_w, w.pad_top, w.pad_left, w.stride_h,
                                           w.stride_w));
  }
  int n = 0, c = 0, h = 0, wd = 0;
  SERF_CUDNN(cudnnGetPooling2dForwardOutputDim(g.pool.get(), g.x.get(), &n, &c, &h, &wd));
  if (h != info.out.height || wd != info.out.width) {
    return Internal(layer_name(spec, step.layer) + ": cuDNN pooling output " + std::to_string(h) +
                    "x" + std::to_string(wd) + " differs from shape inference " +
                    std::to_string(info.out.height) + "x" + std::to_string(info.out.width));
  }
  g.in_floats = int64_t{channels} * info.in.height * info.in.width * batch_;
  g.out_floats = int64_t{channels} * info.out.height * info.out.width * batch_;
  return Status::Ok();
}

Status CudaPreparedModel::build_batchnorm(GpuStep& g, const model::LayerSpec& spec,
                                          const model::LayerInfo& info,
                                          const model::Weights& weights) {
  const int all = info.in.channels;
  std::vector<const model::Tensor*> p;
  for (const char* suffix : {".weight", ".bias", ".running_mean", ".running_var"}) {
    const std::string name = spec.name + suffix;
    const model::Tensor* t = weights.find(name);
    if (t == nullptr) return NotFound("weights: tensor '" + name + "' is missing");
    if (t->shape != std::vector<int64_t>{all}) {
      return InvalidArgument("weights: tensor '" + name + "' has shape " + dims(t->shape) +
                             ", the model needs " + std::to_string(all));
    }
    p.push_back(t);
  }
  // Inference batchnorm is a per-channel affine map: y = x * scale + shift.
  const Slice ch = g.step.channels;
  std::vector<float> scale(static_cast<size_t>(ch.count)), shift(scale.size());
  for (int c = 0; c < ch.count; ++c) {
    const int channel = ch.offset + c;
    const auto k = static_cast<size_t>(channel);
    const double a = p[0]->data[k] / std::sqrt(double{p[3]->data[k]} + spec.epsilon);
    scale[static_cast<size_t>(c)] = static_cast<float>(a);
    shift[static_cast<size_t>(c)] = static_cast<float>(p[1]->data[k] - a * p[2]->data[k]);
  }
  const size_t bytes = sizeof(float) * scale.size();
  SERF_ASSIGN_OR_RETURN(g.weights, DeviceBuffer::create(bytes));
  SERF_ASSIGN_OR_RETURN(g.bias, DeviceBuffer::create(bytes));
  SERF_CUDA(cudaMemcpy(g.weights.data(), scale.data(), bytes, cudaMemcpyHostToDevice));
  SERF_CUDA(cudaMemcpy(g.bias.data(), shift.data(), bytes, cudaMemcpyHostToDevice));
  weight_bytes_ += static_cast<int64_t>(2 * bytes);
  g.out_per_channel = int64_t{info.in.height} * info.in.width * interleave();
  return Status::Ok();
}

Status CudaPreparedModel::build_step(GpuStep& g, const model::Weights& weights,
                                     cudnnHandle_t handle) {
  const LayerStep& step = g.step;
  const model::LayerSpec& spec = plan_.spec.layers[static_cast<size_t>(step.layer)];
  const model::LayerInfo& info = plan_.layers[static_cast<size_t>(step.layer)];
  if (step.activation_layer >= 0) {
    g.act = activation_of(plan_.spec.layers[static_cast<size_t>(step.activation_layer)]);
  }
  switch (step.kind) {
    case LayerKind::kConv2d:
      return build_conv(g, spec, info, weights, handle);
    case LayerKind::kFullyConnected:
      return build_fc(g, spec, info, weights);
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
    case LayerKind::kGlobalAvgPool:
      return build_pool(g, spec, info);
    case LayerKind::kBatchNorm:
      return build_batchnorm(g, spec, info, weights);
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
      g.act = activation_of(spec);
      return Status::Ok();
    case LayerKind::kConvTranspose2d:
    case LayerKind::kPrelu:
    case LayerKind::kLayerNorm:
    case LayerKind::kUpsample:
    case LayerKind::kPad:
      return build_user_layer(g, spec, info, weights, handle);
    case LayerKind::kLrn: {
      if (spec.lrn_size < CUDNN_LRN_MIN_N || spec.lrn_size > CUDNN_LRN_MAX_N ||
          spec.lrn_k < CUDNN_LRN_MIN_K || spec.lrn_beta < CUDNN_LRN_MIN_BETA) {
        return InvalidArgument(layer_name(spec, step.layer) + ": cuDNN LRN needs size in [" +
                               std::to_string(CUDNN_LRN_MIN_N) + ", " +
                               std::to_string(CUDNN_LRN_MAX_N) +
                               "], k >= 1e-5 and beta >= 0.01; use --backend cpu for this model");
      }
      // Across channels at each position: channel-major [C][b][H][W] is the packed C x (b*H) x W
      // map of one image, whose positions are every row's.
      const int c = info.in.channels, h = info.in.height, w = info.in.width;
      SERF_ASSIGN_OR_RETURN(g.x, channel_major_ ? make_nchw_desc(1, c, batch_ * h, w)
                                                : make_nchw_desc(batch_, c, h, w));
      SERF_ASSIGN_OR_RETURN(g.y, channel_major_ ? make_nchw_desc(1, c, batch_ * h, w)
                                                : make_nchw_desc(batch_, c, h, w));
      SERF_CUDNN(cudnnCreateLRNDescriptor(g.lrn.out()));
      // cuDNN divides alpha by size like PyTorch's LocalResponseNorm and oneDNN.
      SERF_CUDNN(cudnnSetLRNDescriptor(g.lrn.get(), static_cast<unsigned>(spec.lrn_size),
                                       spec.lrn_alpha, spec.lrn_beta, spec.lrn_k));
      return Status::Ok();
    }
    case LayerKind::kSoftmax: {
      // Over each row's F features, run as cuDNN's channel mode (over C at every (n, h, w)):
      // rows are b x F x 1 x 1, channel-major [F][b] (check_channel_major) is 1 x F x b x 1.
      g.log_softmax = spec.softmax_log;
      const int f = static_cast<int>(info.in.elements());
      const int n = static_cast<int>(rows()), h = static_cast<int>(interleave());
      SERF_ASSIGN_OR_RETURN(g.x, make_nchw_desc(n, f, h, 1));
      SERF_ASSIGN_OR_RETURN(g.y, make_nchw_desc(n, f, h, 1));
      return Status::Ok();
    }
    case LayerKind::kAdd:
    case LayerKind::kMul:
    case LayerKind::kConcat:
    case LayerKind::kSlice:
    case LayerKind::kChannelShuffle:
    case LayerKind::kFlatten:
      return Status::Ok();  // kernels and copies; flatten is a view
  }
  return Status::Ok();
}

Status CudaPreparedModel::check_channel_major(const LayerStep& step) const {
  const model::LayerSpec& spec = plan_.spec.layers[static_cast<size_t>(step.layer)];
  const model::LayerInfo& info = plan_.layers[static_cast<size_t>(step.layer)];
  // fully_connected and layer_norm read any storage (build_fc: made rows when it has an area;
  // the layer_norm kernel reads each row's features where they are).
  if (step.kind == LayerKind::kFullyConnected || step.kind == LayerKind::kLayerNorm) {
    return Status::Ok();
  }
  bool ok = true;
  if (model::is_activation(step.kind) || step.kind == LayerKind::kAdd ||
      (step.kind == LayerKind::kMul && info.ins[1] == info.ins[0])) {
    // Element-wise: any storage, as long as every input has the same.
    for (int source : info.sources) ok = ok && stored_area(source) == stored_area(info.sources[0]);
  } else if (step.kind == LayerKind::kSoftmax) {
    ok = stored_area(info.sources[0]) == 1;  // [F][b]
  } else {                                   // channels of H x W each, as the layer sees its inputs
    for (size_t k = 0; k < info.sources.size(); ++k) {
      ok = ok && stored_area(info.sources[k]) == int64_t{info.ins[k].height} * info.ins[k].width;
    }
  }
  if (step.accumulate) {  // the residual this convolution adds to is stored as its output
    for (int source : plan_.layers[static_cast<size_t>(step.add_layer)].sources) {
      ok = ok && stored_area(source) == int64_t{info.out.height} * info.out.width;
    }
  }
  if (ok) return Status::Ok();
  return InvalidArgument(
      layer_name(spec, step.layer) + ": " + std::string(model::to_string(step.kind)) +
      " at batch b = " + std::to_string(batch_) + " over K = " + std::to_string(partition_.ranks) +
      " ranks is not batched on the cuda backend: it reads a flattened H x W map, stored "
      "channel-major as [C][b][H*W], that it would need reordered; use b = 1, K = 1 or "
      "--backend cpu");
}

Status CudaPreparedModel::build(const model::Weights& weights, cudnnHandle_t handle) {
  for (const LayerStep& step : layout_.steps) {
    GpuStep g;
    g.step = step;
    if (!step.noop) {
      if (channel_major_) SERF_RETURN_IF_ERROR(check_channel_major(step));
      SERF_RETURN_IF_ERROR(build_step(g, weights, handle));
      // cuDNN parts that start at misaligned offsets are staged (in_floats/out_floats set above).
      g.stage_in = g.in_floats > 0 && !step.inputs.empty() && step.inputs[0].offset % 4 != 0;
      g.stage_out = g.out_floats > 0 && step.output.offset % 4 != 0;
      if (g.stage_in) stage_floats_ = std::max(stage_floats_, g.in_floats);
      if (g.stage_out) stage_floats_ = std::max(stage_floats_, g.out_floats);
    }
    steps_.push_back(std::move(g));
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<CudaPreparedModel>> CudaPreparedModel::create(
    std::shared_ptr<SmPartitioner> sms, int device, const model::ModelPlan& plan,
    const model::Weights& weights, Partition partition, int threads, int batch) {
  if (threads < 1) {
    return InvalidArgument("intra-node parallelism T = " + std::to_string(threads) +
                           " must be at least 1");
  }
  if (batch < 1)
    return InvalidArgument("batch b = " + std::to_string(batch) + " must be at least 1");
  auto m = std::make_shared<CudaPreparedModel>();
  SERF_ASSIGN_OR_RETURN(m->layout_, plan_layer_steps(plan, partition, batch));
  m->plan_ = plan;
  m->partition_ = partition;
  m->threads_ = threads;
  m->batch_ = batch;
  m->channel_major_ = partition.ranks > 1 && batch > 1;  // as the CPU backend (cpu_steps.cc)
  if (m->channel_major_) m->stored_area_ = channel_major_areas(plan);
  m->device_ = device;
  m->sms_ = std::move(sms);
  SERF_CUDA(cudaSetDevice(device));
  CudnnHandle handle;  // for the algorithm heuristics only
  SERF_CUDNN(cudnnCreate(handle.out()));
  SERF_RETURN_IF_ERROR(m->build(weights, handle.get()));
  return m;
}

}  // namespace serf::engine::cuda
