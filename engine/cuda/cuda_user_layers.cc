// The layers users' networks add beside the zoo's (issue 15; the CPU engine runs them since
// sessions 28-31): conv_transpose2d (cuDNN's backward-data convolution, split over K ranks by
// output channels or groups like conv2d), prelu, pad and upsample (channel-local kernels on this
// rank's channels) and layer_norm (one block over the whole row, which every rank holds: the
// partition gathers it, engine/layer_steps.h). Compile-checked here (no GPU on the build host);
// tests/engine/cross_backend_test.cc compares each with the CPU where a GPU is present.

#include <algorithm>
#include <string>

#include "engine/cuda/cuda_model.h"

namespace serf::engine::cuda {

using model::LayerKind;

// PyTorch's [I, O/g, kh, kw] is cuDNN's backward-data filter [K, C/G, kh, kw] (K the
// transposed convolution's input channels). This rank reads the input channels of its groups
// and writes its output channels: grouped, whole rows of its groups; ungrouped, every row's
// columns of its output slice (repacked on the host).
Status CudaPreparedModel::build_conv_transpose(GpuStep& g, const model::LayerSpec& spec,
                                               const model::LayerInfo& info,
                                               const model::Weights& weights,
                                               cudnnHandle_t handle) {
  const LayerStep& step = g.step;
  const model::Window& win = spec.window;
  const bool symmetric = win.pad_top == win.pad_bottom && win.pad_left == win.pad_right;
  if (!symmetric || spec.output_padding_h >= win.stride_h ||
      spec.output_padding_w >= win.stride_w) {
    return InvalidArgument(layer_name(spec, step.layer) +
                           ": cuDNN's transposed convolution needs equal pads on both sides and "
                           "output_padding below the stride (use --backend cpu for this model)");
  }
  const int per_group_in = info.in.channels / spec.groups;
  const int per_group_out = spec.out_channels / spec.groups;
  const int cin = step.group_slice.count * per_group_in, cout = step.out_slice.count;
  const int cols = spec.groups > 1 ? per_group_out : cout;
  const int col0 = spec.groups > 1 ? 0 : step.out_slice.offset;
  const model::Tensor* t = weights.find(spec.name + ".weight");
  const std::vector<int64_t> shape{info.in.channels, per_group_out, win.kernel_h, win.kernel_w};
  if (t == nullptr || t->shape != shape) {
    return InvalidArgument("weights: tensor '" + spec.name + ".weight' is missing or not [" +
                           std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ", " +
                           std::to_string(shape[2]) + ", " + std::to_string(shape[3]) + "]");
  }
  const int64_t area = int64_t{win.kernel_h} * win.kernel_w;
  std::vector<float> packed(static_cast<size_t>(int64_t{cin} * cols * area));
  for (int i = 0; i < cin; ++i) {
    const float* row = t->data.data() +
                       (int64_t{step.group_slice.offset} * per_group_in + i) * per_group_out * area;
    std::copy(row + col0 * area, row + (col0 + cols) * area,
              packed.data() + int64_t{i} * cols * area);
  }
  SERF_ASSIGN_OR_RETURN(g.weights, DeviceBuffer::create(sizeof(float) * packed.size()));
  SERF_CUDA(cudaMemcpy(g.weights.data(), packed.data(), sizeof(float) * packed.size(),
                       cudaMemcpyHostToDevice));
  weight_bytes_ += static_cast<int64_t>(sizeof(float) * packed.size());
  SERF_ASSIGN_OR_RETURN(
      g.bias, upload_rows(weights, spec.name + ".bias", {spec.out_channels}, step.out_slice));
  SERF_ASSIGN_OR_RETURN(g.x, activation_desc(cin, info.in.height, info.in.width));
  SERF_ASSIGN_OR_RETURN(g.y, activation_desc(cout, info.out.height, info.out.width));
  SERF_CUDNN(cudnnCreateFilterDescriptor(g.w.out()));
  SERF_CUDNN(cudnnSetFilter4dDescriptor(g.w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cin, cols,
                                        win.kernel_h, win.kernel_w));
  SERF_CUDNN(cudnnCreateConvolutionDescriptor(g.conv.out()));
  SERF_CUDNN(cudnnSetConvolution2dDescriptor(g.conv.get(), win.pad_top, win.pad_left, win.stride_h,
                                             win.stride_w, win.dilation_h, win.dilation_w,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  SERF_CUDNN(cudnnSetConvolutionGroupCount(g.conv.get(), step.group_slice.count));
  SERF_CUDNN(cudnnSetConvolutionMathType(g.conv.get(), CUDNN_FMA_MATH));  // no TF32 (build_conv)
  // The forward convolution of the output must give the input's shape back.
  int n = 0, c = 0, h = 0, w = 0;
  SERF_CUDNN(
      cudnnGetConvolution2dForwardOutputDim(g.conv.get(), g.y.get(), g.w.get(), &n, &c, &h, &w));
  if (n != batch_ || c != cin || h != info.in.height || w != info.in.width) {
    return Internal(layer_name(spec, step.layer) + ": cuDNN's transposed convolution of " +
                    std::to_string(info.in.height) + "x" + std::to_string(info.in.width) +
                    " does not give " + std::to_string(info.out.height) + "x" +
                    std::to_string(info.out.width));
  }
  int returned = 0;
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  SERF_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle, g.w.get(), g.x.get(), g.conv.get(), g.y.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
      &returned, perf));
  g.bwd_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
        perf[i].memory <= kMaxWorkspaceBytes) {
      g.bwd_algo = perf[i].algo;
      break;
    }
  }
  SERF_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(
      handle, g.w.get(), g.x.get(), g.conv.get(), g.y.get(), g.bwd_algo, &g.workspace_bytes));
  workspace_bytes_ = std::max(workspace_bytes_, g.workspace_bytes);
  g.out_per_channel = int64_t{info.out.height} * info.out.width * interleave();
  g.in_floats = int64_t{cin} * info.in.height * info.in.width * batch_;
  g.out_floats = int64_t{cout} * info.out.height * info.out.width * batch_;
  return Status::Ok();
}

