#pragma once
// LayerSteps: what one rank of K computes for each layer, backend-neutral. A backend walks the
// steps and turns each into its own kernels (engine/cpu and engine/cuda both do).
//
// Rules (see engine/partition.h): conv2d and fully_connected compute this rank's
// output-channel slice; relu, maxpool, avgpool and flatten run on whatever part the rank holds;
// conv2d, fully_connected, lrn, softmax (and pooling after a flatten) need the whole activation, so
// the rank all-gathers before them, and at the end of the network. A relu right after conv2d /
// fully_connected is fused into it. Activations are plain NCHW (flat after flatten), one buffer per
// non-noop layer; a rank's part is the contiguous channel block [offset, offset + count).

#include <cstdint>
#include <vector>

#include "engine/activation_exchange.h"
#include "engine/partition.h"
#include "model/model_spec.h"
#include "serf/core/status.h"

namespace serf::engine {

struct LayerStep {
  int layer = 0;
  model::LayerKind kind = model::LayerKind::kRelu;
  bool noop = false;           // flatten, or a relu fused into the previous step
  bool fused_relu = false;     // conv2d / fully_connected followed by relu
  bool gather_before = false;  // all-gather the current activation before this step
  int gather_layer = -1;       // the last non-noop layer before (timings are charged to it)
  GatherLayout gather;
  int in_buffer = -1;          // -1: the network input
  int out_buffer = -1;
  int64_t in_offset = 0;       // floats: where this rank's input part starts in in_buffer
  int64_t out_offset = 0;      // floats: where this rank's output part starts in out_buffer
  Slice out_slice;             // conv2d / fully_connected: this rank's output channels
  int channels = 0;            // maxpool / avgpool: channels this rank pools (its slice or all)
  int64_t elements = 0;        // relu: floats this rank applies it to
};

struct LayerSteps {
  std::vector<LayerStep> steps;       // one per spec layer
  std::vector<int64_t> buffer_sizes;  // floats, one per activation buffer
  int output_buffer = -1;
  bool gather_output = false;         // the last activation is sliced: all-gather it at the end
  int gather_output_layer = -1;
  GatherLayout output_gather;
  int64_t max_gather_floats = 0;      // largest all-gather (host staging size)
};

// InvalidArgument when the partition does not fit the plan (validate_partition).
StatusOr<LayerSteps> plan_layer_steps(const model::ModelPlan& plan, Partition partition);

// InvalidArgument unless `exchange` is rank partition.rank of partition.ranks (Executable::run's
// first check, in every backend).
Status check_exchange(const ActivationExchange& exchange, Partition partition);

}  // namespace serf::engine
