#include "serf/io/profile_io.h"

#include <cmath>

#include "serf/io/json_fields.h"

namespace serf::io {

using nlohmann::json;

namespace {

// "idle": [{"gap_ms", "delta_ms", "samples", "busy_ms"}, ...], gaps > 0 and increasing, deltas
// >= 0; busy_ms optional (profiles before session 31 lack it: 0).
StatusOr<std::vector<IdlePoint>> parse_idle(const json& t, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* arr, get_array(t, "idle", where));
  std::vector<IdlePoint> out;
  for (size_t j = 0; j < arr->size(); ++j) {
    const json& q = (*arr)[j];
    const std::string at = index_path(field_path(where, "idle"), j);
    if (!q.is_object())
      return InvalidArgument(at + ": must be an object {gap_ms, delta_ms, samples[, busy_ms]}");
    SERF_RETURN_IF_ERROR(
        refuse_unknown_fields(q, {"gap_ms", "delta_ms", "samples", "busy_ms"}, at));
    IdlePoint point;
    SERF_ASSIGN_OR_RETURN(point.gap_ms, get_number(q, "gap_ms", at));
    SERF_ASSIGN_OR_RETURN(point.delta_ms, get_number(q, "delta_ms", at));
    SERF_ASSIGN_OR_RETURN(point.samples, get_int(q, "samples", at));
    if (!(std::isfinite(point.gap_ms) && point.gap_ms > 0 && point.gap_ms <= kMaxServiceMs))
      return InvalidArgument(at + ".gap_ms: must be a number of milliseconds in (0, 1e9]");
    if (!out.empty() && !(point.gap_ms > out.back().gap_ms))
      return InvalidArgument(at + ".gap_ms: the gaps must increase (" +
                             std::to_string(point.gap_ms) + " after " +
                             std::to_string(out.back().gap_ms) + ")");
    if (!(std::isfinite(point.delta_ms) && point.delta_ms >= 0 && point.delta_ms <= kMaxServiceMs))
      return InvalidArgument(at + ".delta_ms: must be a number of milliseconds in [0, 1e9]");
    if (point.samples < 1) return InvalidArgument(at + ".samples: must be >= 1");
    if (q.contains("busy_ms")) {
      SERF_ASSIGN_OR_RETURN(point.busy_ms, get_number(q, "busy_ms", at));
      if (!(std::isfinite(point.busy_ms) && point.busy_ms >= 0 && point.busy_ms <= kMaxServiceMs))
        return InvalidArgument(at + ".busy_ms: must be a number of milliseconds in [0, 1e9]");
    }
    out.push_back(point);
  }
  return out;
}

StatusOr<Profile> parse(const json& doc) {
  Profile p;
  SERF_ASSIGN_OR_RETURN(std::string format, get_string(doc, "format", ""));
  if (format != kProfileFormat) {
    return InvalidArgument("format is '" + format + "', expected '" + kProfileFormat + "'");
  }
  SERF_RETURN_IF_ERROR(refuse_unknown_fields(
      doc, {"format", "model", "hardware", "illustrative", "incomplete", "note", "tuples"}, ""));
  SERF_ASSIGN_OR_RETURN(p.model, get_string(doc, "model", ""));
  SERF_ASSIGN_OR_RETURN(const json* hw, get_object(doc, "hardware", ""));
  SERF_RETURN_IF_ERROR(refuse_unknown_fields(*hw, {"nodes", "cores_per_node"}, "hardware"));
  SERF_ASSIGN_OR_RETURN(p.hardware.nodes, get_int(*hw, "nodes", "hardware"));
  SERF_ASSIGN_OR_RETURN(p.hardware.cores_per_node, get_int(*hw, "cores_per_node", "hardware"));
  // Optional, but of their type when present: "illustrative": "yes" is refused, not read as false.
  if (doc.contains("illustrative")) {
    SERF_ASSIGN_OR_RETURN(p.illustrative, get_bool(doc, "illustrative", ""));
  }
  if (doc.contains("note")) {
    SERF_ASSIGN_OR_RETURN(p.note, get_string(doc, "note", ""));
  }
  if (doc.contains("incomplete")) {
    SERF_ASSIGN_OR_RETURN(p.incomplete, get_bool(doc, "incomplete", ""));
  } else {  // written before the field: the note said so
    p.incomplete = p.note.rfind("incomplete", 0) == 0;
  }

  SERF_ASSIGN_OR_RETURN(const json* tuples, get_array(doc, "tuples", ""));
  if (tuples->empty()) return InvalidArgument("tuples: empty; nothing was profiled");
  p.tuples.reserve(tuples->size());
  for (size_t k = 0; k < tuples->size(); ++k) {
    const json& t = (*tuples)[k];
    const std::string where = index_path("tuples", k);
    TupleStats s;
    SERF_RETURN_IF_ERROR(refuse_unknown_fields(
        t,
        {"service", "inter", "intra", "batch", "mean_ms", "scv", "samples", "wall_s", "node_ms",
         "passes", "passes_kept", "refreshed_at", "drift_scale", "idle"},
        where));
    SERF_ASSIGN_OR_RETURN(s.tuple.service, get_int(t, "service", where));
    SERF_ASSIGN_OR_RETURN(s.tuple.inter, get_int(t, "inter", where));
    SERF_ASSIGN_OR_RETURN(s.tuple.intra, get_int(t, "intra", where));
    if (t.contains("batch")) {  // absent: batch 1 (profiles before batching)
      SERF_ASSIGN_OR_RETURN(s.tuple.batch, get_int(t, "batch", where));
    }
    SERF_ASSIGN_OR_RETURN(s.mean_ms, get_number(t, "mean_ms", where));
    SERF_ASSIGN_OR_RETURN(s.scv, get_number(t, "scv", where));
    SERF_ASSIGN_OR_RETURN(s.samples, get_int(t, "samples", where));
    if (t.contains("wall_s")) {
      SERF_ASSIGN_OR_RETURN(s.wall_s, get_number(t, "wall_s", where));
      if (!(s.wall_s >= 0)) return InvalidArgument(where + ".wall_s: must be >= 0 seconds");
    }
    if (t.contains("node_ms")) {
      SERF_ASSIGN_OR_RETURN(s.node_ms, get_number(t, "node_ms", where));
      if (!(s.node_ms >= 0 && s.node_ms <= s.mean_ms))
        return InvalidArgument(where + ".node_ms: must lie in [0, mean_ms]");
    }
    if (t.contains("passes")) {
      SERF_ASSIGN_OR_RETURN(s.passes, get_int(t, "passes", where));
      SERF_ASSIGN_OR_RETURN(s.passes_kept, get_int(t, "passes_kept", where));
      if (!(s.passes >= 1 && s.passes_kept >= 1 && s.passes_kept <= s.passes))
        return InvalidArgument(where + ".passes_kept: must lie in [1, passes]");
    }
    if (t.contains("refreshed_at")) {
      SERF_ASSIGN_OR_RETURN(s.refreshed_at, get_string(t, "refreshed_at", where));
    }
    if (t.contains("drift_scale")) {
      SERF_ASSIGN_OR_RETURN(s.drift_scale, get_number(t, "drift_scale", where));
      if (!(std::isfinite(s.drift_scale) && s.drift_scale > 0))
        return InvalidArgument(where + ".drift_scale: must be a finite number > 0, got " +
                               std::to_string(s.drift_scale));
    }
    if (t.contains("idle")) {
      SERF_ASSIGN_OR_RETURN(s.idle, parse_idle(t, where));
    }
    p.tuples.push_back(s);
  }
  SERF_RETURN_IF_ERROR(p.validate());
  p.reindex();
  return p;
}

}  // namespace

