#include "serve/switch_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "serf/core/tail_objective.h"

namespace serf::serve {

namespace {
constexpr size_t kWishesKept = 16;

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}
}  // namespace

SwitchPredictor profile_predictor(std::function<std::shared_ptr<const Profile>()> profile,
                                  int nodes, QueueKind queue) {
  return [profile = std::move(profile), nodes, queue](
             const Configuration& config, double rate_per_s) -> std::optional<Prediction> {
    std::shared_ptr<const Profile> p = profile();
    if (!p || !(rate_per_s > 0)) return std::nullopt;
    auto predicted = predict_configuration(*p, config, nodes, rate_per_s, queue, nullptr, nullptr);
    if (!predicted.ok()) return std::nullopt;
    return predicted->prediction;
  };
}

SwitchPredictor table_predictor(std::shared_ptr<const ConfigurationTable> table) {
  return [table = std::move(table)](const Configuration& config,
                                    double rate_per_s) -> std::optional<Prediction> {
    if (!table || !(rate_per_s > 0)) return std::nullopt;
    const ConfigurationTable::Lookup hit = table->lookup(rate_per_s);
    if (hit.entry == nullptr || hit.beyond_table) return std::nullopt;
    const auto r = static_cast<size_t>(hit.entry - table->entries.data());
    for (size_t k = 0; k < table->configurations.size() && k < table->predictions.size(); ++k) {
      if (table->configurations[k] == config && r < table->predictions[k].size())
        return table->predictions[k][r];
    }
    if (hit.entry->stable && hit.entry->config == config) return hit.entry->prediction;
    return std::nullopt;
  };
}

void SwitchCostEstimate::observe(const SwitchRecord& s) {
  const double cost_s = s.total_ms() / 1e3;
  if (!(cost_s >= 0) || !std::isfinite(cost_s)) return;
  auto keep = [cost_s](std::deque<double>& d) {
    d.push_back(cost_s);
    if (d.size() > kKept) d.pop_front();
  };
  keep(pair_[to_string(s.from) + " -> " + to_string(s.to)]);
  keep(target_[to_string(s.to)]);
  keep(all_[""]);
  ++observed_;
}

std::optional<double> SwitchCostEstimate::mean(const std::map<std::string, std::deque<double>>& m,
                                               const std::string& key) {
  auto it = m.find(key);
  if (it == m.end() || it->second.empty()) return std::nullopt;
  return std::accumulate(it->second.begin(), it->second.end(), 0.0) /
         static_cast<double>(it->second.size());
}

std::optional<double> SwitchCostEstimate::cost_s(const Configuration& from,
                                                 const Configuration& to) const {
  if (auto c = mean(pair_, to_string(from) + " -> " + to_string(to))) return c;
  if (auto c = mean(target_, to_string(to))) return c;
  return mean(all_, "");
}

void SwitchGate::learn(const std::vector<SwitchRecord>& switches) {
  for (; learned_ < switches.size(); ++learned_) costs_.observe(switches[learned_]);
}

void SwitchGate::wish(double now_s, const Configuration& wanted) {
  if (wanted_ && *wanted_ == wanted) return;
  if (wanted_) {
    wishes_s_.push_back(now_s - wanted_since_s_);
    if (wishes_s_.size() > kWishesKept) wishes_s_.pop_front();
  }
  wanted_ = wanted;
  wanted_since_s_ = now_s;
  declined_this_wish_ = false;
}

double SwitchGate::dwell_s(double now_s) const {
  const double age = now_s - wanted_since_s_;
  if (wishes_s_.empty()) return age;
  const double past = std::accumulate(wishes_s_.begin(), wishes_s_.end(), 0.0) /
                      static_cast<double>(wishes_s_.size());
  return std::max(age, past);
}

SwitchVerdict SwitchGate::judge(double now_s, double rate_per_s, const Configuration& running,
                                const Configuration& wanted) {
  SwitchVerdict v;
  v.rate_per_s = rate_per_s;
  const std::optional<double> cost = costs_.cost_s(running, wanted);
  if (!cost) {
    v.reason = "no switch measured yet: taken, and its cost measured";
    return v;
  }
  v.switch_s = *cost;
  last_cost_s_ = *cost;
  const std::optional<Prediction> from = predict_(running, rate_per_s);
  const std::optional<Prediction> to = predict_(wanted, rate_per_s);
  if (!from || !to || !to->stable || !(to->utilization < 1)) {
    v.reason = "no prediction for both configurations at this rate: the table's word taken";
    return v;
  }
  if (!from->stable) {
    v.reason = to_string(running) + " is unstable at this rate";
    return v;
  }
  v.dwell_s = dwell_s(now_s);
  v.gain_request_s = rate_per_s * (from->latency_ms - to->latency_ms) / 1e3 * v.dwell_s;
  v.cost_request_s = rate_per_s * v.switch_s * v.switch_s / (2 * (1 - to->utilization));
  v.take = v.gain_request_s > v.cost_request_s;
  v.reason = "gain " + fixed(v.gain_request_s, 3) + " request-s (" + fixed(from->latency_ms, 2) +
             " -> " + fixed(to->latency_ms, 2) + " ms at " + fixed(rate_per_s, 1) + "/s over " +
             fixed(v.dwell_s, 1) + " s) " + (v.take ? "> " : "<= ") + "cost " +
             fixed(v.cost_request_s, 3) + " request-s (a switch of " + fixed(v.switch_s * 1e3, 0) +
             " ms)";
  if (!v.take && !declined_this_wish_) {
    declined_this_wish_ = true;
    ++declined_;
  }
  return v;
}

SwitchFilter switch_filter(
    std::shared_ptr<SwitchGate> gate, const Controller& controller,
    std::function<void(double, const Configuration&, const Configuration&, const SwitchVerdict&)>
        on_decline) {
  auto told = std::make_shared<uint64_t>(0);
  return
      [gate = std::move(gate), &controller, on_decline = std::move(on_decline), told](
          double now_s, double rate_per_s, const Configuration& wanted, bool would_switch) -> bool {
        gate->learn(controller.switches());
        gate->wish(now_s, wanted);
        if (!would_switch || wanted == controller.config()) return true;
        const SwitchVerdict v = gate->judge(now_s, rate_per_s, controller.config(), wanted);
        // Said once per declined wish: the gate counts each wish it declines once.
        if (!v.take && on_decline && gate->declined() != *told) {
          *told = gate->declined();
          on_decline(now_s, controller.config(), wanted, v);
        }
        return v.take;
      };
}

}  // namespace serf::serve
