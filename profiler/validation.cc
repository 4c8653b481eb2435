#include "profiler/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>

#include "serf/core/service_level.h"
#include "serf/core/tail_objective.h"
#include "serf/sim/simulator.h"

namespace serf::profiler {

namespace {

std::string point_name(size_t k, const MeasuredPoint& p) {
  return "measured point " + std::to_string(k) + " " + to_string(p.config) + " at " +
         format_g(p.rate_per_s) + " requests/s";
}

bool same_config(const Configuration& a, const Configuration& b) { return a == b; }

// The replay queue's long-run mean: long enough that its CI is well under the measurement's.
constexpr int64_t kReplayExpectationRequests = 200000;

// PointResult's sample-path estimate (has_adjusted and what goes with it); the point keeps
// has_adjusted false when it has no trace or the replay queue is saturated.
Status adjust_by_replay(const Profile& profile, const MeasuredPoint& p, int units, size_t k,
                        PointResult* r) {
  const RequestTrace& t = p.trace;
  // The replay queue serves one request per slot: a batched point has no replay (yet).
  if (t.empty() || p.config.batch > 1) return Status::Ok();
  const size_t warmup = static_cast<size_t>(t.warmup);
  for (size_t j = 0; j < t.latency_ms.size(); ++j) {
    if (!(std::isfinite(t.latency_ms[j]) && t.latency_ms[j] >= 0)) {
      return InvalidArgument(point_name(k, p) + ": trace latency " + std::to_string(j) +
                             " must be finite and >= 0");
    }
  }
  if (t.arrival_ms.size() - warmup < 20) return Status::Ok();  // too few for batch means
  SERF_ASSIGN_OR_RETURN(std::vector<ServiceLevel> levels, service_levels(profile, p.config));
  for (ServiceLevel& l : levels) l.scv = 0;  // the M/D model's deterministic work
  auto replay =
      sim::replay_latencies(levels, sim::ServiceSemantics::kShared, units, t.arrival_ms, t.unit);
  if (!replay.ok()) return replay.status().with_context(point_name(k, p) + ": trace");
  sim::SimulationOptions o;
  o.levels = levels;
  o.units = units;
  o.semantics = sim::ServiceSemantics::kShared;
  o.arrival_kind = p.arrival_scv == 1   ? ArrivalKind::kPoisson
                   : p.arrival_scv == 0 ? ArrivalKind::kDeterministic
                                        : ArrivalKind::kGamma;
  o.arrival_scv = p.arrival_scv;
  o.rate_per_s = p.rate_per_s;
  o.requests = kReplayExpectationRequests;
  auto expected = sim::simulate(o);
  if (!expected.ok()) {
    if (expected.status().code() == StatusCode::kInfeasible) return Status::Ok();  // saturated
    return expected.status().with_context(point_name(k, p));
  }
  std::vector<double> diff;
  double replay_sum = 0, diff_sum = 0;
  for (size_t j = warmup; j < t.arrival_ms.size(); ++j) {
    replay_sum += (*replay)[j];
    diff.push_back(t.latency_ms[j] - (*replay)[j]);
    diff_sum += diff.back();
  }
  const double n = static_cast<double>(diff.size());
  const double path_ci = batch_means_ci95(diff);
  r->has_adjusted = true;
  r->replay_ms = replay_sum / n;
  r->replay_expected_ms = expected->latency_ms;
  // measured - (replay - expected), with the measured mean taken over the trace itself.
  r->adjusted_ms = diff_sum / n + expected->latency_ms;
  r->adjusted_ci95_ms = std::sqrt(std::max(path_ci, 0.0) * std::max(path_ci, 0.0) +
                                  expected->latency_ci95_ms * expected->latency_ci95_ms);
  if (!std::isfinite(r->adjusted_ms) || !std::isfinite(r->adjusted_ci95_ms)) {
    return InvalidArgument(point_name(k, p) +
                           ": trace latencies out of range (their sum is not finite)");
  }
  if (!(r->adjusted_ms > 0)) r->has_adjusted = false;  // the replay outran the measurement
  return Status::Ok();
}

}  // namespace

void summarize_errors(std::vector<double> errors, ErrorSummary* s) {
  s->count = static_cast<int>(errors.size());
  s->mean = s->median = s->p95 = s->max = 0;
  if (errors.empty()) return;
  std::sort(errors.begin(), errors.end());
  s->mean = mean(errors);
  s->median = quantile_sorted(errors, 0.5);
  s->p95 = quantile_sorted(errors, 0.95);
  s->max = errors.back();
}

namespace {

Status check_points(const Profile& profile, const std::vector<MeasuredPoint>& points, int nodes) {
  for (size_t k = 0; k < points.size(); ++k) {
    const MeasuredPoint& p = points[k];
    if (Status valid = validate(p.config, {nodes, profile.hardware.cores_per_node}); !valid.ok()) {
      return valid.with_context(point_name(k, p));
    }
    if (!(std::isfinite(p.arrival_scv) && p.arrival_scv >= 0)) {
      return InvalidArgument(point_name(k, p) + ": arrival SCV must be finite and >= 0");
    }
    if (p.config.batch > 1 && p.arrival_scv != 1) {
      return InvalidArgument(point_name(k, p) + ": arrival SCV " + format_g(p.arrival_scv) +
                             "; a batched configuration is validated under Poisson arrivals "
                             "only (SCV 1: the bulk-service model's)");
    }
    if (!(std::isfinite(p.rate_per_s) && p.rate_per_s > 0) ||
        !(std::isfinite(p.mean_latency_ms) && p.mean_latency_ms > 0)) {
      return InvalidArgument(point_name(k, p) + ": rate and mean latency must be finite and > 0");
    }
    for (size_t j = 0; j < k; ++j) {
      if (same_config(points[j].config, p.config) && points[j].rate_per_s == p.rate_per_s) {
        return InvalidArgument(point_name(k, p) + " repeats point " + std::to_string(j) +
                               "; give each (configuration, rate) once");
      }
    }
  }
  return Status::Ok();
}

// The relative errors of one queue model over the points, by kind, before their summaries.
struct ErrorLists {
  std::vector<double> mean, p99, steady, rescaled, adjusted, fresh;
  double ci_rel_sum = 0;
};

// The prediction at the service time the point measured: the fixed point of s = measured service
// / predicted service of the s-scaled model (the state mix moves with the load, so one step is
// not exact for c > 1). Every service time times s is the same queue on a clock s times slower:
// latency s * L(rate * s). `predict` is the configuration's model at a unit rate (b = 1 or the
// bulk-service model); `correct` applies the planner's objective to a prediction (identity for a
// batched point, whose arrivals are Poisson). When the point measured its service time and the
// scaled model is stable, sets r's rescaled fields and adds the error to errors->rescaled.
void rescale(const std::function<Prediction(double)>& predict,
             const std::function<Prediction(const Prediction&)>& correct, const MeasuredPoint& p,
             PointResult* r, ErrorLists* errors) {
  if (!(p.mean_service_ms > 0) || !(r->prediction.service_ms > 0)) return;
  double scale = 1;
  Prediction scaled;
  for (int step = 0; step < 20; ++step) {
    scaled = predict(r->unit_rate_per_s * scale);
    if (!scaled.stable || !(scaled.service_ms > 0)) break;
    const double next = p.mean_service_ms / scaled.service_ms;
    const bool done = std::fabs(next - scale) <= 1e-6 * scale;
    scale = next;
    if (done) break;
  }
  scaled = predict(r->unit_rate_per_s * scale);
  if (!scaled.stable) return;
  scaled = correct(scaled);
  r->has_rescaled = true;
  r->rescale = scale;
  r->rescaled_latency_ms = scale * scaled.latency_ms;
  r->rescaled_rel_error = std::fabs(r->rescaled_latency_ms - p.mean_latency_ms) / p.mean_latency_ms;
  errors->rescaled.push_back(r->rescaled_rel_error);
}

// The planner's objectives for a stable point: the mean with the bursty-arrival factor (and its
// rescaled variant), and the p99.
Status apply_objectives(const Profile& profile, const QueueModel& model,
                        const ConfigurationFamily& family, int nodes, const MeasuredPoint& p,
                        PointResult* r, ErrorLists* errors) {
  LatencyObjectiveOptions o;
  o.arrival_scv = p.arrival_scv;
  o.nodes = nodes;
  SERF_ASSIGN_OR_RETURN(std::unique_ptr<LatencyObjective> mean_objective,
                        LatencyObjective::Create(profile, o));
  r->prediction = mean_objective->corrected(family, p.config.service, r->prediction);
  const int c = p.config.service;
  rescale([&](double rate) { return model.predict(c, rate); },
          [&](const Prediction& x) { return mean_objective->corrected(family, c, x); }, p, r,
          errors);
  o.percentile = 99;
  SERF_ASSIGN_OR_RETURN(std::unique_ptr<LatencyObjective> p99_objective,
                        LatencyObjective::Create(profile, o));
  const double p99 =
      p99_objective->score_ms(family, p.config.service, r->unit_rate_per_s, r->prediction);
  if (std::isfinite(p99) && p.p99_latency_ms > 0 && p.requests >= kMinRequestsForP99) {
    r->has_p99 = true;
    r->predicted_p99_ms = p99;
    r->p99_rel_error = std::fabs(p99 - p.p99_latency_ms) / p.p99_latency_ms;
    errors->p99.push_back(r->p99_rel_error);
  }
  return Status::Ok();
}

// The prediction from the point's fresh tuples: the profile's tuples of its configuration replaced
// by those measured just before it, corrected for bursty arrivals as the planner's objective is.
Status predict_fresh(const Profile& profile, int nodes, QueueKind queue, const MeasuredPoint& p,
                     PointResult* r, ErrorLists* errors, ModelValidation* mv) {
  if (p.fresh.empty()) return Status::Ok();
  Profile fresh = profile;
  for (const TupleStats& t : p.fresh) {
    auto it = std::find_if(fresh.tuples.begin(), fresh.tuples.end(),
                           [&](const TupleStats& u) { return u.tuple == t.tuple; });
    if (it == fresh.tuples.end()) {
      fresh.tuples.push_back(t);
    } else {
      std::vector<IdlePoint> idle = std::move(it->idle);  // the probe's, not re-measured
      *it = t;
      it->idle = std::move(idle);
    }
  }
  fresh.reindex();
  SERF_ASSIGN_OR_RETURN(ConfigurationFamily family, family_for(fresh, p.config, nodes, queue));
  Prediction prediction = family.predict(p.config.service, r->unit_rate_per_s);
  if (!prediction.stable) return Status::Ok();
  LatencyObjectiveOptions o;
  o.arrival_scv = p.arrival_scv;
  o.nodes = nodes;
  SERF_ASSIGN_OR_RETURN(std::unique_ptr<LatencyObjective> objective,
                        LatencyObjective::Create(fresh, o));
  prediction = objective->corrected(family, p.config.service, prediction);
  r->has_fresh = true;
  r->fresh_latency_ms = prediction.latency_ms;
  r->fresh_rel_error = std::fabs(prediction.latency_ms - p.mean_latency_ms) / p.mean_latency_ms;
  errors->fresh.push_back(r->fresh_rel_error);
  if (p.ci95_ms >= 0) {
    ++mv->fresh_summary.with_ci95;
    if (std::fabs(prediction.latency_ms - p.mean_latency_ms) <= p.ci95_ms)
      ++mv->fresh_summary.within_ci95;
  }
  return Status::Ok();
}

// The errors of a stable prediction against the measured mean, its CI and the adjusted mean.
void score_point(const MeasuredPoint& p, PointResult* r, ErrorLists* errors, ModelValidation* mv) {
  r->rel_error = std::fabs(r->prediction.latency_ms - p.mean_latency_ms) / p.mean_latency_ms;
  errors->mean.push_back(r->rel_error);
  if (p.mean_service_ms > 0 && r->prediction.service_ms > 0)
    r->service_drift = p.mean_service_ms / r->prediction.service_ms - 1;
  if (std::fabs(r->service_drift) <= kMaxServiceDrift) errors->steady.push_back(r->rel_error);
  if (r->has_adjusted) {
    r->adjusted_rel_error = std::fabs(r->prediction.latency_ms - r->adjusted_ms) / r->adjusted_ms;
    errors->adjusted.push_back(r->adjusted_rel_error);
    ++mv->adjusted_summary.with_ci95;
    if (std::fabs(r->prediction.latency_ms - r->adjusted_ms) <= r->adjusted_ci95_ms)
      ++mv->adjusted_summary.within_ci95;
  }
  if (p.ci95_ms >= 0) {
    ++mv->summary.with_ci95;
    errors->ci_rel_sum += p.ci95_ms / p.mean_latency_ms;
    if (std::fabs(r->prediction.latency_ms - p.mean_latency_ms) <= p.ci95_ms)
      ++mv->summary.within_ci95;
  }
}

// The measured configuration with the lowest `ms(r)` (tie_break_less on ties).
template <typename Ms>
const PointResult* lowest(const std::vector<const PointResult*>& rs, Ms ms) {
  const PointResult* best = nullptr;
  for (const PointResult* r : rs) {
    if (best == nullptr || ms(*r) < ms(*best) ||
        (ms(*r) == ms(*best) && tie_break_less(r->measured.config, best->measured.config))) {
      best = r;
    }
  }
  return best;
}

// The pick is the measured best, or its measured mean exceeds the best's by at most the two 95 %
// CI half-widths combined.
bool within_cis(const PointResult& pick, const PointResult& best) {
  if (&pick == &best) return true;
  const double h_pick = pick.measured.ci95_ms, h_best = best.measured.ci95_ms;
  return h_pick >= 0 && h_best >= 0 &&
         pick.measured.mean_latency_ms - best.measured.mean_latency_ms <=
             std::sqrt(h_pick * h_pick + h_best * h_best);
}

// The lowest fresh prediction at a rate against the measured best, when every configuration
// measured there has one.
void compare_fresh_pick(const std::vector<const PointResult*>& rs, const PointResult& best,
                        RateComparison* rc, ModelValidation* mv) {
  if (!std::all_of(rs.begin(), rs.end(), [](const PointResult* r) { return r->has_fresh; })) return;
  const PointResult* pick = lowest(rs, [](const PointResult& r) { return r.fresh_latency_ms; });
  rc->has_fresh = true;
  rc->fresh_pick = pick->measured.config;
  rc->fresh_match = pick == &best;
  rc->fresh_within_ci = within_cis(*pick, best);
  ++mv->fresh_rates;
  if (rc->fresh_match) ++mv->fresh_matches;
  if (rc->fresh_within_ci) ++mv->fresh_matches_within_ci;
}

// Rates measured on two or more configurations: the planner's rule (lowest predicted mean,
// tie_break_less on ties) among the measured configurations against the measured best.
void compare_planner(ModelValidation* mv) {
  std::map<double, std::vector<const PointResult*>> by_rate;
  for (const PointResult& r : mv->points) by_rate[r.measured.rate_per_s].push_back(&r);
  double penalty_sum = 0;
  int picked = 0;
  for (const auto& [rate, rs] : by_rate) {
    if (rs.size() < 2) continue;
    RateComparison rc;
    rc.rate_per_s = rate;
    rc.configurations = static_cast<int>(rs.size());
    const PointResult* best =
        lowest(rs, [](const PointResult& r) { return r.measured.mean_latency_ms; });
    Choice choice;
    const PointResult* pick = nullptr;
    for (const PointResult* r : rs) {
      if (r->prediction.stable && choice.offer(r->prediction.latency_ms, r->measured.config,
                                               r->units, r->unit_rate_per_s, r->prediction)) {
        pick = r;
      }
    }
    rc.measured_best = best->measured.config;
    rc.measured_best_ms = best->measured.mean_latency_ms;
    if (pick != nullptr) {
      rc.planner_stable = true;
      rc.planner_pick = pick->measured.config;
      rc.planner_predicted_ms = pick->prediction.latency_ms;
      rc.planner_measured_ms = pick->measured.mean_latency_ms;
      rc.match = pick == best;
      rc.penalty = rc.planner_measured_ms / rc.measured_best_ms - 1;
      if (rc.match) ++mv->matches;
      rc.within_ci = within_cis(*pick, *best);
      if (rc.within_ci) ++mv->matches_within_ci;
      rc.has_adjusted =
          std::all_of(rs.begin(), rs.end(), [](const PointResult* r) { return r->has_adjusted; });
      if (rc.has_adjusted) {
        const PointResult* best_adjusted =
            lowest(rs, [](const PointResult& r) { return r.adjusted_ms; });
        rc.adjusted_best = best_adjusted->measured.config;
        rc.adjusted_match = pick == best_adjusted;
        rc.adjusted_penalty = pick->adjusted_ms / best_adjusted->adjusted_ms - 1;
        ++mv->adjusted_rates;
        if (rc.adjusted_match) ++mv->adjusted_matches;
      }
      penalty_sum += rc.penalty;
      mv->max_penalty = std::max(mv->max_penalty, rc.penalty);
      ++picked;
    }
    compare_fresh_pick(rs, *best, &rc, mv);
    mv->rates.push_back(rc);
  }
  if (picked > 0) mv->mean_penalty = penalty_sum / picked;
}

// Whether `queue` models batching (serf/core/batch_queue.h): the interference-aware ones.
bool models_batching(QueueKind queue) {
  return queue == QueueKind::kMdInterf || queue == QueueKind::kMgInterf ||
         queue == QueueKind::kMmInterf;
}

// A point of a batched configuration (c, K, T, b > 1): the bulk-service model's prediction
// (family_for: exact for c = 1, the approximation for c > 1), scored as any point, and rescaled to
// the point's measured service time as a b = 1 point is ("the queue model alone"). The planner's
// objectives beyond the mean (bursty arrivals, p99) are b = 1 models and are left out. Under a
// queue model that does not batch the point is counted as not modelled.
Status validate_batched_point(const Profile& profile, const MeasuredPoint& p, size_t k, int nodes,
                              QueueKind queue, const PointResult& adjusted, ErrorLists* errors,
                              ModelValidation* mv) {
  if (!models_batching(queue)) {
    ++mv->summary.not_modelled;
    return Status::Ok();
  }
  auto family = family_for(profile, p.config, nodes, queue);
  if (!family.ok()) return family.status().with_context(point_name(k, p));
  PointResult r = adjusted;
  r.units = units_for(nodes, p.config.inter);
  r.unit_rate_per_s = p.rate_per_s / r.units;
  r.utilization = r.unit_rate_per_s / family->max_rate_per_s(p.config.service);
  r.prediction = family->predict(p.config.service, r.unit_rate_per_s);
  if (r.prediction.stable) {
    const int c = p.config.service;
    rescale([&](double rate) { return family->predict(c, rate); },
            [](const Prediction& x) { return x; }, p, &r, errors);
    score_point(p, &r, errors, mv);
  } else {
    ++mv->summary.unstable;
  }
  mv->points.push_back(r);
  return Status::Ok();
}

// One queue model against every point; `adjusted` holds the points' sample-path estimates.
StatusOr<ModelValidation> validate_model(const Profile& profile,
                                         const std::vector<MeasuredPoint>& points, int nodes,
                                         QueueKind queue,
                                         const std::vector<PointResult>& adjusted) {
  ModelValidation mv;
  mv.queue = queue;
  SERF_ASSIGN_OR_RETURN(std::vector<ConfigurationFamily> families,
                        build_families(profile, nodes, queue));
  ErrorLists errors;
  for (size_t k = 0; k < points.size(); ++k) {
    const MeasuredPoint& p = points[k];
    if (p.config.batch > 1) {
      SERF_RETURN_IF_ERROR(
          validate_batched_point(profile, p, k, nodes, queue, adjusted[k], &errors, &mv));
      continue;
    }
    auto model = model_for(profile, p.config, nodes, queue);
    if (!model.ok()) return model.status().with_context(point_name(k, p));
    PointResult r = adjusted[k];
    r.units = units_for(nodes, p.config.inter);
    r.unit_rate_per_s = p.rate_per_s / r.units;
    r.utilization = r.unit_rate_per_s / model->max_rate_per_s(p.config.service);
    const ConfigurationFamily* family = nullptr;
    for (const ConfigurationFamily& f : families) {
      if (f.inter == p.config.inter && f.intra == p.config.intra) family = &f;
    }
    // The family's prediction adds the idle-arrival penalty where the profile measured it.
    r.prediction = family != nullptr ? family->predict(p.config.service, r.unit_rate_per_s)
                                     : model->predict(p.config.service, r.unit_rate_per_s);
    if (r.prediction.stable && family != nullptr) {
      SERF_RETURN_IF_ERROR(apply_objectives(profile, *model, *family, nodes, p, &r, &errors));
    }
    if (r.prediction.stable) {
      score_point(p, &r, &errors, &mv);
    } else {
      ++mv.summary.unstable;
    }
    if (Status f = predict_fresh(profile, nodes, queue, p, &r, &errors, &mv); !f.ok())
      return f.with_context(point_name(k, p) + ", its fresh tuples");
    mv.points.push_back(r);
  }
  summarize_errors(errors.mean, &mv.summary);
  summarize_errors(errors.p99, &mv.p99_summary);
  summarize_errors(errors.steady, &mv.steady_summary);
  summarize_errors(errors.rescaled, &mv.rescaled_summary);
  summarize_errors(errors.adjusted, &mv.adjusted_summary);
  summarize_errors(errors.fresh, &mv.fresh_summary);
  if (mv.summary.with_ci95 > 0) mv.summary.mean_ci95_rel = errors.ci_rel_sum / mv.summary.with_ci95;
  compare_planner(&mv);
  return mv;
}

}  // namespace

StatusOr<ValidationReport> validate_predictions(const Profile& profile,
                                                const std::vector<MeasuredPoint>& points, int nodes,
                                                const std::vector<QueueKind>& queues) {
  if (points.empty()) return InvalidArgument("no measured points to validate");
  if (queues.empty()) return InvalidArgument("no queue model to validate");
  if (nodes < 1) return InvalidArgument("nodes must be >= 1");
  SERF_RETURN_IF_ERROR(check_points(profile, points, nodes));
  ValidationReport report;
  report.nodes = nodes;
  report.cores_per_node = profile.hardware.cores_per_node;
  // The sample-path estimates belong to the points, not to a queue model: made once.
  // The report keeps each point's numbers, not its trace (copied once per queue model below).
  std::vector<PointResult> adjusted(points.size());
  for (size_t k = 0; k < points.size(); ++k) {
    adjusted[k].measured = points[k];
    adjusted[k].measured.trace = RequestTrace{};
    SERF_RETURN_IF_ERROR(adjust_by_replay(
        profile, points[k], units_for(nodes, points[k].config.inter), k, &adjusted[k]));
  }
  for (QueueKind queue : queues) {
    SERF_ASSIGN_OR_RETURN(ModelValidation mv,
                          validate_model(profile, points, nodes, queue, adjusted));
    report.models.push_back(std::move(mv));
  }
  return report;
}

StatusOr<std::vector<double>> rates_at_utilizations(const Profile& profile,
                                                    const Configuration& config, int nodes,
                                                    const std::vector<double>& utilizations) {
  SERF_ASSIGN_OR_RETURN(ConfigurationFamily family,
                        family_for(profile, config, nodes, QueueKind::kMdInterf));
  const double capacity = units_for(nodes, config.inter) * family.max_rate_per_s(config.service);
  std::vector<double> rates;
  for (double u : utilizations) {
    if (!(std::isfinite(u) && u > 0)) {
      return InvalidArgument("utilization " + std::to_string(u) + " must be finite and > 0");
    }
    rates.push_back(u * capacity);
  }
  std::sort(rates.begin(), rates.end());
  return rates;
}

}  // namespace serf::profiler
