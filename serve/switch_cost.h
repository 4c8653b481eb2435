#pragma once
// Whether a switch the configuration table asks for pays for itself. A switch drains the units and
// reconfigures every node: for C seconds (drain + reconfigure, measured on each switch) no
// request starts. The table ignores C; with the real engine it is 0.2-0.3 s (imagenet1k, a new
// T), as long as ten requests' service. The gate weighs, in request-seconds:
//   gain = rate * (W_running - W_wanted) * D
//     the latency the wanted configuration saves per request (the queue model's means at the
//     rate of the table's load level), over the D seconds it is expected to hold;
//   cost = rate * C^2 / (2 * (1 - rho_wanted))
//     the wait the pause adds: rate*C requests arrive during it and wait C/2 on average, and the
//     backlog left then drains only at the new configuration's spare capacity (1 - rho), so later
//     arrivals wait too (the fluid area of a service vacation of length C);
// and takes the switch when gain > cost. W_running is the observed mean latency of the running
// configuration's recent answers (those that arrived after the switch to it ended, the last
// kObservedWindowS seconds, at least kMinObserved of them), else the model's; W_wanted can only
// be predicted (the self-calibrated profile when it runs). A loaded host slows the running
// configuration beyond its profile, and the gain a switch away from it brings is then what was
// seen, not what the profile promised. D is the age of the table's wish (how long the table has
// named the wanted configuration without a break) or, when larger, the mean length of its past
// wishes: waiting until the wish has lasted long enough to repay the switch is the ski-rental
// rule, which never pays more than twice what the best offline choice pays. C is the mean of the
// last measured switches of the same kind between the same two configurations, else of those to
// the wanted one, else of every switch of that kind. The kind: a switch is cold when the nodes
// had never prepared the wanted configuration's (K, T, b) before (the start configuration and
// those prepared ahead count as prepared; a measured switch is of the kind its nodes reported),
// warm otherwise; a cold preparation creates oneDNN's primitives for the first time
// and costs several times a warm one (768 ms against 176-274 ms on imagenet1k), so cold switches
// estimate only cold ones and warm only warm. Before a switch of that kind was measured, the
// switch is taken (and measured).
// A running configuration the model calls unstable at the rate, or no prediction for either
// configuration, takes the switch (the table's rule).

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "serf/core/configuration.h"
#include "serf/core/planner.h"
#include "serf/core/profile.h"
#include "serf/core/queue_model.h"
#include "serve/controller.h"

namespace serf::serve {

// The queue model's prediction for a configuration at a cluster arrival rate (nullopt: none).
using SwitchPredictor =
    std::function<std::optional<Prediction>(const Configuration&, double rate_per_s)>;

// From a tuple profile through the queue model (batches too), on `nodes` nodes.
SwitchPredictor profile_predictor(std::function<std::shared_ptr<const Profile>()> profile,
                                  int nodes, QueueKind queue);
// From a table: its every-configuration predictions (planned with --all) at the load level the
// rate falls in, else that level's entry when it names the configuration.
SwitchPredictor table_predictor(std::shared_ptr<const ConfigurationTable> table);

// The measured cost (drain + reconfigure, seconds) of switches of one kind (cold or warm): the
// mean of the last kKept per (from, to) pair, per target, and over all.
class SwitchCostEstimate {
 public:
  static constexpr size_t kKept = 8;
  void observe(const SwitchRecord& s, bool cold = false);
  std::optional<double> cost_s(const Configuration& from, const Configuration& to,
                               bool cold = false) const;
  size_t observed() const { return observed_; }

 private:
  using Means = std::map<std::string, std::deque<double>>;
  struct Kind {
    Means pair, target, all;
  };
  static std::optional<double> mean(const Means& m, const std::string& key);
  Kind warm_, cold_;
  size_t observed_ = 0;
};

// What the nodes prepare for a configuration, (K, T, b): a switch that changes only c prepares
// nothing new.
std::string prepared_key(const Configuration& config);

struct SwitchVerdict {
  bool take = true;
  std::string reason;  // why, in a sentence (logs, tests)
  double rate_per_s = 0;
  double gain_request_s = 0;  // rate * (W_running - W_wanted) * dwell
  double cost_request_s = 0;  // rate * C^2 / (2 (1 - rho_wanted))
  double switch_s = 0;        // C, the estimate used
  double dwell_s = 0;         // D
  bool cold = false;          // the wanted configuration was never prepared
  bool observed = false;      // W_running is the observed mean, not the model's
  double running_ms = 0;      // W_running
  double wanted_ms = 0;       // W_wanted
};

class SwitchGate {
 public:
  static constexpr double kObservedWindowS = 4;
  static constexpr size_t kMinObserved = 10;
  explicit SwitchGate(SwitchPredictor predict) : predict_(std::move(predict)) {}
  // Learns the switches measured since the last call (the controller's switches(), in order):
  // their costs, cold or warm, and when the running configuration began.
  void learn(const std::vector<SwitchRecord>& switches);
  // The configurations the nodes prepared at the start (serve --prepare-ahead): a switch to one
  // is not cold. A switch's own record, when the nodes said what they did, decides its kind.
  void prepared_ahead(const std::vector<Configuration>& configs);
  // Every request as it ends (an answer hook): the answered ones' latencies.
  void observe(const RequestRecord& r);
  // The mean latency of `running`'s answers of the last kObservedWindowS seconds that arrived
  // after the switch to it ended (nullopt: fewer than kMinObserved).
  std::optional<double> observed_ms(double now_s, const Configuration& running) const;
  // Tells the gate what the table names now (every time the scheduler asks, switch or not): the
  // wish's age and the lengths of past wishes come from these calls.
  void wish(double now_s, const Configuration& wanted);
  // Whether to switch from `running` to `wanted` now at `rate_per_s` (after wish()).
  SwitchVerdict judge(double now_s, double rate_per_s, const Configuration& running,
                      const Configuration& wanted);
  // Thread-safe, for /metrics.
  uint64_t declined() const { return declined_.load(); }
  double last_cost_s() const { return last_cost_s_.load(); }

 private:
  struct Answer {
    double arrival_s, done_s, latency_ms;
    Configuration config;
  };
  double dwell_s(double now_s) const;
  SwitchPredictor predict_;
  SwitchCostEstimate costs_;
  size_t learned_ = 0;
  std::set<std::string> prepared_;  // prepared_key of the start and every switch's target
  double running_since_s_ = 0;      // the end of the last switch
  std::deque<Answer> answers_;      // the last kObservedWindowS seconds' answers
  std::optional<Configuration> wanted_;
  double wanted_since_s_ = 0;
  std::deque<double> wishes_s_;  // lengths of the last past wishes
  bool declined_this_wish_ = false;
  std::atomic<uint64_t> declined_{0};
  std::atomic<double> last_cost_s_{0};
};

// The filter table_hook consults: `gate` judging the switch against `controller`'s running
// configuration, its measured switches and its answers (an answer hook it adds; all read on the
// controller's thread, where the hooks run). `on_decline` hears the first declined switch of
// each wish (rank 0's log).
SwitchFilter switch_filter(std::shared_ptr<SwitchGate> gate, Controller& controller,
                           std::function<void(double now_s, const Configuration& from,
                                              const Configuration& to, const SwitchVerdict&)>
                               on_decline = nullptr);

}  // namespace serf::serve
