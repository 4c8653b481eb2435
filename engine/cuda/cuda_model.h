#pragma once
// Internal to engine/cuda: what prepare() builds once per (plan, rank, T, b) and every slot shares
// read-only: the layer steps (engine/layer_steps.h), one cuDNN descriptor set per step (N = b),
// the convolution algorithms picked for FP32 without tensor cores at N = b, and this rank's
// weight slices already on the device.
//
// A batch of b rows is stored as the CPU backend stores it, so CPU and CUDA ranks of one unit
// exchange the same floats: rows (NCHW with N = b, request r is row r) when K = 1 or b = 1,
// channel-major ([C][b][H*W], engine/layer_steps.h) when K > 1 and b > 1, so that a rank's
// channels stay one contiguous block of every row. The input is transposed into channel-major
// on the host, the output out of it.

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/sm_share.h"
#include "engine/layer_steps.h"

namespace serf::engine::cuda {

// Convolution workspace cap: algorithms wanting more are skipped (H100/H200 have 80+ GiB, but c
// slots each hold one workspace).
constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

// "layers[i] (name)", how prepare's errors name a layer.
std::string layer_name(const model::LayerSpec& spec, int index);

struct GpuStep {
  LayerStep step;
  TensorDesc x, y;  // the layer's views of its input and output part
  FilterDesc w;
  ConvDesc conv;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;  // conv_transpose2d
  size_t workspace_bytes = 0;
  PoolDesc pool;
  LrnDesc lrn;
  // conv2d [count, I/groups, k, k] / fully_connected [count, in], row-major; batchnorm: the
  // per-channel scale (weights) and shift (bias) of this rank's channels; conv_transpose2d [this
  // rank's input channels, its output channels per group, k, k]; prelu: this rank's slopes;
  // layer_norm: the whole weight and bias.
  DeviceBuffer weights, bias;
  int fc_in = 0;  // fully_connected: input length
  // fully_connected and layer_norm, channel-major: the area of the [C][b][area] tensor their
  // (flattened) input is stored as; above 1 fully_connected makes it rows in staging first.
  int64_t input_area = 1;
  // Channel-local kernels (kernels.h): floats per channel in each of CudaPreparedModel::rows()
  // blocks, H*W (rows) or b*H*W (channel-major) of the layer's output (conv2d, conv_transpose2d,
  // fully_connected: 1 or b) or input (batchnorm, prelu).
  int64_t out_per_channel = 1;
  Activation act;            // fused (conv2d, fully_connected) or the layer's own
  bool log_softmax = false;  // softmax: log(softmax(x))
  // cuDNN kernels may assume 16-byte aligned tensors; a rank's channel block of a K-way split can
  // start anywhere. Such parts are staged through an aligned per-slot buffer (a device copy).
  int64_t in_floats = 0, out_floats = 0;  // this rank's input / output part, b rows (cuDNN steps)
  bool stage_in = false, stage_out = false;
};

class CudaPreparedModel final : public PreparedModel,
                                public std::enable_shared_from_this<CudaPreparedModel> {
 public:
  static StatusOr<std::shared_ptr<CudaPreparedModel>> create(
      std::shared_ptr<SmPartitioner> sms, int device, const model::ModelPlan& plan,
      const model::Weights& weights, Partition partition, int threads, int batch);
  StatusOr<std::unique_ptr<Executable>> new_slot() override;
  const model::ModelPlan& plan() const override { return plan_; }
  Partition partition() const override { return partition_; }
  int threads() const override { return threads_; }
  int batch() const override { return batch_; }
  int64_t resident_weight_bytes() const override { return weight_bytes_; }
  // How channel-local kernels see a part (kernels.h): `rows()` blocks, each channel's floats in a
  // block `interleave()` times its H*W.
  int64_t rows() const { return channel_major_ ? 1 : batch_; }
  int64_t interleave() const { return channel_major_ ? batch_ : 1; }
  // A convolution's view of c channels of h x w, N = b, in the storage in force.
  StatusOr<TensorDesc> activation_desc(int c, int h, int w) const;
  // Pooling's: every (channel, row) h x w plane is contiguous in either storage, so b rows of c
  // channels are a packed NCHW tensor of b x c or 1 x (c * b) planes.
  StatusOr<TensorDesc> planes_desc(int c, int h, int w) const;
  // Channel-major: the area layer `source`'s tensor is stored with (-1: the network input).
  int64_t stored_area(int source) const;

  model::ModelPlan plan_;
  Partition partition_;
  int threads_ = 1;
  int batch_ = 1;
  bool channel_major_ = false;        // K > 1 and b > 1
  std::vector<int64_t> stored_area_;  // channel-major: channel_major_areas(plan_)
  int device_ = 0;
  int64_t weight_bytes_ = 0;
  size_t workspace_bytes_ = 0;  // the largest convolution workspace
  int64_t stage_floats_ = 0;    // the largest staged part or fully_connected input made rows
  LayerSteps layout_;
  std::vector<GpuStep> steps_;
  std::shared_ptr<SmPartitioner> sms_;

 private:
  Status build(const model::Weights& weights, cudnnHandle_t handle);
  // Channel-major: InvalidArgument for a step this storage cannot run without a reorder the
  // backend lacks (a layer that needs channels reading a flattened H x W map, say).
  Status check_channel_major(const LayerStep& step) const;
  Status build_step(GpuStep& g, const model::Weights& weights, cudnnHandle_t handle);
  Status build_conv(GpuStep& g, const model::LayerSpec& spec, const model::LayerInfo& info,
                    const model::Weights& weights, cudnnHandle_t handle);
  Status build_fc(GpuStep& g, const model::LayerSpec& spec, const model::LayerInfo& info,
                  const model::Weights& weights);
  Status build_pool(GpuStep& g, const model::LayerSpec& spec, const model::LayerInfo& info);
  Status build_batchnorm(GpuStep& g, const model::LayerSpec& spec, const model::LayerInfo& info,
                         const model::Weights& weights);
  // cuda_user_layers.cc: conv_transpose2d, prelu, pad, upsample, layer_norm.
  Status build_user_layer(GpuStep& g, const model::LayerSpec& spec, const model::LayerInfo& info,
                          const model::Weights& weights, cudnnHandle_t handle);
  Status build_conv_transpose(GpuStep& g, const model::LayerSpec& spec,
                              const model::LayerInfo& info, const model::Weights& weights,
                              cudnnHandle_t handle);
  // Uploads rows [offset, offset + count) of tensor `name` (checked against `shape`).
  StatusOr<DeviceBuffer> upload_rows(const model::Weights& weights, const std::string& name,
                                     const std::vector<int64_t>& shape, Slice rows);
};

// Runs a step build_user_layer prepared (cuda_user_layers.cc) on the slot's stream and handle.
Status run_user_layer(const CudaPreparedModel& m, const GpuStep& g, const float* in, float* out,
                      cudnnHandle_t handle, void* workspace, cudaStream_t stream);

}  // namespace serf::engine::cuda
