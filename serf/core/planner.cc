#include "serf/core/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "serf/core/statistics.h"

namespace serf {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

bool tie_break_less(const Configuration& a, const Configuration& b) {
  if (a.inter != b.inter) return a.inter < b.inter;
  if (a.intra != b.intra) return a.intra < b.intra;
  return a.service < b.service;
}

bool Choice::offer(double score, const Configuration& candidate, int units_, double unit_rate,
                   const Prediction& p) {
  if (!std::isfinite(score)) return false;
  if (stable && !(score < score_ms || (score == score_ms && tie_break_less(candidate, config)))) {
    return false;
  }
  stable = true;
  config = candidate;
  units = units_;
  unit_rate_per_s = unit_rate;
  score_ms = score;
  prediction = p;
  return true;
}

double MeanLatencyObjective::score_ms(const ConfigurationFamily&, int, double,
                                      const Prediction& p) const {
  return p.stable ? p.latency_ms : kInf;
}

double MeanLatencyObjective::lower_bound_ms(const ConfigurationFamily& family, int c) const {
  return family.min_latency_ms(c);
}

const Objective& mean_latency_objective() {
  static const MeanLatencyObjective objective;
  return objective;
}

StatusOr<int> resolve_nodes(const Profile& profile, int nodes) {
  if (nodes == 0) return profile.hardware.nodes;
  if (nodes < 1) return InvalidArgument("nodes must be >= 1 (got " + std::to_string(nodes) + ")");
  return nodes;
}

Prediction ConfigurationFamily::predict(int c, double unit_rate_per_s) const {
  if (batch == 1) {
    Prediction p = model.predict(c, unit_rate_per_s);
    if (!p.stable || c > static_cast<int>(tuples.size())) return p;
    const auto& idle = tuples[static_cast<size_t>(c - 1)].idle;
    if (idle.empty()) return p;
    // An arrival that finds a free slot (1 - P_wait) pays the idle-arrival penalty E[delta]
    // (idle_penalty.h), one that finds it busy (P_wait) the open loop's back-to-back excess
    // E[busy]; each holds its slot that much longer: every service time scaled by s = 1 +
    // ((1 - P_wait) E[delta] + P_wait E[busy]) / S is the same queue at rate lambda * s in units
    // s times longer (the fixed point converges in a few steps).
    const double penalty = idle_penalty_mean_ms(idle, unit_rate_per_s / c);
    const double busy = busy_penalty_mean_ms(idle, unit_rate_per_s / c);
    double s = 1;
    Prediction scaled = p;
    for (int step = 0; step < 6; ++step) {
      const double p_free = scaled.wait_probability >= 0 ? 1.0 - scaled.wait_probability : 1.0;
      const double next = 1.0 + (p_free * penalty + (1.0 - p_free) * busy) / scaled.service_ms;
      const bool done = std::fabs(next - s) <= 1e-4 * s;
      s = next;
      scaled = model.predict(c, unit_rate_per_s * s);
      if (!scaled.stable) return scaled;
      if (done) break;
    }
    scaled.service_ms *= s;
    scaled.wait_ms *= s;
    scaled.latency_ms *= s;
    return scaled;
  }
  if (c < 1 || c > max_service) return {};
  return batched[static_cast<size_t>(c - 1)].predict(unit_rate_per_s);
}

double ConfigurationFamily::max_rate_per_s(int c) const {
  if (batch == 1) return model.max_rate_per_s(c);
  return batched[static_cast<size_t>(c - 1)].max_rate_per_s();
}

double ConfigurationFamily::min_latency_ms(int c) const {
  if (batch == 1) return model.min_latency_ms(c);
  return batched[static_cast<size_t>(c - 1)].min_latency_ms();
}

namespace {

// The batched families (K, T, b) for 1 < b <= max_batch beside the b = 1 family `base`: c runs
// while the tuples (1..c, K, T, b) exist (those of b = 1 do, up to base.max_service).
Status add_batched_families(const Profile& profile, const ConfigurationFamily& base,
                            QueueKind queue, int max_batch,
                            std::vector<ConfigurationFamily>* families) {
  for (int b : profile.batch_sizes(base.inter, base.intra)) {
    if (b == 1 || b > max_batch) continue;
    ConfigurationFamily fam{base.inter, base.intra, 0, base.model, base.tuples, b, {}, {}};
    for (int c = 1; c <= base.max_service; ++c) {
      if (profile.find({c, base.inter, base.intra, b}) == nullptr) break;
      SERF_ASSIGN_OR_RETURN(ServiceTable table,
                            service_table(profile, {c, base.inter, base.intra, b}));
      SERF_ASSIGN_OR_RETURN(BatchQueueModel model, BatchQueueModel::Create(queue, table));
      fam.batched.push_back(std::move(model));
      fam.tables.push_back(std::move(table));
      fam.max_service = c;
    }
    fam.tuples.resize(static_cast<size_t>(fam.max_service));
    if (fam.max_service > 0) families->push_back(std::move(fam));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<ConfigurationFamily>> build_families(const Profile& profile, int nodes,
                                                          QueueKind queue, int max_batch) {
  if (max_batch < 1 || max_batch > kMaxBatch) {
    return InvalidArgument("the largest batch must lie in [1, " + std::to_string(kMaxBatch) +
                           "] (got " + std::to_string(max_batch) + ")");
  }
  if (max_batch > 1 && queue != QueueKind::kMdInterf && queue != QueueKind::kMgInterf &&
      queue != QueueKind::kMmInterf) {
    return InvalidArgument(std::string("queue model ") + to_string(queue) +
                           " does not model batching; use md-interf, mg-interf or mm-interf");
  }
  // (K, T) -> tuples of batch 1 by i, for the configurations this cluster can run (validate()).
  const ClusterShape shape{nodes, profile.hardware.cores_per_node};
  std::map<std::pair<int, int>, std::map<int, const TupleStats*>> groups;
  for (const TupleStats& s : profile.tuples) {
    if (s.tuple.batch != 1) continue;  // batched tuples: add_batched_families
    if (!validate(s.tuple, shape).ok()) continue;
    groups[{s.tuple.inter, s.tuple.intra}][s.tuple.service] = &s;
  }
  std::vector<ConfigurationFamily> families;
  for (const auto& [kt, by_i] : groups) {
    std::vector<double> mean_ms, scv;
    std::vector<TupleStats> stats;
    for (int c = 1; validate(Configuration{c, kt.first, kt.second}, shape).ok(); ++c) {
      auto it = by_i.find(c);
      if (it == by_i.end()) break;
      stats.push_back(*it->second);
      mean_ms.push_back(it->second->mean_ms);
      scv.push_back(it->second->scv);
    }
    if (mean_ms.empty()) continue;
    SERF_ASSIGN_OR_RETURN(QueueModel model, QueueModel::Create(queue, mean_ms, scv));
    const int max_service = static_cast<int>(mean_ms.size());
    ConfigurationFamily family{kt.first,         kt.second, max_service, std::move(model),
                               std::move(stats), 1,         {},          {}};
    families.push_back(std::move(family));
    if (max_batch > 1) {
      const ConfigurationFamily base = families.back();
      SERF_RETURN_IF_ERROR(add_batched_families(profile, base, queue, max_batch, &families));
    }
  }
  if (families.empty()) {
    return InvalidArgument("the profile holds no configuration for " + std::to_string(nodes) +
                           " nodes x " + std::to_string(profile.hardware.cores_per_node) +
                           " cores: every configuration needs tuple (1, K, T) with K <= nodes and "
                           "T <= cores");
  }
  return families;
}

std::vector<Configuration> enumerate_configurations(const Profile& profile, int nodes,
                                                    int max_batch) {
  std::vector<Configuration> out;
  auto families = build_families(profile, nodes, QueueKind::kMmInterf, max_batch);
  if (!families.ok()) return out;
  for (const ConfigurationFamily& f : *families) {
    for (int c = 1; c <= f.max_service; ++c) out.push_back(f.config(c));
  }
  return out;
}

StatusOr<QueueModel> model_for(const Profile& profile, const Configuration& config, int nodes,
                               QueueKind queue) {
  SERF_RETURN_IF_ERROR(validate(config, {nodes, profile.hardware.cores_per_node}));
  if (config.batch != 1) {
    return InvalidArgument("configuration " + to_string(config) +
                           ": the queue models of b = 1 cannot predict batches of b > 1");
  }
  SERF_ASSIGN_OR_RETURN(auto tuples, profile.tuples_for(config));
  std::vector<double> mean_ms, scv;
  for (const TupleStats* s : tuples) {
    mean_ms.push_back(s->mean_ms);
    scv.push_back(s->scv);
  }
  return QueueModel::Create(queue, mean_ms, scv);
}

StatusOr<ConfigurationFamily> family_for(const Profile& profile, const Configuration& config,
                                         int nodes, QueueKind queue) {
  SERF_RETURN_IF_ERROR(validate(config, {nodes, profile.hardware.cores_per_node}));
  Configuration single = config;
  single.batch = 1;
  SERF_ASSIGN_OR_RETURN(QueueModel model, model_for(profile, single, nodes, queue));
  SERF_ASSIGN_OR_RETURN(auto levels, profile.tuples_for(single));
  std::vector<TupleStats> tuples;
  for (const TupleStats* s : levels) tuples.push_back(*s);
  ConfigurationFamily fam{config.inter,
                          config.intra,
                          config.service,
                          std::move(model),
                          std::move(tuples),
                          config.batch,
                          {},
                          {}};
  if (config.batch == 1) return fam;
  for (int c = 1; c <= config.service; ++c) {
    SERF_ASSIGN_OR_RETURN(ServiceTable table,
                          service_table(profile, {c, config.inter, config.intra, config.batch}));
    SERF_ASSIGN_OR_RETURN(BatchQueueModel m, BatchQueueModel::Create(queue, table));
    fam.batched.push_back(std::move(m));
    fam.tables.push_back(std::move(table));
  }
  return fam;
}

Status validate_rates(const std::vector<double>& rates, const std::string& what) {
  if (rates.empty()) return InvalidArgument(what + ": give at least one rate (requests/s)");
  for (size_t k = 0; k < rates.size(); ++k) {
    if (!std::isfinite(rates[k]) || rates[k] <= 0) {
      return InvalidArgument(what + ": rate " + format_g(rates[k]) +
                             " must be finite and > 0 requests/s");
    }
    if (k > 0 && !(rates[k] > rates[k - 1])) {
      return InvalidArgument(what + ": rates must be strictly ascending (" +
                             format_g(rates[k - 1]) + " then " + format_g(rates[k]) + ")");
    }
  }
  return Status::Ok();
}

ConfigurationTable::Lookup ConfigurationTable::lookup(double rate_per_s) const {
  Lookup out;
  if (entries.empty()) return out;
  auto it = std::lower_bound(entries.begin(), entries.end(), rate_per_s,
                             [](const TableEntry& e, double r) { return e.rate_per_s < r; });
  if (it == entries.end()) {
    out.entry = &entries.back();
    out.beyond_table = true;
  } else {
    out.entry = &*it;
  }
  return out;
}

StatusOr<ConfigurationTable> plan_table(const Profile& profile, const std::vector<double>& rates,
                                        const PlanOptions& options) {
  SERF_RETURN_IF_ERROR(validate_rates(rates, "rates"));
  SERF_ASSIGN_OR_RETURN(const int nodes, resolve_nodes(profile, options.nodes));
  SERF_ASSIGN_OR_RETURN(auto families,
                        build_families(profile, nodes, options.queue, options.max_batch));
  const Objective& objective = options.objective ? *options.objective : mean_latency_objective();

  ConfigurationTable table;
  table.model = profile.model;
  table.queue = options.queue;
  table.objective = objective.name();
  table.nodes = nodes;
  table.cores_per_node = profile.hardware.cores_per_node;
  table.illustrative = profile.illustrative;
  table.entries.resize(rates.size());

  // Per family: its first configuration's index in `configurations`, its pruning bound and its
  // largest stable unit rate.
  int max_c = 0;
  std::vector<size_t> first_index(families.size());
  std::vector<double> bound_ms(families.size()), max_rate(families.size(), 0.0);
  size_t total = 0;
  for (size_t f = 0; f < families.size(); ++f) {
    const ConfigurationFamily& fam = families[f];
    max_c = std::max(max_c, fam.max_service);
    first_index[f] = total;
    total += static_cast<size_t>(fam.max_service);
    table.configurations_evaluated = total;
    bound_ms[f] = objective.lower_bound_ms(fam, fam.max_service);
    for (int c = 1; c <= fam.max_service; ++c) {
      max_rate[f] = std::max(max_rate[f], fam.max_rate_per_s(c));
    }
  }
  if (options.keep_all) {
    table.configurations.reserve(total);
    for (const ConfigurationFamily& fam : families) {
      for (int c = 1; c <= fam.max_service; ++c) table.configurations.push_back(fam.config(c));
    }
    table.predictions.assign(total, std::vector<Prediction>(rates.size()));
  }

  std::vector<Prediction> buf(static_cast<size_t>(max_c));
  // Families in evaluation order; the last winner's family goes first so pruning bites early.
  std::vector<size_t> order(families.size());
  for (size_t f = 0; f < order.size(); ++f) order[f] = f;

  for (size_t r = 0; r < rates.size(); ++r) {
    TableEntry& entry = table.entries[r];
    entry.rate_per_s = rates[r];
    size_t best_family = 0;
    for (size_t f : order) {
      const ConfigurationFamily& fam = families[f];
      const int units = units_for(nodes, fam.inter);
      const double lambda = rates[r] / units;
      if (!(lambda < max_rate[f])) continue;  // every c of this family is unstable
      if (!options.keep_all && entry.stable && bound_ms[f] > entry.score_ms) continue;
      if (fam.batch == 1) {
        fam.model.predict_all(lambda, buf.data());
      } else {
        for (int c = 1; c <= fam.max_service; ++c) buf[c - 1] = fam.predict(c, lambda);
      }
      for (int c = 1; c <= fam.max_service; ++c) {
        const Prediction& p = buf[static_cast<size_t>(c - 1)];
        if (options.keep_all) table.predictions[first_index[f] + static_cast<size_t>(c - 1)][r] = p;
        if (!p.stable) continue;
        if (entry.offer(objective.score_ms(fam, c, lambda, p), fam.config(c), units, lambda, p)) {
          best_family = f;
        }
      }
    }
    if (entry.stable && order.front() != best_family) {
      std::rotate(order.begin(), std::find(order.begin(), order.end(), best_family),
                  std::find(order.begin(), order.end(), best_family) + 1);
    }
  }
  return table;
}

StatusOr<ConfigurationTable> plan_table(const Profile& profile, const std::vector<double>& rates,
                                        int nodes, QueueKind queue, bool keep_all) {
  PlanOptions options;
  options.nodes = nodes;
  options.queue = queue;
  options.keep_all = keep_all;
  return plan_table(profile, rates, options);
}

}  // namespace serf
