#pragma once
// Inter-node partitioning (the paper's C_inter = K): every conv2d layer's output channels and every
// fully_connected layer's output neurons are split into K near-equal contiguous slices; rank r
// computes slice r. The first (n % K) ranks get one element more, so slices differ by at most one.
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

// The largest K the plan can be split over: the smallest partitioned dimension (conv out_channels,
// fully_connected out) over all its layers (a rank must own at least one channel of every layer).
int max_ranks(const model::ModelPlan& plan);

// InvalidArgument naming the limiting layer when ranks < 1, ranks > max_ranks(plan) or rank is out
// of range.
Status validate_partition(const model::ModelPlan& plan, Partition partition);

}  // namespace serf::engine