StatusOr<Profile> profile_from_json(const json& doc, const std::string& source) {
  StatusOr<Profile> p = parse(doc);
  if (!p.ok()) return p.status().with_context(source);
  return p;
}

json profile_to_json(const Profile& profile) {
  json tuples = json::array();
  for (const TupleStats& s : profile.tuples) {
    json t = {{"service", s.tuple.service}, {"inter", s.tuple.inter}, {"intra", s.tuple.intra},
              {"batch", s.tuple.batch},     {"mean_ms", s.mean_ms},   {"scv", s.scv},
              {"samples", s.samples}};
    if (s.wall_s > 0) t["wall_s"] = s.wall_s;
    if (s.node_ms > 0) t["node_ms"] = s.node_ms;
    if (s.passes > 1) {
      t["passes"] = s.passes;
      t["passes_kept"] = s.passes_kept;
    }
    if (!s.refreshed_at.empty()) t["refreshed_at"] = s.refreshed_at;
    if (s.drift_scale > 0) t["drift_scale"] = s.drift_scale;
    if (!s.idle.empty()) {
      json idle = json::array();
      for (const IdlePoint& q : s.idle) {
        json point = {{"gap_ms", q.gap_ms}, {"delta_ms", q.delta_ms}, {"samples", q.samples}};
        if (q.busy_ms > 0) point["busy_ms"] = q.busy_ms;
        idle.push_back(std::move(point));
      }
      t["idle"] = std::move(idle);
    }
    tuples.push_back(std::move(t));
  }
  json doc = {
      {"format", kProfileFormat},
      {"model", profile.model},
      {"hardware",
       {{"nodes", profile.hardware.nodes}, {"cores_per_node", profile.hardware.cores_per_node}}}};
  if (profile.illustrative) doc["illustrative"] = true;
  if (profile.incomplete) doc["incomplete"] = true;
  if (!profile.note.empty()) doc["note"] = profile.note;
  doc["tuples"] = std::move(tuples);
  return doc;
}

StatusOr<Profile> load_profile(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(json doc, read_json_file(path));
  return profile_from_json(doc, path);
}

Status save_profile(const Profile& profile, const std::string& path) {
  return write_text_file(path, profile_to_json(profile).dump(1) + "\n");
}

}  // namespace serf::io
