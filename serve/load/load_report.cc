#include "serve/load/load_report.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "serf/core/statistics.h"
#include "serf/io/json_fields.h"

namespace serf::serve::load {

namespace {

using nlohmann::json;

LatencySummary summarize_ms(std::vector<double> v) {
  LatencySummary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean_ms = mean(v);
  s.p50_ms = quantile_sorted(v, 0.5);
  s.p90_ms = quantile_sorted(v, 0.9);
  s.p99_ms = quantile_sorted(v, 0.99);
  s.p999_ms = quantile_sorted(v, 0.999);
  s.max_ms = v.back();
  return s;
}

std::string ms(double x) { return format_number(x < 10 ? "%.3f" : "%.2f", x); }

std::string latency_line(const LatencySummary& s, bool tail) {
  std::string line = "mean " + ms(s.mean_ms) + "  p50 " + ms(s.p50_ms) + "  p90 " + ms(s.p90_ms) +
                     "  p99 " + ms(s.p99_ms);
  if (tail) line += "  p99.9 " + ms(s.p999_ms);
  return line + "  max " + ms(s.max_ms);
}

json latency_json(const LatencySummary& s) {
  return {{"count", s.count},   {"mean_ms", s.mean_ms},  {"p50_ms", s.p50_ms}, {"p90_ms", s.p90_ms},
          {"p99_ms", s.p99_ms}, {"p99_9_ms", s.p999_ms}, {"max_ms", s.max_ms}};
}

const char* protocol_name(Protocol p) { return p == Protocol::kGrpc ? "grpc" : "http"; }

std::string load_text(const LoadOptions& o) {
  std::string s;
  for (const LoadStep& step : o.load) {
    s += (s.empty() ? "" : ", then ") + format_rate(step.rate_per_s) + "/s";
    if (o.load.size() > 1) s += " from " + format_g(step.from_s) + " s";
  }
  return s;
}

// One-second bins of the schedule: what was offered in each and how it ended.
json timeline(const LoadRun& run, double span_s) {
  const size_t bins = static_cast<size_t>(std::ceil(std::max(span_s, 1e-9)));
  std::vector<std::vector<double>> latency(bins);
  std::vector<uint64_t> offered(bins, 0), rejected(bins, 0), other(bins, 0);
  for (const LoadRecord& r : run.records) {
    const size_t b = std::min(bins - 1, static_cast<size_t>(std::max(r.scheduled_s, 0.0)));
    ++offered[b];
    if (r.status == 200) {
      latency[b].push_back(r.latency_ms());
    } else if (r.status == 503) {
      ++rejected[b];
    } else if (r.status != 0) {
      ++other[b];
    }
  }
  json out = json::array();
  for (size_t b = 0; b < bins; ++b) {
    const std::vector<double>& v = latency[b];
    out.push_back({{"t_s", static_cast<double>(b)},
                   {"offered", offered[b]},
                   {"answered", v.size()},
                   {"rejected", rejected[b]},
                   {"other", other[b]},
                   {"mean_ms", mean(v)},
                   {"p99_ms", quantile(v, 0.99)}});
  }
  return out;
}

}  // namespace

std::string status_name(int status) {
  if (status == kStatusError) return "errors";
  if (status == kStatusTimeout) return "timeouts";
  if (status == 0) return "unfinished";
  return std::to_string(status);
}

LoadSummary summarize(const LoadRun& run) {
  LoadSummary s;
  s.scheduled = run.records.size();
  std::vector<double> latency, lateness;
  double last_scheduled_s = 0, last_done_s = 0;
  for (const LoadRecord& r : run.records) {
    last_scheduled_s = std::max(last_scheduled_s, r.scheduled_s);
    if (r.sent_s < 0) continue;
    ++s.sent;
    lateness.push_back(r.lateness_ms());
    if (r.status == 0) continue;
    ++s.ended;
    ++s.counts[r.status];
    last_done_s = std::max(last_done_s, r.done_s);
    if (r.status == 200) latency.push_back(r.latency_ms());
  }
  s.answered = latency.size();
  const LoadOptions& o = run.options;
  // A --duration run was offered load for all of it (unless stopped early or cut by
  // --requests); otherwise the schedule ends at its last arrival.
  const bool whole_duration = o.duration_s > 0 && !run.interrupted &&
                              (o.requests == 0 || s.scheduled < static_cast<uint64_t>(o.requests));
  s.span_s = whole_duration ? o.duration_s : last_scheduled_s;
  s.offered_per_s = s.span_s > 0 ? static_cast<double>(s.scheduled) / s.span_s : 0;
  s.throughput_per_s = last_done_s > 0 ? static_cast<double>(s.answered) / last_done_s : 0;
  s.latency = summarize_ms(std::move(latency));
  s.lateness = summarize_ms(std::move(lateness));
  return s;
}

std::string summary_text(const LoadRun& run, const LoadSummary& s) {
  const LoadOptions& o = run.options;
  std::ostringstream out;
  out << "serf load: " << o.url << " model " << o.model << " over " << protocol_name(o.protocol)
      << (o.binary ? " (binary tensors)" : (o.protocol == Protocol::kGrpc ? "" : " (JSON)")) << ", "
      << arrival_kind_name(o.arrivals) << " arrivals at " << load_text(o) << "\n";
  if (run.interrupted) out << "stopped early: " << run.stop_reason << "\n";
  out << "sent " << format_count(static_cast<int64_t>(s.sent)) << " of "
      << format_count(static_cast<int64_t>(s.scheduled)) << " in "
      << format_number("%.2f", s.span_s) << " s (offered " << format_rate_text(s.offered_per_s)
      << "); answered " << format_count(static_cast<int64_t>(s.answered)) << " (throughput "
      << format_rate_text(s.throughput_per_s) << ")\n";
  auto count = [&](int status) {
    auto it = s.counts.find(status);
    return format_count(static_cast<int64_t>(it == s.counts.end() ? 0 : it->second));
  };
  std::map<int, uint64_t> shown = {{200, 0}, {400, 0}, {503, 0}, {504, 0}};
  for (const auto& [status, n] : s.counts) {
    if (status > 0) shown[status] = n;
  }
  out << "status:";
  for (const auto& [status, n] : shown) out << " " << status << " " << count(status) << ",";
  out << " errors " << count(kStatusError) << ", timeouts " << count(kStatusTimeout) << "\n";
  if (s.latency.count > 0) {
    out << "latency ms (from the scheduled time): " << latency_line(s.latency, true) << "\n";
  }
  if (s.lateness.count > 0) {
    out << "client lateness ms (sent - scheduled): " << latency_line(s.lateness, false) << "\n";
  }
  for (const auto& [status, message] : run.first_errors) {
    out << "first " << (status > 0 ? std::to_string(status) : status_name(status)) << ": "
        << message << "\n";
  }
  return out.str();
}

std::string progress_text(const LoadProgress& p) {
  std::ostringstream out;
  out << format_number("%6.1f", p.now_s) << " s  sent " << p.sent << "  answered " << p.answered;
  for (const auto& [status, n] : p.counts) {
    if (status != 200) out << "  " << status_name(status) << " " << n;
  }
  out << "  in flight " << p.in_flight;
  if (p.waiting > 0) out << " (" << p.waiting << " waiting for a connection)";
  if (p.window_s > 0) {
    out << "  | last " << format_number("%.1f", p.window_s)
        << " s: " << format_rate(static_cast<double>(p.window_ended) / p.window_s) << "/s";
    if (p.window_mean_ms > 0) {
      out << "  mean " << ms(p.window_mean_ms) << " ms  p99 " << ms(p.window_p99_ms) << " ms";
    }
    out << "  late p99 " << ms(p.window_lateness_p99_ms) << " ms";
  }
  return out.str();
}

json run_json(const LoadRun& run, const LoadSummary& s) {
  const LoadOptions& o = run.options;
  json load = json::array();
  for (const LoadStep& step : o.load) {
    load.push_back({{"from_s", step.from_s}, {"rate_per_s", step.rate_per_s}});
  }
  json counts = json::object();
  for (const auto& [status, n] : s.counts) counts[status_name(status)] = n;
  json errors = json::object();
  for (const auto& [status, message] : run.first_errors) errors[status_name(status)] = message;
  return {{"format", "serf-load/1"},
          {"url", o.url},
          {"model", o.model},
          {"protocol", protocol_name(o.protocol)},
          {"binary", o.binary},
          {"arrivals", arrival_kind_name(o.arrivals)},
          {"arrival_scv", o.arrival_scv},
          {"load", load},
          {"requests", o.requests},
          {"duration_s", o.duration_s},
          {"connections", o.connections},
          {"timeout_s", o.timeout_s},
          {"seed", o.seed},
          {"served_model",
           {{"name", run.model.name},
            {"platform", run.model.platform},
            {"input", run.model.input},
            {"input_shape", run.model.input_shape},
            {"output", run.model.output}}},
          {"interrupted", run.interrupted},
          {"stop_reason", run.stop_reason},
          {"summary",
           {{"scheduled", s.scheduled},
            {"sent", s.sent},
            {"ended", s.ended},
            {"answered", s.answered},
            {"counts", counts},
            {"span_s", s.span_s},
            {"offered_per_s", s.offered_per_s},
            {"throughput_per_s", s.throughput_per_s},
            {"latency", latency_json(s.latency)},
            {"lateness", latency_json(s.lateness)}}},
          {"first_errors", errors},
          {"timeline", timeline(run, s.span_s)}};
}

Status write_run(const std::string& path, const LoadRun& run, const LoadSummary& summary,
                 const nlohmann::json& extra) {
  nlohmann::json doc = run_json(run, summary);
  for (const auto& [key, value] : extra.items()) doc[key] = value;
  SERF_RETURN_IF_ERROR(io::write_text_file(path, doc.dump(1) + "\n"));
  std::string csv = "id,scheduled_s,sent_s,done_s,latency_ms,lateness_ms,status\n";
  csv.reserve(csv.size() + run.records.size() * 64);
  for (size_t i = 0; i < run.records.size(); ++i) {
    const LoadRecord& r = run.records[i];
    const bool ended = r.status != 0;
    csv += std::to_string(i) + ',' + format_shortest(r.scheduled_s) + ',' +
           format_shortest(r.sent_s) + ',' + format_shortest(r.done_s) + ',' +
           (ended ? format_shortest(r.latency_ms()) : "") + ',' +
           (r.sent_s >= 0 ? format_shortest(r.lateness_ms()) : "") + ',' + status_name(r.status) +
           '\n';
  }
  return io::write_text_file(path + ".csv", csv);
}

}  // namespace serf::serve::load
