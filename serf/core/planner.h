#pragma once
// The planner: configuration enumeration, the objective a configuration is chosen by, and the
// configuration reference table (load level -> best configuration) the online scheduler consults.

#include <memory>
#include <string>
#include <vector>

#include "serf/core/batch_queue.h"
#include "serf/core/profile.h"
#include "serf/core/queue_model.h"

namespace serf {

// Every configuration (c, K, T, b) of one (K, T, b), c = 1..max_service. For b = 1 one QueueModel
// answers for every c at once (the paper's families); for b > 1 each c has its BatchQueueModel.
struct ConfigurationFamily {
  int inter = 1;
  int intra = 1;
  int max_service = 0;  // largest c with the tuples it needs in the profile and c*T <= cores
  QueueModel model;     // the b = 1 model of (K, T) (for b > 1 too: objectives beyond the mean)
  std::vector<TupleStats>
      tuples;     // (i, K, T) for i = 1..max_service, for objectives beyond the mean
  int batch = 1;  // b
  std::vector<BatchQueueModel> batched;  // b > 1: the model of c = 1..max_service
  std::vector<ServiceTable> tables;      // b > 1: the service of c = 1..max_service (simulation)

  Configuration config(int c) const { return {c, inter, intra, batch}; }
  Prediction predict(int c, double unit_rate_per_s) const;
  double max_rate_per_s(int c) const;
  double min_latency_ms(int c) const;
};

// Families for every (K, T) with K <= nodes whose tuple (1, K, T) exists, ordered by K, T; with
// max_batch B > 1 also every (K, T, b) with 1 < b <= B whose tuples (1, K, T, b) exist (the
// batch sizes the profile holds: the planner searches b over them). InvalidArgument when there
// is none (names why), or when `queue` does not model batching and a batch size is searched.
StatusOr<std::vector<ConfigurationFamily>> build_families(const Profile& profile, int nodes,
                                                          QueueKind queue, int max_batch = 1);
// The configurations plan evaluates, in the order of build_families (K, T, b, then c).
std::vector<Configuration> enumerate_configurations(const Profile& profile, int nodes,
                                                    int max_batch = 1);

// The queue model of one configuration, with errors that say what is wrong with it (c*T > cores,
// K > nodes, a missing tuple named). b = 1 only (the batch model: batch_model_for).
StatusOr<QueueModel> model_for(const Profile& profile, const Configuration& config, int nodes,
                               QueueKind queue);
// The family of a single configuration (c, K, T, b) (any b), as build_families would make it:
// predict(config.service, rate) is its prediction.
StatusOr<ConfigurationFamily> family_for(const Profile& profile, const Configuration& config,
                                         int nodes, QueueKind queue);

// Serving units a cluster of `nodes` holds for inter-node parallelism K: floor(N / K).
inline int units_for(int nodes, int inter) { return inter > 0 ? nodes / inter : 0; }

// What a configuration is chosen by (lower is better). The planner and the sizing code call it
// for every candidate; mean latency is the paper's choice, others (a tail percentile) plug in here.
class Objective {
 public:
  virtual ~Objective() = default;
  virtual std::string name() const = 0;  // written into tables: "mean"
  // The score in ms of configuration c of `family` at unit rate lambda, given the model's
  // prediction there; +infinity when the configuration cannot serve that rate.
  virtual double score_ms(const ConfigurationFamily& family, int c, double unit_rate_per_s,
                          const Prediction& prediction) const = 0;
  // A lower bound of score_ms over every rate for configurations 1..c of `family`, used to skip
  // families that cannot win; 0 (no pruning) unless the objective knows better.
  virtual double lower_bound_ms(const ConfigurationFamily& family, int c) const { return 0.0; }
  // The relative precision worth finding a rate to by its score (sizing's capacity search). A
  // closed form: to the last bits. A simulated score is itself about 1 % precise, and each of the
  // 40-odd steps to 1e-13 simulated 50,000-400,000 requests (capacity --percentile 99 took
  // 155 s).
  virtual double rate_tolerance() const { return 1e-13; }
};

// The paper's objective: predicted mean latency (Eq. 12).
class MeanLatencyObjective : public Objective {
 public:
  std::string name() const override { return "mean"; }
  double score_ms(const ConfigurationFamily&, int, double, const Prediction& p) const override;
  double lower_bound_ms(const ConfigurationFamily& family, int c) const override;
};
const Objective& mean_latency_objective();

// Canonical order between equally good configurations: fewer nodes per request, then fewer
// threads, then fewer slots.
bool tie_break_less(const Configuration& a, const Configuration& b);

// A configuration chosen for a load: how the cluster runs it and what it is predicted to do.
struct Choice {
  bool stable = false;  // false: nothing chosen (no configuration qualifies)
  Configuration config;
  int units = 0;               // floor(N / K)
  double unit_rate_per_s = 0;  // cluster rate / units
  double score_ms = 0;         // the objective's value (= latency_ms for "mean")
  Prediction prediction;

  // Takes the candidate if nothing is chosen yet or it scores lower; equal scores go by
  // tie_break_less, so the choice does not depend on the order candidates are offered in.
  // Returns whether it was taken.
  bool offer(double score, const Configuration& candidate, int units_, double unit_rate,
             const Prediction& p);
};

// One load level of the table.
struct TableEntry : Choice {
  double rate_per_s = 0;  // cluster-wide arrival rate
};

struct ConfigurationTable {
  std::string model;  // the DNN, from the profile
  QueueKind queue = kDefaultQueue;
  std::string objective = "mean";
  int nodes = 0;
  int cores_per_node = 0;
  bool illustrative = false;
  size_t configurations_evaluated = 0;  // how many (c, K, T) the planner compared
  std::vector<TableEntry> entries;      // ascending rate_per_s

  // Filled when planned with keep_all: predictions[k][r] of configurations[k] at entries[r].
  std::vector<Configuration> configurations;
  std::vector<std::vector<Prediction>> predictions;

  struct Lookup {
    const TableEntry* entry = nullptr;  // nullptr only for an empty table
    bool beyond_table = false;          // the rate is above the top load level
  };
  // The entry of the nearest load level at or above `rate_per_s` (conservative); above the top
  // level, the top entry flagged beyond_table.
  Lookup lookup(double rate_per_s) const;
};

struct PlanOptions {
  int nodes = 0;  // 0: the profile's hardware.nodes
  QueueKind queue = kDefaultQueue;
  int max_batch = 1;      // B: also search batches b in (1, B] that the profile holds
  bool keep_all = false;  // keep every configuration's predictions (plots)
  const Objective* objective = nullptr;  // nullptr: mean latency
};

// Evaluates every configuration at every rate (ascending, > 0) and keeps the best per rate.
StatusOr<ConfigurationTable> plan_table(const Profile& profile,
                                        const std::vector<double>& rates_per_s,
                                        const PlanOptions& options);
StatusOr<ConfigurationTable> plan_table(const Profile& profile,
                                        const std::vector<double>& rates_per_s, int nodes,
                                        QueueKind queue, bool keep_all);

// Checks a rate list: finite, > 0, strictly ascending. `what` names it in errors ("--rates").
Status validate_rates(const std::vector<double>& rates_per_s, const std::string& what);

// Resolves a node count: 0 means the profile's; otherwise it must be >= 1.
StatusOr<int> resolve_nodes(const Profile& profile, int nodes);

}  // namespace serf
