#include "serf/io/queue_report.h"

#include <cstdio>
#include <sstream>

#include "serf/core/statistics.h"
#include "serf/io/table_io.h"

namespace serf::io {

using nlohmann::json;

namespace {

std::string breakdown(const Prediction& p) {
  return "mean latency " + format_ms(p.latency_ms) + " (service " + format_ms(p.service_ms) +
         " + queueing " + format_ms(p.wait_ms) + "), utilization " +
         format_number("%.3f", p.utilization);
}

// "20 unit(s) of 1 node(s), each sees 0.5 requests/s"
std::string units_line(int units, int inter, const char* verb, double unit_rate_per_s) {
  return std::to_string(units) + " unit(s) of " + std::to_string(inter) + " node(s), each " + verb +
         " " + format_rate_text(unit_rate_per_s);
}

std::string padded(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size() + 1, ' ');
}

}  // namespace

std::string illustrative_note(bool illustrative) {
  return illustrative ? "note: this profile is illustrative, not measured (see its \"note\")\n"
                      : "";
}

json configuration_json(const Configuration& c) {
  return {{"service", c.service}, {"inter", c.inter}, {"intra", c.intra}, {"batch", c.batch}};
}

// ---- predict -----------------------------------------------------------------------------------

json predict_json(const ConfigurationPrediction& r, const ObjectiveLabel& objective) {
  json out = prediction_to_json(r.prediction);
  if (r.scored) {
    out.update({{"score_ms", r.score_ms},
                {"objective", objective.name},
                {"percentile", objective.percentile},
                {"arrival_scv", objective.arrival_scv},
                {"simulated", objective.simulations > 0}});
  }
  out.update(configuration_json(r.config));
  out.update({{"nodes", r.nodes},
              {"rate_per_s", r.rate_per_s},
              {"units", r.units},
              {"unit_rate_per_s", r.unit_rate_per_s},
              {"unit_capacity_per_s", r.unit_capacity_per_s},
              {"queue", to_string(r.queue)}});
  return out;
}

std::string predict_text(const ConfigurationPrediction& r, const ObjectiveLabel& objective,
                         bool illustrative) {
  std::ostringstream out;
  out << "configuration " << to_string(r.config) << " on " << r.nodes
      << " nodes: " << units_line(r.units, r.config.inter, "sees", r.unit_rate_per_s) << "\n";
  if (r.prediction.stable) {
    out << "model " << to_string(r.queue) << ": " << breakdown(r.prediction) << "\n";
    if (r.scored && (objective.percentile > 0 || objective.simulations > 0)) {
      out << (objective.simulations > 0 ? "simulated " : "") << objective.what << ": "
          << format_ms(r.score_ms) << "\n";
    }
    out << objective.note;
  } else {
    out << "model " << to_string(r.queue) << ": UNSTABLE: a unit serves at most "
        << format_rate_text(r.unit_capacity_per_s)
        << ", so the queue grows without bound at this rate\n";
  }
  out << illustrative_note(illustrative);
  return out.str();
}

// ---- plan --------------------------------------------------------------------------------------

std::string plan_text(const ConfigurationTable& table, const std::vector<std::string>& written,
                      const ObjectiveLabel& objective) {
  std::ostringstream out;
  out << "planned " << table.configurations_evaluated << " configurations x "
      << table.entries.size() << " load levels on " << table.nodes << " nodes x "
      << table.cores_per_node << " cores (model " << to_string(table.queue) << ", objective "
      << table.objective << ")\n";
  // Load ranges with one best configuration each: the switch points of the online scheduler.
  out << padded("load (requests/s)", 24) << padded("configuration", 18) << objective.what
      << " (ms)\n";
  const auto& e = table.entries;
  for (size_t a = 0; a < e.size();) {
    size_t b = a;
    while (b + 1 < e.size() && e[b + 1].stable == e[a].stable &&
           (!e[a].stable || e[b + 1].config == e[a].config)) {
      ++b;
    }
    const std::string range = format_rate(e[a].rate_per_s) + " - " + format_rate(e[b].rate_per_s);
    if (e[a].stable) {
      out << padded(range, 24) << padded(to_string(e[a].config), 18)
          << format_number("%.1f", e[a].score_ms) << " - " << format_number("%.1f", e[b].score_ms)
          << "\n";
    } else {
      out << padded(range, 24) << padded("none", 18) << "unstable (overloaded)\n";
    }
    a = b + 1;
  }
  out << "wrote";
  for (const std::string& w : written) out << " " << w;
  out << "\n" << objective.note << illustrative_note(table.illustrative);
  return out.str();
}