Status CudaPreparedModel::build_user_layer(GpuStep& g, const model::LayerSpec& spec,
                                           const model::LayerInfo& info,
                                           const model::Weights& weights, cudnnHandle_t handle) {
  switch (g.step.kind) {
    case LayerKind::kConvTranspose2d:
      return build_conv_transpose(g, spec, info, weights, handle);
    case LayerKind::kPrelu: {
      SERF_ASSIGN_OR_RETURN(g.weights, upload_rows(weights, spec.name + ".weight",
                                                   {info.in.channels}, g.step.channels));
      g.out_per_channel = int64_t{info.in.height} * info.in.width * interleave();
      return Status::Ok();
    }
    case LayerKind::kLayerNorm: {
      const int64_t n = info.in.elements();
      const Slice all{0, static_cast<int>(n)};
      SERF_ASSIGN_OR_RETURN(g.weights, upload_rows(weights, spec.name + ".weight", {n}, all));
      SERF_ASSIGN_OR_RETURN(g.bias, upload_rows(weights, spec.name + ".bias", {n}, all));
      if (channel_major_) g.input_area = stored_area(info.sources[0]);
      return Status::Ok();
    }
    default:
      return Status::Ok();  // pad, upsample: no parameters
  }
}

Status run_user_layer(const CudaPreparedModel& m, const GpuStep& g, const float* in, float* out,
                      cudnnHandle_t handle, void* workspace, cudaStream_t stream) {
  const LayerStep& s = g.step;
  const model::LayerSpec& spec = m.plan_.spec.layers[static_cast<size_t>(s.layer)];
  const model::LayerInfo& info = m.plan_.layers[static_cast<size_t>(s.layer)];
  const model::Window& w = spec.window;
  const int channels = s.channels.count;
  const int64_t planes = int64_t{channels} * m.batch_;  // pad, upsample: every (channel, row)
  switch (s.kind) {
    case LayerKind::kConvTranspose2d: {
      const float one = 1.0f, zero = 0.0f;
      SERF_CUDNN(cudnnConvolutionBackwardData(handle, &one, g.w.get(), g.weights.floats(),
                                              g.x.get(), in, g.conv.get(), g.bwd_algo, workspace,
                                              g.workspace_bytes, &zero, g.y.get(), out));
      SERF_CUDA(launch_channel_affine(out, out, nullptr, g.bias.floats(), m.rows(),
                                      s.out_slice.count, g.out_per_channel, g.act, stream));
      return Status::Ok();
    }
    case LayerKind::kPrelu:
      SERF_CUDA(
          launch_prelu(in, out, g.weights.floats(), m.rows(), channels, g.out_per_channel, stream));
      return Status::Ok();
    case LayerKind::kPad:
      SERF_CUDA(launch_pad(in, out, planes, info.in.height, info.in.width, w.pad_top, w.pad_left,
                           info.out.height, info.out.width, spec.pad_reflect, stream));
      return Status::Ok();
    case LayerKind::kUpsample:
      SERF_CUDA(launch_upsample(in, out, planes, info.in.height, info.in.width, spec.upsample_h,
                                spec.upsample_w, spec.upsample_bilinear, stream));
      return Status::Ok();
    case LayerKind::kLayerNorm: {
      // Whole rows (layer_steps.h gathers them). Channel-major, a row's features are interleaved
      // with the others' by the area its input is stored with, and the output is [F][b] as the
      // CPU writes it (channel_major_areas).
      const int64_t n = info.in.elements();
      const int64_t in_area = m.channel_major_ ? g.input_area : n;
      const int64_t out_area = m.channel_major_ ? 1 : n;
      SERF_CUDA(launch_layer_norm(in, out, g.weights.floats(), g.bias.floats(), m.batch_, n,
                                  in_area, out_area, m.interleave(), spec.epsilon, stream));
      return Status::Ok();
    }
    default:
      return Internal("cuda: " + std::string(model::to_string(s.kind)) +
                      " is not one of the user layers");
  }
}

}  // namespace serf::engine::cuda
