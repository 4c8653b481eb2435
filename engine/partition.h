#pragma once
// Inter-node partitioning (the paper's C_inter = K): every conv2d layer's output channels (a
// grouped conv2d's groups) and every fully_connected layer's output neurons are split into K
// near-equal contiguous slices; rank r computes slice r. The first (n % K) ranks get one element
// more, so slices differ by at most one. A layer with fewer than K of them runs whole on every rank
// (engine/layer_steps.h).
//
// Why contiguous slices: a request is batch 1 in NCHW, so output channels [offset, offset + count)
// are one contiguous block of the activation (and of the flattened vector after `flatten`). The
// all-gather that assembles the full activation is then a plain rank-ordered concatenation.

#include <cstdint>
#include <vector>

#include "model/model_spec.h"
#include "serf/core/status.h"

namespace serf::engine {

// Which of the K ranks that compute one request this is.
struct Partition {
  int rank = 0;   // 0 .. ranks-1
  int ranks = 1;  // K
};

struct Slice {
  int offset = 0;  // first channel / neuron of this rank
  int count = 0;   // channels / neurons of this rank
};

// The slice of `n` channels that `rank` of `ranks` computes. Requires 1 <= ranks <= n.
Slice slice_of(int n, int ranks, int rank);

// Element counts and offsets of every rank's part of an activation with `channels` channels of
// `elements_per_channel` floats each (H*W for conv maps, 1 for neurons): the arguments of an
// all-gather (MPI_Allgatherv's recvcounts and displs). counts sum to channels *
// elements_per_channel.
struct GatherLayout {
  std::vector<int> counts;   // one per rank, in floats
  std::vector<int> offsets;  // one per rank, in floats; offsets[r] = sum of counts[0..r-1]
  int64_t total = 0;         // floats in the assembled activation
};
GatherLayout gather_layout(int channels, int64_t elements_per_channel, int ranks);

// What K ranks split in layer `layer`: conv2d and conv_transpose2d out_channels (their groups when
// grouped),
// fully_connected out; 0 for layers without weights to split.
int split_dimension(const model::ModelPlan& plan, size_t layer);

// The largest K that still splits some layer: the largest split_dimension over the plan (1 when no
// layer can be split). Layers smaller than K run whole on every rank.
int max_ranks(const model::ModelPlan& plan);

// InvalidArgument with the reason when ranks < 1, rank is out of range, or K > 1 splits nothing
// (no conv2d / fully_connected layer, or K beyond every layer's split dimension).
Status validate_partition(const model::ModelPlan& plan, Partition partition);

}  // namespace serf::engine