std::string plan_unstable_message(const ConfigurationTable& table) {
  size_t unstable = 0;
  double first = 0;
  for (const TableEntry& e : table.entries) {
    if (e.stable) continue;
    if (unstable++ == 0) first = e.rate_per_s;
  }
  if (unstable == 0) return "";
  return std::to_string(unstable) + " of " + std::to_string(table.entries.size()) +
         " load levels (from " + format_rate_text(first) + ") exceed every configuration's " +
         "capacity on " + std::to_string(table.nodes) +
         " nodes (marked unstable above; the table was written)";
}

// ---- size --------------------------------------------------------------------------------------

json sizing_json(const SizingResult& r) {
  json out = {{"rate_per_s", r.rate_per_s}, {"slo_ms", r.slo_ms}, {"feasible", r.feasible}};
  if (r.feasible) {
    out["nodes"] = r.nodes;
    out.update(configuration_json(r.config));
    out.update({{"units", r.units}, {"unit_rate_per_s", r.unit_rate_per_s}});
    out.update(prediction_to_json(r.prediction));
    out["score_ms"] = r.score_ms;
  } else {
    out["best_latency_ms"] = r.stable ? json(r.score_ms) : json(nullptr);
  }
  return out;
}

json sizing_rows_json(const std::vector<SizingResult>& rows, double slo_ms, int max_nodes,
                      QueueKind queue) {
  json out = {{"slo_ms", slo_ms},
              {"max_nodes", max_nodes},
              {"queue", to_string(queue)},
              {"rows", json::array()}};
  for (const SizingResult& r : rows) out["rows"].push_back(sizing_json(r));
  return out;
}

std::string sizing_text(const SizingResult& r, QueueKind queue, const ObjectiveLabel& objective,
                        bool illustrative) {
  std::ostringstream out;
  out << "fewest nodes for " << format_rate_text(r.rate_per_s) << " within a " << objective.what
      << " of " << format_ms(r.slo_ms) << ": " << r.nodes << " nodes with configuration "
      << to_string(r.config) << "\n"
      << units_line(r.units, r.config.inter, "sees", r.unit_rate_per_s) << "; predicted "
      << breakdown(r.prediction) << " (model " << to_string(queue) << ")\n";
  if (objective.active)
    out << "predicted " << objective.what << ": " << format_ms(r.score_ms) << "\n";
  out << objective.note << illustrative_note(illustrative);
  return out.str();
}

std::string sizing_rows_text(const std::vector<SizingResult>& rows, double slo_ms, int max_nodes,
                             QueueKind queue, const ObjectiveLabel& objective, bool illustrative) {
  std::ostringstream out;
  out << "fewest nodes within a " << objective.what << " of " << format_ms(slo_ms) << " (model "
      << to_string(queue) << ", at most " << max_nodes << " nodes)\n";
  out << padded("requests/s", 12) << padded("nodes", 6) << padded("configuration", 18)
      << objective.what << " (ms)\n";
  for (const SizingResult& r : rows) {
    out << padded(format_rate(r.rate_per_s), 12);
    if (r.feasible) {
      out << padded(std::to_string(r.nodes), 6) << padded(to_string(r.config), 18)
          << format_number("%.1f", r.score_ms) << "\n";
    } else {
      out << padded("-", 6) << padded("infeasible", 18)
          << (r.stable ? "best " + format_number("%.1f", r.score_ms) + " on " +
                             std::to_string(max_nodes) + " nodes"
                       : std::string("not even stable"))
          << "\n";
    }
  }
  out << objective.note << illustrative_note(illustrative);
  return out.str();
}

// ---- capacity ----------------------------------------------------------------------------------

