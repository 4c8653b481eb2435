#include "serf/io/table_io.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "serf/core/cluster_limits.h"
#include "serf/core/statistics.h"
#include "serf/io/json_fields.h"

namespace serf::io {

using nlohmann::json;

namespace {

// The numbers of a stable entry as the planner writes them: floor(N/K) units sharing the rate, a
// positive latency made of a wait and a service time, a utilization below 1. A table edited by
// hand (or written by something else) is refused where it says what no plan would.
StatusOr<TableEntry> check_entry(const TableEntry& e, const std::string& where,
                                 const ClusterShape& shape) {
  const Prediction& p = e.prediction;
  const int units = units_for(shape.nodes, e.config.inter);
  if (e.units != units) {
    return InvalidArgument(where + ".units: " + std::to_string(e.units) + ", but " +
                           std::to_string(shape.nodes) + " nodes make " + std::to_string(units) +
                           " unit(s) of K = " + std::to_string(e.config.inter));
  }
  const double unit_rate = e.rate_per_s / units;
  if (!(std::fabs(e.unit_rate_per_s - unit_rate) <= 1e-6 * unit_rate)) {
    return InvalidArgument(where + ".unit_rate_per_s: " + format_g(e.unit_rate_per_s) +
                           ", but the rate " + format_g(e.rate_per_s) + " over " +
                           std::to_string(units) + " unit(s) is " + format_g(unit_rate));
  }
  const std::pair<const char*, double> positive[] = {
      {"latency_ms", p.latency_ms}, {"service_ms", p.service_ms}, {"score_ms", e.score_ms}};
  for (const auto& [name, value] : positive) {
    if (!(value > 0)) {
      return InvalidArgument(where + "." + name + ": " + format_g(value) + " must be > 0 ms");
    }
  }
  if (!(p.wait_ms >= 0)) {
    return InvalidArgument(where + ".wait_ms: " + format_g(p.wait_ms) + " must be >= 0 ms");
  }
  if (!(p.utilization >= 0 && p.utilization < 1)) {
    return InvalidArgument(where + ".utilization: " + format_g(p.utilization) +
                           " must lie in [0, 1) for a stable entry");
  }
  return e;
}

// `shape`: the table's cluster; every configuration in it must run there (validate()).
StatusOr<TableEntry> entry_from_json(const json& e, const std::string& where,
                                     const ClusterShape& shape) {
  TableEntry entry;
  // A misspelt field ("bacth") would be ignored and its default served.
  SERF_RETURN_IF_ERROR(refuse_unknown_fields(
      e,
      {"rate", "stable", "service", "inter", "intra", "batch", "units", "unit_rate_per_s",
       "score_ms", "latency_ms", "wait_ms", "service_ms", "utilization"},
      where));
  SERF_ASSIGN_OR_RETURN(entry.rate_per_s, get_number(e, "rate", where));
  SERF_ASSIGN_OR_RETURN(entry.stable, get_bool(e, "stable", where));
  if (!entry.stable) return entry;
  SERF_ASSIGN_OR_RETURN(entry.config.service, get_int(e, "service", where));
  SERF_ASSIGN_OR_RETURN(entry.config.inter, get_int(e, "inter", where));
  SERF_ASSIGN_OR_RETURN(entry.config.intra, get_int(e, "intra", where));
  if (e.contains("batch")) {  // absent: batch 1 (tables before batching)
    SERF_ASSIGN_OR_RETURN(entry.config.batch, get_int(e, "batch", where));
  }
  if (Status valid = validate(entry.config, shape); !valid.ok()) return valid.with_context(where);
  SERF_ASSIGN_OR_RETURN(entry.units, get_int(e, "units", where));
  SERF_ASSIGN_OR_RETURN(entry.unit_rate_per_s, get_number(e, "unit_rate_per_s", where));
  SERF_ASSIGN_OR_RETURN(entry.score_ms, get_number(e, "score_ms", where));
  Prediction& p = entry.prediction;
  p.stable = true;
  SERF_ASSIGN_OR_RETURN(p.latency_ms, get_number(e, "latency_ms", where));
  SERF_ASSIGN_OR_RETURN(p.wait_ms, get_number(e, "wait_ms", where));
  SERF_ASSIGN_OR_RETURN(p.service_ms, get_number(e, "service_ms", where));
  SERF_ASSIGN_OR_RETURN(p.utilization, get_number(e, "utilization", where));
  return check_entry(entry, where, shape);
}

}  // namespace

json prediction_to_json(const Prediction& p) {
  if (!p.stable) {
    return {{"stable", false},
            {"latency_ms", nullptr},
            {"wait_ms", nullptr},
            {"service_ms", nullptr},
            {"utilization", nullptr}};
  }
  return {{"stable", true},
          {"latency_ms", p.latency_ms},
          {"wait_ms", p.wait_ms},
          {"service_ms", p.service_ms},
          {"utilization", p.utilization}};
}

json table_to_json(const ConfigurationTable& table) {
  json entries = json::array();
  for (const TableEntry& e : table.entries) {
    json row = {{"rate", e.rate_per_s}};
    if (e.stable) {
      row["service"] = e.config.service;
      row["inter"] = e.config.inter;
      row["intra"] = e.config.intra;
      row["batch"] = e.config.batch;
      row["units"] = e.units;
      row["unit_rate_per_s"] = e.unit_rate_per_s;
      row["score_ms"] = e.score_ms;
    } else {
      row["service"] = row["inter"] = row["intra"] = row["batch"] = nullptr;
    }
    row.update(prediction_to_json(e.stable ? e.prediction : Prediction{}));
    entries.push_back(std::move(row));
  }
  json doc = {{"format", kTableFormat},
              {"model", table.model},
              {"queue", to_string(table.queue)},
              {"objective", table.objective},
              {"nodes", table.nodes},
              {"cores_per_node", table.cores_per_node}};
  if (table.illustrative) doc["illustrative"] = true;
  doc["entries"] = std::move(entries);
  if (!table.configurations.empty()) {
    json all = json::array();
    for (size_t k = 0; k < table.configurations.size(); ++k) {
      const Configuration& c = table.configurations[k];
      json latency = json::array();
      for (const Prediction& p : table.predictions[k]) {
        latency.push_back(p.stable ? json(p.latency_ms) : json(nullptr));
      }
      all.push_back({{"service", c.service},
                     {"inter", c.inter},
                     {"intra", c.intra},
                     {"batch", c.batch},
                     {"latency_ms", std::move(latency)}});
    }
    doc["all"] = std::move(all);
  }
  return doc;
}

StatusOr<ConfigurationTable> table_from_json(const json& doc, const std::string& source) {
  auto parse = [&]() -> StatusOr<ConfigurationTable> {
    ConfigurationTable t;
    SERF_ASSIGN_OR_RETURN(std::string format, get_string(doc, "format", ""));
    if (format != kTableFormat) {
      return InvalidArgument("format is '" + format + "', expected '" + kTableFormat + "'");
    }
    SERF_ASSIGN_OR_RETURN(t.model, get_string(doc, "model", ""));
    SERF_ASSIGN_OR_RETURN(std::string queue, get_string(doc, "queue", ""));
    auto kind = parse_queue_kind(queue);
    if (!kind.ok()) return kind.status().with_context("queue");
    t.queue = *kind;
    SERF_ASSIGN_OR_RETURN(t.objective, get_string(doc, "objective", ""));
    SERF_ASSIGN_OR_RETURN(t.nodes, get_int(doc, "nodes", ""));
    SERF_ASSIGN_OR_RETURN(t.cores_per_node, get_int(doc, "cores_per_node", ""));
    SERF_RETURN_IF_ERROR(serf::validate(ClusterShape{t.nodes, t.cores_per_node}, ""));
    if (doc.contains("illustrative")) {
      SERF_ASSIGN_OR_RETURN(t.illustrative, get_bool(doc, "illustrative", ""));
    }
    // "all" (plan --all) is for plots and people: not read.
    SERF_RETURN_IF_ERROR(refuse_unknown_fields(doc,
                                               {"format", "model", "queue", "objective", "nodes",
                                                "cores_per_node", "illustrative", "entries", "all"},
                                               ""));
    SERF_ASSIGN_OR_RETURN(const json* entries, get_array(doc, "entries", ""));
    for (size_t k = 0; k < entries->size(); ++k) {
      SERF_ASSIGN_OR_RETURN(TableEntry e, entry_from_json((*entries)[k], index_path("entries", k),
                                                          {t.nodes, t.cores_per_node}));
      t.entries.push_back(e);
    }
    std::vector<double> rates;
    for (const TableEntry& e : t.entries) rates.push_back(e.rate_per_s);
    SERF_RETURN_IF_ERROR(validate_rates(rates, "entries"));
    return t;
  };
  StatusOr<ConfigurationTable> t = parse();
  if (!t.ok()) return t.status().with_context(source);
  return t;
}

std::string table_to_csv(const ConfigurationTable& table) {
  std::ostringstream os;
  os << "rate_per_s,stable,service,inter,intra,batch,units,unit_rate_per_s,latency_ms,wait_ms,"
        "service_ms,utilization\n";
  for (const TableEntry& e : table.entries) {
    os << format_shortest(e.rate_per_s);
    if (e.stable) {
      const Prediction& p = e.prediction;
      os << ",true," << e.config.service << "," << e.config.inter << "," << e.config.intra << ","
         << e.config.batch << "," << e.units << "," << format_shortest(e.unit_rate_per_s) << ","
         << format_shortest(p.latency_ms) << "," << format_shortest(p.wait_ms) << ","
         << format_shortest(p.service_ms) << "," << format_shortest(p.utilization) << "\n";
    } else {
      os << ",false,,,,,,,,,,\n";
    }
  }
  return os.str();
}

std::string all_predictions_to_csv(const ConfigurationTable& table) {
  if (table.configurations.empty()) return "";
  std::ostringstream os;
  os << "rate_per_s,service,inter,intra,batch,stable,latency_ms,wait_ms,service_ms,utilization\n";
  for (size_t k = 0; k < table.configurations.size(); ++k) {
    const Configuration& c = table.configurations[k];
    for (size_t r = 0; r < table.entries.size(); ++r) {
      const Prediction& p = table.predictions[k][r];
      os << format_shortest(table.entries[r].rate_per_s) << "," << c.service << "," << c.inter
         << "," << c.intra << "," << c.batch;
      if (p.stable) {
        os << ",true," << format_shortest(p.latency_ms) << "," << format_shortest(p.wait_ms) << ","
           << format_shortest(p.service_ms) << "," << format_shortest(p.utilization) << "\n";
      } else {
        os << ",false,,,,\n";
      }
    }
  }
  return os.str();
}

std::string csv_path_for(const std::string& table_path, const std::string& suffix) {
  const std::string ext = ".json";
  if (table_path.size() > ext.size() &&
      table_path.compare(table_path.size() - ext.size(), ext.size(), ext) == 0) {
    return table_path.substr(0, table_path.size() - ext.size()) + suffix;
  }
  return table_path + suffix;
}

StatusOr<std::vector<std::string>> save_table(const ConfigurationTable& table,
                                              const std::string& path) {
  std::vector<std::string> written;
  SERF_RETURN_IF_ERROR(write_text_file(path, table_to_json(table).dump(1) + "\n"));
  written.push_back(path);
  const std::string csv = csv_path_for(path);
  SERF_RETURN_IF_ERROR(write_text_file(csv, table_to_csv(table)));
  written.push_back(csv);
  if (!table.configurations.empty()) {
    const std::string all = csv_path_for(path, ".all.csv");
    SERF_RETURN_IF_ERROR(write_text_file(all, all_predictions_to_csv(table)));
    written.push_back(all);
  }
  return written;
}

StatusOr<ConfigurationTable> load_table(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(json doc, read_json_file(path));
  return table_from_json(doc, path);
}

}  // namespace serf::io
