#include "profiler/profile_refresh.h"

#include <algorithm>
#include <cstdio>

#include "serf/core/recalibration.h"
#include "serf/io/json_fields.h"

namespace serf::profiler {

namespace {

// [i, K, T] or [i, K, T, b] (serf serve --out writes b only when it is not 1).
StatusOr<ParallelismTuple> tuple_from_json(const nlohmann::json& j, const std::string& where) {
  const bool ints =
      j.is_array() && std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) {
        return v.is_number_integer() && v.get<long long>() >= 1 && v.get<long long>() <= (1 << 30);
      });
  if (!ints || (j.size() != 3 && j.size() != 4))
    return InvalidArgument(
        where + ": expected [i, K, T] or [i, K, T, b] of positive integers, got " + j.dump());
  ParallelismTuple t{j[0].get<int>(), j[1].get<int>(), j[2].get<int>(), 1};
  if (j.size() == 4) t.batch = j[3].get<int>();
  return t;
}

}  // namespace

StatusOr<std::vector<ParallelismTuple>> drifted_tuples(const nlohmann::json& run,
                                                       const std::string& source,
                                                       const Profile& profile) {
  auto fail = [&](const Status& s) { return s.with_context(source); };
  auto format = io::get_string(run, "format", "");
  if (!format.ok()) return fail(format.status());
  if (*format != "serf-run/1")
    return InvalidArgument(source + ": format is \"" + *format +
                           "\", expected \"serf-run/1\" (written by serf serve --out)");
  auto model = io::get_string(run, "model", "");
  if (!model.ok()) return fail(model.status());
  if (*model != profile.model)
    return InvalidArgument(source + ": a run of model \"" + *model + "\", the profile is of \"" +
                           profile.model + "\"; give a run served from this profile's model");
  if (!run.contains("recalibrations"))
    return InvalidArgument(source +
                           ": no \"recalibrations\": the run did not self-calibrate (served with "
                           "--recalibrate off or without a tuple profile), so it names no drift");
  auto recs = io::get_array(run, "recalibrations", "");
  if (!recs.ok()) return fail(recs.status());
  std::vector<ParallelismTuple> out;
  for (size_t k = 0; k < (*recs)->size(); ++k) {
    const std::string where = io::index_path("recalibrations", k);
    const nlohmann::json& r = (**recs)[k];
    auto field =
        r.is_object()
            ? io::get_field(r, "tuple", where)
            : StatusOr<const nlohmann::json*>(InvalidArgument(where + ": expected an object"));
    if (!field.ok()) return fail(field.status());
    auto t = tuple_from_json(**field, io::field_path(where, "tuple"));
    if (!t.ok()) return fail(t.status());
    if (profile.find(*t) == nullptr)
      return InvalidArgument(source + ": " + where + " recalibrated tuple " + to_string(*t) +
                             ", which the profile does not hold; give the profile the run served");
    if (std::find(out.begin(), out.end(), *t) == out.end()) out.push_back(*t);
  }
  return out;
}

std::vector<ParallelismTuple> select_tuples(const Profile& profile, const std::vector<int>& inter,
                                            const std::vector<int>& batches) {
  auto in = [](const std::vector<int>& list, int v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<ParallelismTuple> out;
  for (const TupleStats& s : profile.tuples) {
    if (in(inter, s.tuple.inter) && in(batches, s.tuple.batch)) out.push_back(s.tuple);
  }
  return out;
}

StatusOr<Profile> merge_refresh(const Profile& old, const Profile& measured,
                                const std::string& at_utc, const std::string& why,
                                RefreshSummary* summary) {
  std::vector<TupleObservation> observations;
  for (const TupleStats& m : measured.tuples) observations.push_back({m.tuple, m.mean_ms});
  SERF_ASSIGN_OR_RETURN(Recalibration r, recalibrate(old, observations));
  RefreshSummary sum;
  sum.remeasured = r.observed;
  sum.scaled = r.scaled;
  sum.drift = r.drift;
  Profile out = std::move(r.profile);
  for (TupleStats& s : out.tuples) {
    if (const TupleStats* m = measured.find(s.tuple)) {
      s = *m;
      s.refreshed_at = at_utc;
      s.drift_scale = 0;
      continue;
    }
    const TupleStats* before = old.find(s.tuple);  // recalibrate kept every tuple of `old`
    const double factor = s.mean_ms / before->mean_ms;
    if (factor != 1.0) s.drift_scale = (before->drift_scale > 0 ? before->drift_scale : 1) * factor;
    // The nodes' share of the service time moves with it (and stays within it).
    s.node_ms = std::min(before->node_ms * factor, s.mean_ms);
  }
  char text[256];
  std::snprintf(text, sizeof(text),
                "refreshed %s (%s): %d tuple(s) re-measured, %d scaled by their neighbours' drift "
                "(mean factor %.4f)",
                at_utc.c_str(), why.c_str(), sum.remeasured, sum.scaled, sum.drift);
  out.note = old.note.empty() ? text : old.note + "; " + text;
  out.reindex();
  SERF_RETURN_IF_ERROR(out.validate());
  if (summary != nullptr) *summary = sum;
  return out;
}

}  // namespace serf::profiler