json capacity_json(const CapacityResult& r, QueueKind queue, const ObjectiveLabel& objective) {
  json out = {{"rate_per_s", r.rate_per_s}, {"slo_ms", r.slo_ms}, {"nodes", r.nodes}};
  out.update(configuration_json(r.config));
  out.update(
      {{"units", r.units}, {"unit_rate_per_s", r.unit_rate_per_s}, {"queue", to_string(queue)}});
  out.update(prediction_to_json(r.prediction));
  if (objective.active) out.update({{"objective", objective.name}, {"score_ms", r.score_ms}});
  return out;
}

std::string capacity_text(const CapacityResult& r, QueueKind queue, const ObjectiveLabel& objective,
                          bool illustrative) {
  std::ostringstream out;
  out << r.nodes << " nodes sustain at most " << format_rate_text(r.rate_per_s) << " within a "
      << objective.what << " of " << format_ms(r.slo_ms) << ", with configuration "
      << to_string(r.config) << "\n"
      << units_line(r.units, r.config.inter, "at", r.unit_rate_per_s) << "; predicted "
      << breakdown(r.prediction) << " (model " << to_string(queue) << ")\n";
  if (objective.active)
    out << "predicted " << objective.what << ": " << format_ms(r.score_ms) << "\n";
  out << objective.note << illustrative_note(illustrative);
  return out.str();
}

// ---- simulate ----------------------------------------------------------------------------------

json simulation_json(const SimulationReport& r) {
  const sim::SimulationOptions& o = *r.options;
  const double utilization = r.result ? r.result->utilization : sim::offered_utilization(o);
  json j = {{"stable", r.result != nullptr}};
  j.update(configuration_json(r.config));
  j.update({{"nodes", r.nodes},
            {"units", o.units},
            {"rate_per_s", o.rate_per_s},
            {"unit_rate_per_s", o.rate_per_s / o.units},
            {"utilization", utilization},
            {"semantics", r.semantics},
            {"arrivals", r.arrivals},
            {"arrival_scv", o.arrival_scv},
            {"seed", o.seed}});
  if (r.result == nullptr) return j;  // unstable: no latency exists
  const sim::SimulationResult& s = *r.result;
  j.update({{"requests", s.requests},
            {"latency_ms", s.latency_ms},
            {"wait_ms", s.wait_ms},
            {"service_ms", s.service_ms},
            {"p50_ms", s.p50_ms},
            {"p90_ms", s.p90_ms},
            {"p99_ms", s.p99_ms},
            {"p999_ms", s.p999_ms},
            {"wait_p99_ms", s.wait_p99_ms},
            {"wait_probability", s.wait_probability},
            {"latency_ci95_ms", s.latency_ci95_ms}});
  return j;
}

std::string simulation_text(const SimulationReport& r) {
  const sim::SimulationOptions& o = *r.options;
  char buf[512];
  std::string out;
  const double rho = r.result ? r.result->utilization : sim::offered_utilization(o);
  std::snprintf(
      buf, sizeof buf,
      "configuration %s on %d nodes: %d units, %.6g requests/s (%.3g per unit), rho %.4f\n",
      to_string(r.config).c_str(), r.nodes, o.units, o.rate_per_s, o.rate_per_s / o.units, rho);
  out += buf;
  if (r.result == nullptr) {
    return out + "UNSTABLE: rho >= 1, the queue grows without bound; nothing was simulated\n";
  }
  const sim::SimulationResult& s = *r.result;
  std::snprintf(buf, sizeof buf,
                "simulated %lld requests (%s service, %s arrivals, seed %llu), %.4g s\n",
                static_cast<long long>(s.requests), r.semantics.c_str(), r.arrivals.c_str(),
                static_cast<unsigned long long>(o.seed), s.simulated_s);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "latency  mean %.4f ms +- %.4f (95%% CI)  wait %.4f ms  service %.4f ms\n",
                s.latency_ms, s.latency_ci95_ms, s.wait_ms, s.service_ms);
  out += buf;
  std::snprintf(buf, sizeof buf, "latency  p50 %.4f  p90 %.4f  p99 %.4f  p99.9 %.4f ms\n", s.p50_ms,
                s.p90_ms, s.p99_ms, s.p999_ms);
  out += buf;
  std::snprintf(buf, sizeof buf, "queued   %.2f%% of requests, wait p99 %.4f ms\n",
                100 * s.wait_probability, s.wait_p99_ms);
  return out + buf;
}

}  // namespace serf::io
