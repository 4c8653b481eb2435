#pragma once
// LayerSteps: what one rank of K computes for each layer of a model graph, backend-neutral. A
// backend walks the steps and turns each into its own kernels (engine/cpu and engine/cuda both do).
//
// Partitioning (K > 1, see engine/partition.h). A tensor is either whole on every rank or sliced:
// rank r holds the contiguous block of `units` (channels, or groups of channels) given by
// slice_of(units, K, r), in plain NCHW. Per layer kind:
// - conv2d, conv_transpose2d, fully_connected: this rank's slice of the output channels (grouped:
//   of the groups, reading only its groups' input channels, so a depthwise conv2d runs on the
//   slice it holds without any exchange); the input must be whole otherwise. A layer with fewer
//   output channels (groups) than K runs whole on every rank (replicated), e.g. a last layer of
//   one score.
// - activations (relu, clip, sigmoid, hardsigmoid, hardswish, silu, gelu, ...), add, mul,
//   batchnorm, prelu, maxpool, avgpool, global_avgpool, upsample, pad, flatten: on whatever part
//   the rank holds (channel-local or element-wise), so a residual add of two sliced tensors and a
//   global pooling need no exchange. A mul by a per-channel scale (squeeze-and-excitation) runs
//   on the rank's channels of the tensor it scales and reads the scale's part in place when the
//   rank holds the same channels of it (a scale written by a conv2d sliced alike); otherwise the
//   scale, C floats, is all-gathered.
// - lrn (neighbouring channels), concat, softmax: whole inputs.
// - slice (channels [a, b)), channel_shuffle: whole input, whole output, computed by every rank (a
//   copy). A shuffle sends every rank's block of channels to all ranks (output channel j * g + i
//   is input channel i * C/g + j), so a sliced input would need all of it anyway: it is
//   all-gathered, once, as for concat. In ShuffleNet the shuffle reads a concat's output, whole
//   already, and the slices read the shuffle's: neither adds an exchange; the all-gather of the
//   branch's last conv2d that the concat needs is the unit's only one (C/2 channels).
// Where a layer needs a whole input that is sliced, the ranks all-gather it in place first (once:
// the buffer then holds it whole for every later reader), and at the end of the network.
//
// Fusion: an activation right after a conv2d / fully_connected that only it reads runs in that
// kernel. A conv2d whose only reader is an add of two tensors, where the other operand R was
// written earlier and is read by nothing after this conv2d, writes into R's buffer adding to it
// (a residual connection: out = act(conv(x) + b + R)), and the add (and an activation after it)
// become part of the conv2d's step.
//
// Buffers: one per tensor alive at once, reused by liveness (a tensor's buffer is free after its
// last reader); each holds a whole tensor (the all-gathers are in place). flatten is a view.

#include <cstdint>
#include <vector>

#include "engine/activation_exchange.h"
#include "engine/partition.h"
#include "model/model_spec.h"
#include "serf/core/status.h"

namespace serf::engine {

// Where a tensor, or this rank's part of it, sits in a slot's buffers.
struct TensorRef {
  int buffer = -1;     // -1: the network input
  int64_t offset = 0;  // floats: where the part this step reads or writes starts
};

// An in-place all-gather of the tensor in `buffer`, run by every rank before a step.
struct GatherStep {
  int buffer = -1;
  GatherLayout layout;
  int charged_layer = -1;  // the layer that wrote the tensor (timings are charged to it)
};

struct LayerStep {
  int layer = 0;
  model::LayerKind kind = model::LayerKind::kRelu;
  bool noop = false;                // flatten (a view), or run by another step (fused_into)
  int fused_into = -1;              // the layer whose step runs this one as part of its kernel
  std::vector<GatherStep> gathers;  // before this step
  std::vector<TensorRef> inputs;    // one per spec input
  TensorRef output;
  // conv2d / fully_connected: this rank's output channels and (conv2d) groups; all of them when
  // K = 1 or replicated. Input channels read: group_slice.offset * (in channels / groups) on.
  Slice out_slice;
  Slice group_slice;
  bool replicated = false;    // fewer outputs (groups) than K: every rank computes it whole
  int activation_layer = -1;  // an activation run as this step's last operation
  bool accumulate = false;    // conv2d: `output` holds the residual operand; add the result to it
  int add_layer = -1;         // the add run by this step (accumulate)
  // Channel-local steps (batchnorm, prelu, pooling, global_avgpool, upsample, mul by a
  // per-channel scale): the channels of the layer's own input this rank processes.
  Slice channels;
  // Element-wise steps (activations, add, mul of equal shapes): floats this rank computes.
  int64_t elements = 0;
  // The output is this rank's part of a sliced tensor (otherwise the whole tensor).
  bool sliced_output = false;
};

struct LayerSteps {
  std::vector<LayerStep> steps;            // one per spec layer, in order
  std::vector<int64_t> buffer_sizes;       // floats (whole tensors), one per activation buffer
  TensorRef output;                        // the network output (whole, after output_gathers)
  std::vector<GatherStep> output_gathers;  // at the end: the output if it is sliced
  int64_t max_gather_floats = 0;           // largest all-gather (host staging size)
  std::vector<int> tensor_buffer;          // per layer: the buffer its tensor lives in (-1 input)
};

// InvalidArgument when the partition does not fit the plan (validate_partition) or batch < 1.
// Batch b > 1: every tensor holds b rows; sizes and offsets are in floats of the whole batch, laid
// out channel-major (C, N, H, W: channel c of all b rows is one block) so that a rank's slice of
// channels stays one contiguous block for the all-gather. With K = 1 a backend may keep any layout
// (nothing is sliced); the offsets are then 0.
StatusOr<LayerSteps> plan_layer_steps(const model::ModelPlan& plan, Partition partition,
                                      int batch = 1);

// Channel-major storage (K > 1, b > 1, as above), the rule both backends follow: a tensor of C
// channels of area A each is [C][b][A]. Per layer, A of its stored tensor: the H*W of the layer
// that wrote it; a flatten, an activation, an add or a mul keeps its first input's (a flattened
// conv map stays [C][b][H*W]), fully_connected, softmax and layer_norm write [F][b] (A = 1).
std::vector<int64_t> channel_major_areas(const model::ModelPlan& plan);

// Rows [b][C][A] (request r is row r) into channel-major [C][b][A], and back.
void rows_to_channel_major(const float* rows, float* out, int64_t batch, int64_t channels,
                           int64_t area);
void channel_major_to_rows(const float* channel_major, float* rows, int64_t batch, int64_t channels,
                           int64_t area);

// InvalidArgument unless `exchange` is rank partition.rank of partition.ranks (Executable::run's
// first check, in every backend).
Status check_exchange(const ActivationExchange& exchange, Partition partition);

}  // namespace serf::engine
