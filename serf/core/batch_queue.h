#pragma once
// The bulk-service (batching) queue of one serving unit: configuration (c, K, T, b). A free slot
// serves the first min(queue length, b) waiting requests as one batch, whose service time depends
// on the batch's size n and on the number i of batches running (the profile's tuples (i, K, T, n),
// service_table()). docs/queueing.md derives the model:
//  - c = 1: exact. The queue left behind at departures is a Markov chain (M/G^(b)/1 with
//    size-dependent service); its stationary law comes from the b - 1 roots of z^b = K_b(z) in the
//    unit disk (K_n: the generating function of the arrivals during a batch of n), and the mean
//    latency from a renewal-reward argument over the intervals between departures.
//  - c > 1: an approximation. A continuous-time chain on (batches running i, requests waiting q)
//    whose all-busy departure rate is set by the batch sizes the chain itself produces (a fixed
//    point), corrected for the service-time distribution and batch dynamics by the exact c = 1
//    queue of one c-fold fast slot, and by Cosmetatos' factor as in the paper's Eq. 10. With
//    b = 1 it is the paper's M/D_interf/c (md-interf) exactly.
// Service per (i, n) is Gamma with the profiled mean and SCV (md-interf: deterministic; mm-interf:
// exponential; mg-interf: the profiled SCV).

#include <vector>

#include "serf/core/queue_model.h"
#include "serf/core/service_level.h"
#include "serf/core/status.h"

namespace serf {

// Mean behaviour of the batch queue, beyond Prediction: the mean batch a request is served in.
struct BatchPrediction : Prediction {
  double mean_batch = 0;  // requests per batch, averaged over requests
};

// Exact mean latency of the single-slot bulk queue (c = 1): levels[n - 1] is the service of a batch
// of n = 1..b requests. Not stable when rate * mean_ms(b) / b >= 1.
BatchPrediction bulk_single_slot(const std::vector<ServiceLevel>& levels, double rate_per_s);

class BatchQueueModel {
 public:
  // The model of configuration (c, K, T, b) with c = table.service(), b = table.batch(). `kind`
  // is md-interf (deterministic service), mm-interf (exponential) or mg-interf (the table's SCVs);
  // the interference-oblivious models do not batch (InvalidArgument).
  static StatusOr<BatchQueueModel> Create(QueueKind kind, const ServiceTable& table);

  QueueKind kind() const { return kind_; }
  int service() const { return c_; }
  int batch() const { return b_; }
  // Unit arrival rate in requests/s.
  BatchPrediction predict(double rate_per_s) const;
  // The largest stable rate: c b / mean_ms(c, b) (every slot busy with full batches).
  double max_rate_per_s() const;
  // A lower bound on the mean latency at any rate: the fastest batch the configuration runs.
  double min_latency_ms() const { return min_ms_; }
  // Whether predict() is exact (c = 1, or b = 1 where it is the queue model of that kind).
  bool exact() const { return c_ == 1; }

 private:
  BatchQueueModel() = default;
  double mean_ms(int i, int n) const { return mean_[static_cast<size_t>(i - 1) * b_ + (n - 1)]; }

  QueueKind kind_ = kDefaultQueue;
  int c_ = 1, b_ = 1;
  std::vector<double> mean_;             // (i, n) at (i - 1) * b + (n - 1), ms
  std::vector<ServiceLevel> fast_slot_;  // the c-fold fast slot: mean_ms(c, n) / c, SCV by kind
  double min_ms_ = 0;
  std::vector<QueueModel> unbatched_;  // b = 1: the queue model of `kind` (one element)
};

}  // namespace serf
