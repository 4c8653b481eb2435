#include "profiler/validation_io.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <type_traits>

#include "serf/core/cluster_limits.h"
#include "serf/io/json_fields.h"

namespace serf::profiler {

using nlohmann::json;

namespace {

// Only the shape: validate_predictions checks the values (order, units) against the point.
StatusOr<RequestTrace> parse_trace(const json& t, const std::string& where) {
  if (!t.is_object()) return InvalidArgument(where + ": expected an object");
  SERF_RETURN_IF_ERROR(
      io::refuse_unknown_fields(t, {"warmup", "arrival_ms", "unit", "latency_ms"}, where));
  RequestTrace trace;
  SERF_ASSIGN_OR_RETURN(trace.warmup, io::get_int(t, "warmup", where));
  auto numbers = [&](const char* key, auto* out) -> Status {
    SERF_ASSIGN_OR_RETURN(const json* a, io::get_array(t, key, where));
    for (size_t k = 0; k < a->size(); ++k) {
      const json& x = (*a)[k];
      if (!x.is_number()) {
        return InvalidArgument(io::index_path(where + "." + key, k) + ": expected a number");
      }
      out->push_back(x.get<typename std::decay_t<decltype(*out)>::value_type>());
    }
    return Status::Ok();
  };
  SERF_RETURN_IF_ERROR(numbers("arrival_ms", &trace.arrival_ms));
  SERF_RETURN_IF_ERROR(numbers("unit", &trace.unit));
  SERF_RETURN_IF_ERROR(numbers("latency_ms", &trace.latency_ms));
  if (trace.unit.size() != trace.arrival_ms.size() ||
      trace.latency_ms.size() != trace.arrival_ms.size()) {
    return InvalidArgument(where +
                           ": arrival_ms, unit and latency_ms must have one entry per "
                           "request");
  }
  if (trace.warmup < 0 || static_cast<size_t>(trace.warmup) > trace.arrival_ms.size()) {
    return InvalidArgument(where + ".warmup must be in [0, the number of requests]");
  }
  return trace;
}

// A point's fresh tuples: each of (1..c, K, T) of its configuration once, with a finite mean and
// SCV in the range a profile allows. Batched points have none (the bulk model needs 1..b).
StatusOr<std::vector<TupleStats>> parse_fresh(const json& a, const std::string& where,
                                              const Configuration& config) {
  if (!a.is_array()) return InvalidArgument(where + ": expected an array");
  if (config.batch != 1) return InvalidArgument(where + ": only points of batch 1 have them");
  if (a.size() != static_cast<size_t>(config.service)) {
    return InvalidArgument(where + ": expected the " + std::to_string(config.service) +
                           " tuple(s) (1.." + std::to_string(config.service) +
                           ", K, T) of the point's configuration, got " + std::to_string(a.size()));
  }
  std::vector<TupleStats> fresh;
  for (size_t k = 0; k < a.size(); ++k) {
    const std::string at = io::index_path(where, k);
    if (!a[k].is_object()) return InvalidArgument(at + ": expected an object");
    SERF_RETURN_IF_ERROR(io::refuse_unknown_fields(
        a[k], {"service", "inter", "intra", "mean_ms", "scv", "samples"}, at));
    TupleStats t;
    SERF_ASSIGN_OR_RETURN(t.tuple.service, io::get_int(a[k], "service", at));
    SERF_ASSIGN_OR_RETURN(t.tuple.inter, io::get_int(a[k], "inter", at));
    SERF_ASSIGN_OR_RETURN(t.tuple.intra, io::get_int(a[k], "intra", at));
    SERF_ASSIGN_OR_RETURN(t.mean_ms, io::get_number(a[k], "mean_ms", at));
    SERF_ASSIGN_OR_RETURN(t.scv, io::get_number(a[k], "scv", at));
    SERF_ASSIGN_OR_RETURN(t.samples, io::get_int(a[k], "samples", at));
    if (t.tuple.service != static_cast<int>(k) + 1 || t.tuple.inter != config.inter ||
        t.tuple.intra != config.intra) {
      return InvalidArgument(at + ": expected the tuple (" + std::to_string(k + 1) + ", " +
                             std::to_string(config.inter) + ", " + std::to_string(config.intra) +
                             ") of the point's configuration, in order");
    }
    if (!(t.mean_ms >= kMinServiceMs && t.mean_ms <= kMaxServiceMs))
      return InvalidArgument(at + ".mean_ms must lie in [1e-6, 1e9] ms");
    if (!(t.scv >= 0 && t.scv <= kMaxServiceScv))
      return InvalidArgument(at + ".scv must lie in [0, 1e4]");
    if (t.samples < 1) return InvalidArgument(at + ".samples must be >= 1");
    fresh.push_back(t);
  }
  return fresh;
}

// The optional times of a point: a negative one is no measurement (a negative CI was read as
// "none given").
Status check_point_times(const json& p, const std::string& where) {
  for (const char* key :
       {"p99_latency_ms", "mean_latency_ci95_ms", "mean_service_ms", "wall_s", "fresh_wall_s"}) {
    if (!p.contains(key) || p[key].is_null()) continue;
    SERF_ASSIGN_OR_RETURN(double x, io::get_number(p, key, where));
    if (!(x >= 0)) return InvalidArgument(io::field_path(where, key) + " must be >= 0");
  }
  return Status::Ok();
}

// One point of a serf-exhaustive/1 file.
StatusOr<MeasuredPoint> parse_point(const json& p, const std::string& where) {
  MeasuredPoint mp;
  SERF_RETURN_IF_ERROR(io::refuse_unknown_fields(p,
                                                 {"rate",
                                                  "service",
                                                  "inter",
                                                  "intra",
                                                  "batch",
                                                  "requests",
                                                  "mean_latency_ms",
                                                  "p99_latency_ms",
                                                  "mean_latency_ci95_ms",
                                                  "mean_service_ms",
                                                  "arrival_scv",
                                                  "wall_s",
                                                  "valid",
                                                  "verdict",
                                                  "warmup_cut",
                                                  "duration_s",
                                                  "ci95_rel",
                                                  "trace",
                                                  "fresh_tuples",
                                                  "fresh_wall_s"},
                                                 where));
  SERF_ASSIGN_OR_RETURN(mp.config.service, io::get_int(p, "service", where));
  SERF_ASSIGN_OR_RETURN(mp.config.inter, io::get_int(p, "inter", where));
  SERF_ASSIGN_OR_RETURN(mp.config.intra, io::get_int(p, "intra", where));
  if (p.contains("batch")) {  // files written before batches: b = 1
    SERF_ASSIGN_OR_RETURN(mp.config.batch, io::get_int(p, "batch", where));
    if (mp.config.batch < 1 || mp.config.batch > kMaxBatch)
      return InvalidArgument(where + ".batch must lie in 1.." + std::to_string(kMaxBatch));
  }
  SERF_ASSIGN_OR_RETURN(mp.rate_per_s, io::get_number(p, "rate", where));
  SERF_ASSIGN_OR_RETURN(mp.requests, io::get_int(p, "requests", where));
  SERF_ASSIGN_OR_RETURN(mp.mean_latency_ms, io::get_number(p, "mean_latency_ms", where));
  if (p.contains("p99_latency_ms")) {
    SERF_ASSIGN_OR_RETURN(mp.p99_latency_ms, io::get_number(p, "p99_latency_ms", where));
  }
  if (p.contains("mean_service_ms")) {
    SERF_ASSIGN_OR_RETURN(mp.mean_service_ms, io::get_number(p, "mean_service_ms", where));
  }
  if (p.contains("mean_latency_ci95_ms") && !p["mean_latency_ci95_ms"].is_null()) {
    SERF_ASSIGN_OR_RETURN(mp.ci95_ms, io::get_number(p, "mean_latency_ci95_ms", where));
  }
  if (p.contains("arrival_scv")) {
    SERF_ASSIGN_OR_RETURN(mp.arrival_scv, io::get_number(p, "arrival_scv", where));
    if (!(mp.arrival_scv >= 0)) return InvalidArgument(where + ".arrival_scv must be >= 0");
  }
  if (p.contains("valid") && !p["valid"].is_null()) {
    if (!p["valid"].is_boolean()) return InvalidArgument(where + ".valid: expected true or false");
    mp.valid = p["valid"].get<bool>() ? 1 : 0;
    if (p.contains("verdict")) {
      SERF_ASSIGN_OR_RETURN(mp.verdict, io::get_string(p, "verdict", where));
    }
  }
  if (p.contains("wall_s")) {
    SERF_ASSIGN_OR_RETURN(mp.wall_s, io::get_number(p, "wall_s", where));
  }
  if (p.contains("trace")) {
    SERF_ASSIGN_OR_RETURN(mp.trace, parse_trace(p["trace"], where + ".trace"));
  }
  if (p.contains("fresh_tuples")) {
    SERF_ASSIGN_OR_RETURN(mp.fresh,
                          parse_fresh(p["fresh_tuples"], where + ".fresh_tuples", mp.config));
  }
  // The configuration is checked against the cluster it is validated on (validate_predictions).
  if (!(mp.rate_per_s > 0)) return InvalidArgument(where + ".rate must be > 0 requests/s");
  if (mp.requests < 1) {
    return InvalidArgument(where + ".requests must be >= 1 (nothing was measured there)");
  }
  if (!(mp.mean_latency_ms > 0)) return InvalidArgument(where + ".mean_latency_ms must be > 0");
  SERF_RETURN_IF_ERROR(check_point_times(p, where));
  return mp;
}

StatusOr<MeasuredSet> parse(const json& doc) {
  MeasuredSet m;
  SERF_ASSIGN_OR_RETURN(std::string format, io::get_string(doc, "format", ""));
  if (format != kExhaustiveFormat) {
    return InvalidArgument("format is '" + format + "', expected '" + kExhaustiveFormat +
                           "' (write it with mpirun ... serf profile --exhaustive)");
  }
  // A misspelt field would be ignored (its default used): refused. "best" is for people.
  SERF_RETURN_IF_ERROR(io::refuse_unknown_fields(
      doc, {"format", "model", "hardware", "total_wall_s", "points", "best"}, ""));
  SERF_ASSIGN_OR_RETURN(m.model, io::get_string(doc, "model", ""));
  if (doc.contains("hardware")) {
    SERF_ASSIGN_OR_RETURN(const json* hw, io::get_object(doc, "hardware", ""));
    SERF_RETURN_IF_ERROR(io::refuse_unknown_fields(*hw, {"nodes", "cores_per_node"}, "hardware"));
    SERF_ASSIGN_OR_RETURN(m.hardware.nodes, io::get_int(*hw, "nodes", "hardware"));
    SERF_ASSIGN_OR_RETURN(m.hardware.cores_per_node,
                          io::get_int(*hw, "cores_per_node", "hardware"));
    SERF_RETURN_IF_ERROR(serf::validate(m.hardware, "hardware"));
    m.has_hardware = true;
  }
  if (doc.contains("total_wall_s")) {
    SERF_ASSIGN_OR_RETURN(m.total_wall_s, io::get_number(doc, "total_wall_s", ""));
    if (!(m.total_wall_s >= 0)) return InvalidArgument("total_wall_s must be >= 0 seconds");
  }
  SERF_ASSIGN_OR_RETURN(const json* points, io::get_array(doc, "points", ""));
  if (points->empty()) return InvalidArgument("points: empty; nothing was measured");
  for (size_t k = 0; k < points->size(); ++k) {
    SERF_ASSIGN_OR_RETURN(MeasuredPoint mp, parse_point((*points)[k], io::index_path("points", k)));
    m.points.push_back(mp);
  }
  return m;
}

json config_json(const Configuration& c) {
  json j{{"service", c.service}, {"inter", c.inter}, {"intra", c.intra}};
  if (c.batch != 1) j["batch"] = c.batch;  // as serf-table/1 and serf-run/1 write b
  return j;
}

// Unstable predictions have no numbers: null, never NaN.
json number_or_null(bool stable, double x) { return stable ? json(x) : json(nullptr); }

}  // namespace

StatusOr<MeasuredSet> measured_from_json(const json& doc, const std::string& source) {
  StatusOr<MeasuredSet> m = parse(doc);
  if (!m.ok()) return m.status().with_context(source);
  return m;
}

StatusOr<MeasuredSet> load_measured(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(json doc, io::read_json_file(path));
  return measured_from_json(doc, path);
}

json fresh_tuples_json(const std::vector<TupleStats>& fresh) {
  json a = json::array();
  for (const TupleStats& t : fresh) {
    a.push_back({{"service", t.tuple.service},
                 {"inter", t.tuple.inter},
                 {"intra", t.tuple.intra},
                 {"mean_ms", t.mean_ms},
                 {"scv", t.scv},
                 {"samples", t.samples}});
  }
  return a;
}

json trace_json(const RequestTrace& trace) {
  auto us = [](double ms) { return std::round(ms * 1e3) / 1e3; };
  json arrivals = json::array(), latencies = json::array();
  for (double a : trace.arrival_ms) arrivals.push_back(us(a));
  for (double l : trace.latency_ms) latencies.push_back(us(l));
  return {{"warmup", trace.warmup},
          {"arrival_ms", std::move(arrivals)},
          {"unit", trace.unit},
          {"latency_ms", std::move(latencies)}};
}

namespace {

json point_json(const PointResult& r) {
  const MeasuredPoint& m = r.measured;
  const bool ok = r.prediction.stable;
  json p = config_json(m.config);
  p["rate"] = m.rate_per_s;
  p["units"] = r.units;
  p["unit_rate_per_s"] = r.unit_rate_per_s;
  p["requests"] = m.requests;
  p["measured_ms"] = m.mean_latency_ms;
  p["measured_ci95_ms"] = number_or_null(m.ci95_ms >= 0, m.ci95_ms);
  p["measured_p99_ms"] = m.p99_latency_ms;
  p["measured_service_ms"] = m.mean_service_ms;
  p["stable"] = ok;
  p["predicted_ms"] = number_or_null(ok, r.prediction.latency_ms);
  p["predicted_service_ms"] = number_or_null(ok, r.prediction.service_ms);
  p["predicted_wait_ms"] = number_or_null(ok, r.prediction.wait_ms);
  p["utilization"] = r.utilization;
  p["rel_error"] = number_or_null(ok, r.rel_error);
  p["arrival_scv"] = m.arrival_scv;
  p["service_drift"] = number_or_null(ok, r.service_drift);
  p["rescale"] = number_or_null(r.has_rescaled, r.rescale);
  p["rescaled_predicted_ms"] = number_or_null(r.has_rescaled, r.rescaled_latency_ms);
  p["rescaled_rel_error"] = number_or_null(r.has_rescaled, r.rescaled_rel_error);
  const bool adj = r.has_adjusted && ok;
  p["replay_ms"] = number_or_null(r.has_adjusted, r.replay_ms);
  p["replay_expected_ms"] = number_or_null(r.has_adjusted, r.replay_expected_ms);
  p["adjusted_ms"] = number_or_null(r.has_adjusted, r.adjusted_ms);
  p["adjusted_ci95_ms"] = number_or_null(r.has_adjusted, r.adjusted_ci95_ms);
  p["adjusted_rel_error"] = number_or_null(adj, r.adjusted_rel_error);
  p["predicted_p99_ms"] = number_or_null(r.has_p99, r.predicted_p99_ms);
  p["p99_rel_error"] = number_or_null(r.has_p99, r.p99_rel_error);
  p["fresh_predicted_ms"] = number_or_null(r.has_fresh, r.fresh_latency_ms);
  p["fresh_rel_error"] = number_or_null(r.has_fresh, r.fresh_rel_error);
  return p;
}

json rate_json(const RateComparison& rc) {
  json x = {{"rate", rc.rate_per_s},
            {"configurations", rc.configurations},
            {"measured_best", config_json(rc.measured_best)},
            {"measured_best_ms", rc.measured_best_ms},
            {"planner_stable", rc.planner_stable}};
  if (rc.planner_stable) {
    x["planner_pick"] = config_json(rc.planner_pick);
    x["planner_predicted_ms"] = rc.planner_predicted_ms;
    x["planner_measured_ms"] = rc.planner_measured_ms;
    x["match"] = rc.match;
    x["within_ci"] = rc.within_ci;
    x["penalty"] = rc.penalty;
    if (rc.has_adjusted) {
      x["adjusted_best"] = config_json(rc.adjusted_best);
      x["adjusted_match"] = rc.adjusted_match;
      x["adjusted_penalty"] = rc.adjusted_penalty;
    }
  }
  if (rc.has_fresh) {
    x["fresh_pick"] = config_json(rc.fresh_pick);
    x["fresh_match"] = rc.fresh_match;
    x["fresh_within_ci"] = rc.fresh_within_ci;
  }
  return x;
}

// The error summaries of one queue model: the mean's (with the unstable points), the p99's, and
// the steady, rescaled and adjusted variants.
json summary_json(const ModelValidation& mv) {
  const ErrorSummary& s = mv.summary;
  json unstable = json::array();
  for (const PointResult& r : mv.points) {
    if (r.prediction.stable) continue;
    json u = config_json(r.measured.config);
    u["rate"] = r.measured.rate_per_s;
    unstable.push_back(u);
  }
  json summary = {{"count", s.count},
                  {"unstable", s.unstable},
                  {"unstable_points", unstable},
                  {"not_modelled", s.not_modelled},
                  {"mean_rel_error", s.mean},
                  {"median_rel_error", s.median},
                  {"p95_rel_error", s.p95},
                  {"max_rel_error", s.max},
                  {"with_ci95", s.with_ci95},
                  {"within_ci95", s.within_ci95},
                  {"mean_ci95_rel", s.mean_ci95_rel}};
  const ErrorSummary& t = mv.p99_summary;
  summary["p99"] = {
      {"count", t.count},       {"mean_rel_error", t.mean}, {"median_rel_error", t.median},
      {"p95_rel_error", t.p95}, {"max_rel_error", t.max},   {"min_requests", kMinRequestsForP99}};
  const ErrorSummary& d = mv.steady_summary;
  summary["steady"] = {{"count", d.count},         {"max_service_drift", kMaxServiceDrift},
                       {"mean_rel_error", d.mean}, {"median_rel_error", d.median},
                       {"p95_rel_error", d.p95},   {"max_rel_error", d.max}};
  const ErrorSummary& q = mv.rescaled_summary;
  summary["rescaled"] = {{"count", q.count},
                         {"mean_rel_error", q.mean},
                         {"median_rel_error", q.median},
                         {"p95_rel_error", q.p95},
                         {"max_rel_error", q.max}};
  const ErrorSummary& a = mv.adjusted_summary;
  summary["adjusted"] = {
      {"count", a.count},       {"mean_rel_error", a.mean}, {"median_rel_error", a.median},
      {"p95_rel_error", a.p95}, {"max_rel_error", a.max},   {"within_ci95", a.within_ci95}};
  const ErrorSummary& f = mv.fresh_summary;
  summary["fresh"] = {
      {"count", f.count},       {"mean_rel_error", f.mean}, {"median_rel_error", f.median},
      {"p95_rel_error", f.p95}, {"max_rel_error", f.max},   {"within_ci95", f.within_ci95}};
  return summary;
}

json planner_json(const ModelValidation& mv) {
  json rates = json::array();
  for (const RateComparison& rc : mv.rates) rates.push_back(rate_json(rc));
  return {{"rates_compared", mv.rates.size()},
          {"matches", mv.matches},
          {"matches_within_ci", mv.matches_within_ci},
          {"mean_penalty", mv.mean_penalty},
          {"max_penalty", mv.max_penalty},
          {"adjusted_rates", mv.adjusted_rates},
          {"adjusted_matches", mv.adjusted_matches},
          {"fresh_rates", mv.fresh_rates},
          {"fresh_matches", mv.fresh_matches},
          {"fresh_matches_within_ci", mv.fresh_matches_within_ci},
          {"rates", rates}};
}

// One row per queue model of the summary `which`; with_ci adds the "in 95% CI" column.
void print_error_table(std::FILE* out, const ValidationReport& report,
                       ErrorSummary ModelValidation::*which, bool with_ci) {
  std::fprintf(out, "%-14s %6s %7s %7s %7s %7s", "queue", "points", "mean", "median", "p95", "max");
  std::fprintf(out, with_ci ? " %10s\n" : "\n", "in 95% CI");
  for (const ModelValidation& mv : report.models) {
    const ErrorSummary& t = mv.*which;
    std::fprintf(out, "%-14s %6d %7s %7s %7s %7s", to_string(mv.queue), t.count,
                 format_percent(t.mean).c_str(), format_percent(t.median).c_str(),
                 format_percent(t.p95).c_str(), format_percent(t.max).c_str());
    const std::string ci = std::to_string(t.within_ci95) + "/" + std::to_string(t.count);
    std::fprintf(out, with_ci ? " %10s\n" : "\n", ci.c_str());
  }
}

}  // namespace

json validation_json(const ValidationReport& report, const ValidationInputs& inputs) {
  json doc = {{"format", kValidationFormat},    {"model", inputs.model},
              {"profile", inputs.profile_path}, {"measured", inputs.measured_paths},
              {"nodes", report.nodes},          {"cores_per_node", report.cores_per_node}};
  json models = json::array();
  for (const ModelValidation& mv : report.models) {
    json points = json::array();
    for (const PointResult& r : mv.points) points.push_back(point_json(r));
    models.push_back({{"queue", to_string(mv.queue)},
                      {"summary", summary_json(mv)},
                      {"planner", planner_json(mv)},
                      {"points", points}});
  }
  doc["models"] = std::move(models);
  return doc;
}

namespace {

// The first table: every point's mean-latency error, the CI coverage and the planner's matches.
void print_summary_table(std::FILE* out, const ValidationReport& report) {
  std::fprintf(out, "relative error |predicted - measured| / measured of the mean latency:\n");
  std::fprintf(out, "%-14s %6s %8s %7s %7s %7s %7s %10s %10s %16s\n", "queue", "points", "unstable",
               "mean", "median", "p95", "max", "in 95% CI", "planner", "penalty mean/max");
  for (const ModelValidation& mv : report.models) {
    const ErrorSummary& s = mv.summary;
    const std::string ci =
        s.with_ci95 ? std::to_string(s.within_ci95) + "/" + std::to_string(s.with_ci95) : "-";
    const std::string planner = std::to_string(mv.matches) + "/" + std::to_string(mv.rates.size());
    const std::string penalty =
        mv.rates.empty() ? "-"
                         : format_percent(mv.mean_penalty) + "/" + format_percent(mv.max_penalty);
    std::fprintf(out, "%-14s %6d %8d %7s %7s %7s %7s %10s %10s %16s\n", to_string(mv.queue),
                 s.count, s.unstable, format_percent(s.mean).c_str(),
                 format_percent(s.median).c_str(), format_percent(s.p95).c_str(),
                 format_percent(s.max).c_str(), ci.c_str(), planner.c_str(), penalty.c_str());
  }
}

// The same error over subsets and re-made predictions: steady points, the queue model alone,
// the sample-path estimate and the fresh tuples (when measured), and the p99.
void print_variant_tables(std::FILE* out, const ValidationReport& report) {
  std::fprintf(
      out,
      "the same over the points whose measured service time is within %.0f%% of the profile's "
      "(the machine as profiled):\n",
      100 * kMaxServiceDrift);
  print_error_table(out, report, &ModelValidation::steady_summary, false);
  std::fprintf(
      out,
      "the queue model alone: each prediction re-made with the configuration's service times "
      "scaled to the point's measured service time (the profile's error taken out):\n");
  print_error_table(out, report, &ModelValidation::rescaled_summary, false);
  if (report.models.front().adjusted_summary.count > 0) {
    std::fprintf(
        out,
        "against the sample-path estimate: each measured mean corrected by replaying its own "
        "arrivals through the model's queue (measured - replay + the replay's long-run mean; "
        "arrival luck cancels):\n");
    print_error_table(out, report, &ModelValidation::adjusted_summary, true);
  }
  if (report.models.front().fresh_summary.count > 0) {
    std::fprintf(out,
                 "predicted from the fresh tuples (the configuration's tuples measured just before "
                 "each point, as a self-calibrating controller holds them), against the raw "
                 "measured means:\n");
    print_error_table(out, report, &ModelValidation::fresh_summary, true);
  }
  std::fprintf(out, "relative error of the p99 (tail approximation; points of >= %d requests):\n",
               kMinRequestsForP99);
  print_error_table(out, report, &ModelValidation::p99_summary, false);
}

// The measurement's CI width and the planner's matches against each kind of estimate.
void print_planner_lines(std::FILE* out, const ValidationReport& report) {
  const ErrorSummary& first = report.models.front().summary;
  if (first.with_ci95 > 0) {
    std::fprintf(out,
                 "measurement: mean 95%% CI half-width %s of the measured mean (batch means)\n",
                 format_percent(first.mean_ci95_rel).c_str());
  }
  std::fprintf(
      out,
      "planner: rates measured on 2+ configurations where the lowest predicted mean is the "
      "measured best; penalty = measured latency of that pick / measured best - 1\n");
  if (report.models.front().adjusted_rates > 0) {
    std::fprintf(
        out, "planner against the sample-path estimates (the best by estimate, not by raw mean):");
    for (const ModelValidation& mv : report.models) {
      std::fprintf(out, " %s %d/%d;", to_string(mv.queue), mv.adjusted_matches, mv.adjusted_rates);
    }
    std::fprintf(out, "\n");
  }
  if (report.models.front().fresh_rates > 0) {
    std::fprintf(out,
                 "planner from the fresh tuples (lowest fresh prediction = measured best, or "
                 "within the CIs):");
    for (const ModelValidation& mv : report.models) {
      std::fprintf(out, " %s %d/%d (%d within CI);", to_string(mv.queue), mv.fresh_matches,
                   mv.fresh_rates, mv.fresh_matches_within_ci);
    }
    std::fprintf(out, "\n");
  }
}

// The points left out of the tables: batched ones a queue model does not model, unstable ones.
void print_left_out(std::FILE* out, const ValidationReport& report) {
  const ErrorSummary& first = report.models.front().summary;
  for (const ModelValidation& mv : report.models) {
    if (mv.summary.not_modelled > 0)
      std::fprintf(out,
                   "%s does not model batching: %d point(s) of batched configurations left out "
                   "of its rows\n",
                   to_string(mv.queue), mv.summary.not_modelled);
  }
  if (first.unstable > 0) {
    std::fprintf(out, "skipped as unstable under %s (predicted utilization >= 1):",
                 to_string(report.models.front().queue));
    for (const auto& r : report.models.front().points) {
      if (!r.prediction.stable) {
        std::fprintf(out, " %s at %g/s;", to_string(r.measured.config).c_str(),
                     r.measured.rate_per_s);
      }
    }
    std::fprintf(out, "\n");
  }
}

}  // namespace

void print_validation_tables(std::FILE* out, const ValidationReport& report) {
  print_summary_table(out, report);
  print_variant_tables(out, report);
  print_planner_lines(out, report);
  print_left_out(out, report);
}

std::string validation_csv(const ValidationReport& report) {
  std::ostringstream out;
  out.precision(10);
  out << "queue,service,inter,intra,rate_per_s,units,unit_rate_per_s,requests,measured_ms,"
         "measured_ci95_ms,measured_p99_ms,measured_service_ms,stable,predicted_ms,"
         "predicted_service_ms,predicted_wait_ms,utilization,rel_error,arrival_scv,"
         "predicted_p99_ms,p99_rel_error,service_drift,rescale,rescaled_predicted_ms,"
         "rescaled_rel_error,replay_ms,replay_expected_ms,adjusted_ms,adjusted_ci95_ms,"
         "adjusted_rel_error,batch,fresh_predicted_ms,fresh_rel_error\n";
  for (const ModelValidation& mv : report.models) {
    for (const PointResult& r : mv.points) {
      const MeasuredPoint& m = r.measured;
      const bool ok = r.prediction.stable;
      auto opt = [&](bool have, double x) {
        std::ostringstream s;
        s.precision(10);
        if (have) s << x;
        return s.str();
      };
      out << to_string(mv.queue) << ',' << m.config.service << ',' << m.config.inter << ','
          << m.config.intra << ',' << m.rate_per_s << ',' << r.units << ',' << r.unit_rate_per_s
          << ',' << m.requests << ',' << m.mean_latency_ms << ',' << opt(m.ci95_ms >= 0, m.ci95_ms)
          << ',' << m.p99_latency_ms << ',' << m.mean_service_ms << ',' << (ok ? "true" : "false")
          << ',' << opt(ok, r.prediction.latency_ms) << ',' << opt(ok, r.prediction.service_ms)
          << ',' << opt(ok, r.prediction.wait_ms) << ',' << r.utilization << ','
          << opt(ok, r.rel_error) << ',' << m.arrival_scv << ','
          << opt(r.has_p99, r.predicted_p99_ms) << ',' << opt(r.has_p99, r.p99_rel_error) << ','
          << opt(ok, r.service_drift) << ',' << opt(r.has_rescaled, r.rescale) << ','
          << opt(r.has_rescaled, r.rescaled_latency_ms) << ','
          << opt(r.has_rescaled, r.rescaled_rel_error) << ',' << opt(r.has_adjusted, r.replay_ms)
          << ',' << opt(r.has_adjusted, r.replay_expected_ms) << ','
          << opt(r.has_adjusted, r.adjusted_ms) << ',' << opt(r.has_adjusted, r.adjusted_ci95_ms)
          << ',' << opt(r.has_adjusted && ok, r.adjusted_rel_error) << ',' << m.config.batch << ','
          << opt(r.has_fresh, r.fresh_latency_ms) << ',' << opt(r.has_fresh, r.fresh_rel_error)
          << '\n';
    }
  }
  return out.str();
}

void print_invalid_points(std::FILE* out, int judged, const std::vector<MeasuredPoint>& invalid,
                          bool compared) {
  if (judged == 0) {
    std::fprintf(out,
                 "points: none judged VALID/INVALID (fixed request counts; measure with "
                 "serf profile --exhaustive --precision P to judge them)\n");
    return;
  }
  std::fprintf(
      out, "points: %d of %d judged VALID; %zu INVALID %s\n",
      judged - static_cast<int>(invalid.size()), judged, invalid.size(),
      compared ? "compared too (--include-invalid)" : "left out (--include-invalid compares them)");
  for (const MeasuredPoint& p : invalid) {
    std::fprintf(out, "  INVALID %s at %g/s: %s\n", to_string(p.config).c_str(), p.rate_per_s,
                 p.verdict.c_str());
  }
}

}  // namespace serf::profiler
