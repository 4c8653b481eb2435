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

std::string prepared_key(const Configuration& config) {
  return std::to_string(config.inter) + "," + std::to_string(config.intra) + "," +
         std::to_string(std::max(config.batch, 1));
}

void SwitchCostEstimate::observe(const SwitchRecord& s, bool cold) {
  const double cost_s = s.total_ms() / 1e3;
  if (!(cost_s >= 0) || !std::isfinite(cost_s)) return;
  auto keep = [cost_s](std::deque<double>& d) {
    d.push_back(cost_s);
    if (d.size() > kKept) d.pop_front();
  };
  Kind& kind = cold ? cold_ : warm_;
  keep(kind.pair[to_string(s.from) + " -> " + to_string(s.to)]);
  keep(kind.target[to_string(s.to)]);
  keep(kind.all[""]);
  ++observed_;
}

std::optional<double> SwitchCostEstimate::mean(const Means& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end() || it->second.empty()) return std::nullopt;
  return std::accumulate(it->second.begin(), it->second.end(), 0.0) /
         static_cast<double>(it->second.size());
}

std::optional<double> SwitchCostEstimate::cost_s(const Configuration& from, const Configuration& to,
                                                 bool cold) const {
  const Kind& kind = cold ? cold_ : warm_;
  if (auto c = mean(kind.pair, to_string(from) + " -> " + to_string(to))) return c;
  if (auto c = mean(kind.target, to_string(to))) return c;
  return mean(kind.all, "");
}

void SwitchGate::learn(const std::vector<SwitchRecord>& switches) {
  for (; learned_ < switches.size(); ++learned_) {
    const SwitchRecord& s = switches[learned_];
    if (prepared_.empty()) prepared_.insert(prepared_key(s.from));  // prepared at the start
    const bool first = prepared_.insert(prepared_key(s.to)).second;
    // Real nodes say what they did (held, warm, cold); else a first switch to it is cold.
    const bool cold =
        s.preparation == Preparation::kUnknown ? first : s.preparation == Preparation::kCold;
    costs_.observe(s, cold);
    running_since_s_ = s.at_s + s.total_ms() / 1e3;
  }
}

void SwitchGate::observe(const RequestRecord& r) {
  if (!r.answered) return;
  answers_.push_back({r.arrival_s, r.done_s, r.latency_ms(), r.config});
  while (!answers_.empty() && answers_.front().done_s < r.done_s - kObservedWindowS)
    answers_.pop_front();
}

std::optional<double> SwitchGate::observed_ms(double now_s, const Configuration& running) const {
  double sum = 0;
  size_t n = 0;
  for (const Answer& a : answers_) {
    if (a.config != running || a.arrival_s < running_since_s_ ||
        a.done_s < now_s - kObservedWindowS)
      continue;
    sum += a.latency_ms;
    ++n;
  }
  if (n < kMinObserved) return std::nullopt;
  return sum / static_cast<double>(n);
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

void SwitchGate::prepared_ahead(const std::vector<Configuration>& configs) {
  for (const Configuration& c : configs) prepared_.insert(prepared_key(c));
}

SwitchVerdict SwitchGate::judge(double now_s, double rate_per_s, const Configuration& running,
                                const Configuration& wanted) {
  SwitchVerdict v;
  v.rate_per_s = rate_per_s;
  v.cold = !prepared_.empty() && prepared_.count(prepared_key(wanted)) == 0;
  const std::optional<double> cost = costs_.cost_s(running, wanted, v.cold);
  if (!cost) {
    v.reason = std::string("no ") + (v.cold ? "cold" : "warm") +
               " switch measured yet: taken, and its cost measured";
    return v;
  }
  v.switch_s = *cost;
  last_cost_s_ = *cost;
  const std::optional<Prediction> from = predict_(running, rate_per_s);
  const std::optional<Prediction> to = predict_(wanted, rate_per_s);
  const std::optional<double> seen = observed_ms(now_s, running);
  if (!to || !to->stable || !(to->utilization < 1) || (!from && !seen)) {
    v.reason = "no prediction for both configurations at this rate: the table's word taken";
    return v;
  }
  if (from && !from->stable) {
    v.reason = to_string(running) + " is unstable at this rate";
    return v;
  }
  v.observed = seen.has_value();
  v.running_ms = seen ? *seen : from->latency_ms;
  v.wanted_ms = to->latency_ms;
  v.dwell_s = dwell_s(now_s);
  v.gain_request_s = rate_per_s * (v.running_ms - v.wanted_ms) / 1e3 * v.dwell_s;
  v.cost_request_s = rate_per_s * v.switch_s * v.switch_s / (2 * (1 - to->utilization));
  v.take = v.gain_request_s > v.cost_request_s;
  v.reason = "gain " + fixed(v.gain_request_s, 3) + " request-s (" + fixed(v.running_ms, 2) +
             (v.observed ? " observed" : "") + " -> " + fixed(v.wanted_ms, 2) + " ms at " +
             fixed(rate_per_s, 1) + "/s over " + fixed(v.dwell_s, 1) + " s) " +
             (v.take ? "> " : "<= ") + "cost " + fixed(v.cost_request_s, 3) + " request-s (a " +
             (v.cold ? "cold" : "warm") + " switch of " + fixed(v.switch_s * 1e3, 0) + " ms)";
  if (!v.take && !declined_this_wish_) {
    declined_this_wish_ = true;
    ++declined_;
  }
  return v;
}

SwitchFilter switch_filter(
    std::shared_ptr<SwitchGate> gate, Controller& controller,
    std::function<void(double, const Configuration&, const Configuration&, const SwitchVerdict&)>
        on_decline) {
  controller.add_answer_hook([gate](const RequestRecord& r) { gate->observe(r); });
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
