#include "profiler/tuple_profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiler/validation.h"
#include "profiler/validation_io.h"

namespace serf::profiler {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::vector<ParallelismTuple> profile_tuples(int nodes, int cores_per_node,
                                             const std::vector<int>& inter,
                                             const std::vector<int>& batches) {
  std::vector<ParallelismTuple> out;
  for (int k : inter) {
    if (k < 1 || k > nodes) continue;
    for (int t = 1; t <= cores_per_node; ++t) {
      for (int b : batches) {
        for (int i = 1; i * t <= cores_per_node; ++i) out.push_back({i, k, t, b});
      }
    }
  }
  return out;
}

std::vector<Configuration> all_configurations(int nodes, int cores_per_node,
                                              const std::vector<int>& inter,
                                              const std::vector<int>& batches) {
  std::vector<Configuration> out;
  for (const ParallelismTuple& t : profile_tuples(nodes, cores_per_node, inter, batches)) {
    out.push_back({t.service, t.inter, t.intra, t.batch});
  }
  return out;
}

TupleStats tuple_stats(const ParallelismTuple& tuple, const std::vector<double>& samples_ms) {
  TupleStats s;
  s.tuple = tuple;
  s.samples = static_cast<int>(samples_ms.size());
  s.mean_ms = mean(samples_ms);
  s.scv = scv(samples_ms);
  return s;
}

StatusOr<std::vector<int>> parse_int_list(const std::string& spec, const std::string& flag) {
  const std::string fix =
      flag + ": expected positive integers like \"1,2,4\", got \"" + spec + "\"";
  std::vector<int> out;
  std::stringstream ss(spec);
  std::string item;
  try {
    while (std::getline(ss, item, ',')) {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v < 1) return InvalidArgument(fix);
      out.push_back(v);
    }
  } catch (const std::exception&) {
    return InvalidArgument(fix);
  }
  if (out.empty()) return InvalidArgument(fix);
  return out;
}

TupleStats pool_passes(const ParallelismTuple& tuple, const std::vector<PassSamples>& passes) {
  std::vector<double> means;
  for (const PassSamples& p : passes) {
    if (!p.occupancy_ms.empty()) means.push_back(tuple_stats(tuple, p.occupancy_ms).mean_ms);
  }
  double centre = 0, band = 0;
  if (!means.empty()) {
    centre = median(means);
    std::vector<double> dev;
    for (double m : means) dev.push_back(std::abs(m - centre));
    band = std::max(0.05 * centre, 3 * 1.4826 * median(dev));  // 1.4826 MAD ~ one sigma
  }
  std::vector<double> occupancy, node;
  int kept = 0;
  for (const PassSamples& p : passes) {
    if (p.occupancy_ms.empty()) continue;
    if (std::abs(tuple_stats(tuple, p.occupancy_ms).mean_ms - centre) > band) continue;
    ++kept;
    occupancy.insert(occupancy.end(), p.occupancy_ms.begin(), p.occupancy_ms.end());
    node.insert(node.end(), p.node_ms.begin(), p.node_ms.end());
  }
  TupleStats stats = tuple_stats(tuple, occupancy);
  // The slot is busy from dispatch until the controller has the answer: that is the server's
  // service time in the queue model. The nodes' own time is kept to show the overhead.
  stats.node_ms = std::min(tuple_stats(tuple, node).mean_ms, stats.mean_ms);
  if (passes.size() > 1) {
    stats.passes = static_cast<int>(passes.size());
    stats.passes_kept = kept;
  }
  return stats;
}

StatusOr<PassSamples> measure_tuple(serve::Controller& controller, const ParallelismTuple& tuple,
                                    int warmup, int samples, bool side_by_side) {
  SERF_RETURN_IF_ERROR(
      controller.configure({tuple.service, tuple.inter, tuple.intra, tuple.batch}));
  PassSamples p;
  const int units = side_by_side ? controller.units() : 1;  // known once configured
  SERF_ASSIGN_OR_RETURN(p.node_ms,
                        controller.run_closed_loop(warmup, samples, &p.occupancy_ms, units));
  return p;
}

namespace {
// Every batch-1 tuple of `profile` probed for its idle-arrival penalty; its wall time counted.
// The probes are the last `profile->tuples.size()` of the progress's `steps`.
Status probe_idle(serve::Controller& controller, const ProgressFn& progress, size_t steps,
                  Profile* profile) {
  const size_t first = steps - profile->tuples.size();
  for (size_t n = 0; n < profile->tuples.size(); ++n) {
    TupleStats& t = profile->tuples[n];
    if (progress) progress(first + n, steps, to_string(t.tuple) + " idle arrivals");
    const auto t0 = std::chrono::steady_clock::now();
    SERF_ASSIGN_OR_RETURN(t.idle, probe_idle_penalty(controller, t.tuple, t.mean_ms, t.scv));
    t.wall_s += seconds_since(t0);
  }
  return Status::Ok();
}
}  // namespace

StatusOr<Profile> run_tuple_profile(serve::Controller& controller,
                                    const TupleProfileOptions& options, const ProgressFn& progress,
                                    Profile* partial) {
  const auto tuples = !options.tuples.empty()
                          ? options.tuples
                          : profile_tuples(options.hardware.nodes, options.hardware.cores_per_node,
                                           options.inter, options.batches);
  if (tuples.empty()) {
    return InvalidArgument("--inter: no K in the list fits the " +
                           std::to_string(options.hardware.nodes) + " node(s); give K <= nodes");
  }
  if (options.passes < 1 || options.passes > options.samples) {
    return InvalidArgument("--passes: give 1.." + std::to_string(options.samples) +
                           " (each pass measures at least one of the --samples)");
  }
  partial->model = options.model;
  partial->hardware = options.hardware;
  partial->tuples.clear();
  std::vector<std::vector<PassSamples>> measured(tuples.size());
  std::vector<double> wall_s(tuples.size(), 0.0);
  const size_t steps = tuples.size() * static_cast<size_t>(options.passes) +
                       (options.idle_probe ? tuples.size() : 0);
  for (int pass = 0; pass < options.passes; ++pass) {
    // --samples split as evenly as the passes allow.
    const int samples =
        options.samples / options.passes + (pass < options.samples % options.passes ? 1 : 0);
    for (size_t n = 0; n < tuples.size(); ++n) {
      const ParallelismTuple& t = tuples[n];
      if (progress) {
        progress(
            static_cast<size_t>(pass) * tuples.size() + n, steps,
            options.passes > 1 ? to_string(t) + " pass " + std::to_string(pass + 1) : to_string(t));
      }
      const auto t0 = std::chrono::steady_clock::now();
      SERF_ASSIGN_OR_RETURN(PassSamples p, measure_tuple(controller, t, options.warmup, samples,
                                                         options.side_by_side));
      measured[n].push_back(std::move(p));
      wall_s[n] += seconds_since(t0);
      // What a fault would leave: every tuple measured so far, pooled over its passes so far.
      partial->tuples.clear();
      for (size_t m = 0; m < tuples.size() && !measured[m].empty(); ++m) {
        TupleStats stats = pool_passes(tuples[m], measured[m]);
        stats.wall_s = wall_s[m];
        partial->tuples.push_back(stats);
      }
    }
  }
  if (options.idle_probe) SERF_RETURN_IF_ERROR(probe_idle(controller, progress, steps, partial));
  if (progress) progress(steps, steps, "done");
  partial->reindex();
  return *partial;
}

std::vector<ExhaustiveRow> ExhaustiveReport::best_per_rate() const {
  std::vector<ExhaustiveRow> best;
  for (const ExhaustiveRow& r : rows) {
    auto it = std::find_if(best.begin(), best.end(),
                           [&](const ExhaustiveRow& b) { return b.rate_per_s == r.rate_per_s; });
    if (it == best.end()) {
      best.push_back(r);
    } else if (r.mean_latency_ms < it->mean_latency_ms) {
      *it = r;
    }
  }
  return best;
}

namespace {

// The point's requests (those since record `first`), in arrival order.
std::vector<const serve::RequestRecord*> point_records(const serve::Controller& controller,
                                                       size_t first) {
  std::vector<const serve::RequestRecord*> recs;
  for (size_t r = first; r < controller.records().size(); ++r)
    recs.push_back(&controller.records()[r]);
  std::stable_sort(recs.begin(), recs.end(),
                   [](const auto* a, const auto* b) { return a->arrival_s < b->arrival_s; });
  return recs;
}

// The latencies of the requests since `first` that ended, up to the first that has not (arrival
// order): what a precision check may look at while the point runs.
void ended_prefix(const serve::Controller& controller, size_t first, std::vector<double>* lat) {
  lat->clear();
  const auto& recs = controller.records();
  for (size_t r = first; r < recs.size() && recs[r].done_s > 0; ++r)
    lat->push_back(recs[r].latency_ms());
}

// The row's trace and statistics; the first `skip` requests are the warm-up.
void fill_row(const std::vector<const serve::RequestRecord*>& all, size_t skip,
              ExhaustiveRow* row) {
  skip = std::min(all.size(), skip);
  row->trace.warmup = static_cast<int>(skip);
  for (const serve::RequestRecord* r : all) {
    row->trace.arrival_ms.push_back((r->arrival_s - all.front()->arrival_s) * 1e3);
    row->trace.unit.push_back(r->unit);
    row->trace.latency_ms.push_back(r->latency_ms());
  }
  std::vector<double> lat;
  double service = 0;
  for (size_t k = skip; k < all.size(); ++k) {
    lat.push_back(all[k]->latency_ms());
    service += (all[k]->done_s - all[k]->dispatch_s) * 1e3;  // the slot's occupancy, as profiled
  }
  row->mean_latency_ci95_ms = batch_means_ci95(lat);
  row->requests = static_cast<int>(lat.size());
  if (lat.empty()) return;
  row->mean_latency_ms = mean(lat);
  row->mean_service_ms = service / static_cast<double>(lat.size());
  row->p99_latency_ms = quantile(lat, 0.99);
}

// One (configuration, rate) point: a fixed count after a fixed warm-up, or (precision_driven)
// until judge_point calls it VALID or a cap is hit, the warm-up cut by MSER-5.
Status measure_point(serve::Controller& controller, const ExhaustiveOptions& o, uint64_t seed,
                     ExhaustiveRow* row) {
  const size_t first = controller.records().size();
  if (!o.precision_driven) {
    SERF_ASSIGN_OR_RETURN(
        std::vector<double> arrivals,
        serve::stepped_arrivals({{0, row->rate_per_s}}, o.requests + std::max(o.warmup, 0), seed,
                                o.arrivals, o.arrival_scv));
    SERF_RETURN_IF_ERROR(controller.run_open_loop(arrivals, nullptr));
    fill_row(point_records(controller, first), static_cast<size_t>(std::max(o.warmup, 0)), row);
    return Status::Ok();
  }
  const double cap =
      std::min(static_cast<double>(o.max_requests), std::ceil(row->rate_per_s * o.max_duration_s));
  SERF_ASSIGN_OR_RETURN(
      std::vector<double> arrivals,
      serve::stepped_arrivals({{0, row->rate_per_s}}, static_cast<int>(std::max(cap, 1.0)), seed,
                              o.arrivals, o.arrival_scv));
  const double start_s = controller.now_s();
  size_t next_check = static_cast<size_t>(std::max(o.target.min_requests, 1));
  std::vector<double> lat;
  // Judged every tick once the minimum duration passed, and again after 10 % more answers
  // (MSER-5 and the batch means are O(n)).
  auto enough = [&] {
    if (controller.now_s() - start_s < o.target.min_duration_s) return false;
    ended_prefix(controller, first, &lat);
    if (lat.size() < next_check) return false;
    next_check = lat.size() + std::max<size_t>(lat.size() / 10, 1);
    return judge_point(lat, controller.now_s() - start_s, o.target).valid;
  };
  SERF_RETURN_IF_ERROR(controller.run_open_loop_until(arrivals, enough));
  const auto all = point_records(controller, first);
  lat.clear();
  size_t not_answered = 0;
  double last_s = start_s;
  for (const serve::RequestRecord* r : all) {
    lat.push_back(r->latency_ms());
    if (!r->answered) ++not_answered;
    last_s = std::max(last_s, r->done_s);
  }
  const double duration_s = all.empty() ? 0 : last_s - all.front()->arrival_s;
  row->verdict = judge_point(lat, duration_s, o.target, not_answered);
  row->judged = true;
  fill_row(all, row->verdict.warmup, row);
  return Status::Ok();
}

// The configuration's tuples (1..c, K, T), each measured closed-loop as the tuple profile does
// (one unit, the slots' occupancy): what the point's service times are just before it runs.
Status measure_fresh(serve::Controller& controller, const ExhaustiveOptions& o,
                     ExhaustiveRow* row) {
  const auto t0 = std::chrono::steady_clock::now();
  const Configuration& c = row->config;
  for (int i = 1; i <= c.service; ++i) {
    const ParallelismTuple t{i, c.inter, c.intra, c.batch};
    SERF_ASSIGN_OR_RETURN(PassSamples p,
                          measure_tuple(controller, t, o.fresh_warmup, o.fresh_samples, false));
    row->fresh.push_back(pool_passes(t, {std::move(p)}));
  }
  row->fresh_wall_s = seconds_since(t0);
  return Status::Ok();
}

}  // namespace

StatusOr<ExhaustiveReport> run_exhaustive(serve::Controller& controller,
                                          const ExhaustiveOptions& options,
                                          const ProgressFn& progress, ExhaustiveReport* partial) {
  const auto configs = all_configurations(options.hardware.nodes, options.hardware.cores_per_node,
                                          options.inter, options.batches);
  if (configs.empty())
    return InvalidArgument("--inter: no K in the list fits the nodes; give K <= nodes");
  std::vector<std::vector<double>> rates;  // per configuration
  for (const Configuration& c : configs) {
    if (options.capacity_profile == nullptr) {
      rates.push_back(options.rates_per_s);
      continue;
    }
    auto r = rates_at_utilizations(*options.capacity_profile, c, options.hardware.nodes,
                                   options.utilizations);
    if (!r.ok()) return r.status().with_context("--capacity-profile");
    rates.push_back(std::move(r).value());
  }
  // The gap SCV the process really has (1 for Poisson, 0 for deterministic), checked once.
  SERF_ASSIGN_OR_RETURN(ArrivalProcess process,
                        ArrivalProcess::Create(options.arrivals, 1.0, options.arrival_scv));
  const double arrival_scv = process.scv();
  size_t total = 0;
  for (const auto& r : rates) total += r.size();
  const auto start = std::chrono::steady_clock::now();
  size_t done = 0;
  uint64_t seed = options.seed;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const Configuration& c = configs[ci];
    for (double rate : rates[ci]) {
      if (progress) progress(done, total, to_string(c) + " at " + std::to_string(rate) + "/s");
      ExhaustiveRow row;
      row.config = c;
      if (options.fresh_samples > 0 && c.batch == 1)
        SERF_RETURN_IF_ERROR(measure_fresh(controller, options, &row));
      const auto t0 = std::chrono::steady_clock::now();
      SERF_RETURN_IF_ERROR(controller.configure(c));
      row.rate_per_s = rate;
      row.arrival_scv = arrival_scv;
      SERF_RETURN_IF_ERROR(measure_point(controller, options, seed++, &row));
      row.wall_s = seconds_since(t0);
      partial->rows.push_back(row);
      partial->total_wall_s = seconds_since(start);
      ++done;
    }
  }
  if (progress) progress(total, total, "done");
  return *partial;
}

std::string exhaustive_csv(const ExhaustiveReport& report) {
  std::ostringstream out;
  out << "rate_per_s,service,inter,intra,requests,mean_latency_ms,p99_latency_ms,"
         "mean_latency_ci95_ms,mean_service_ms,wall_s,valid,verdict,batch\n";
  for (const ExhaustiveRow& r : report.rows) {
    out << r.rate_per_s << ',' << r.config.service << ',' << r.config.inter << ',' << r.config.intra
        << ',' << r.requests << ',' << r.mean_latency_ms << ',' << r.p99_latency_ms << ',';
    if (r.mean_latency_ci95_ms >= 0) out << r.mean_latency_ci95_ms;
    out << ',' << r.mean_service_ms << ',' << r.wall_s << ',';
    if (r.judged)
      out << (r.verdict.valid ? "true" : "false") << ",\"" << r.verdict.reason_text() << '"';
    else
      out << ',';
    out << ',' << r.config.batch << '\n';
  }
  return out.str();
}

std::string exhaustive_json(const ExhaustiveReport& report, const std::string& model,
                            const Hardware& hardware) {
  auto row_json = [](const ExhaustiveRow& r, bool with_trace) {
    nlohmann::json j{{"rate", r.rate_per_s},
                     {"service", r.config.service},
                     {"inter", r.config.inter},
                     {"intra", r.config.intra},
                     {"batch", r.config.batch},
                     {"requests", r.requests},
                     {"mean_latency_ms", r.mean_latency_ms},
                     {"p99_latency_ms", r.p99_latency_ms},
                     {"mean_latency_ci95_ms", r.mean_latency_ci95_ms >= 0
                                                  ? nlohmann::json(r.mean_latency_ci95_ms)
                                                  : nlohmann::json(nullptr)},
                     {"mean_service_ms", r.mean_service_ms},
                     {"arrival_scv", r.arrival_scv},
                     {"wall_s", r.wall_s}};
    if (r.judged) {
      j["valid"] = r.verdict.valid;
      j["verdict"] = r.verdict.reason_text();
      j["warmup_cut"] = r.verdict.warmup;
      j["duration_s"] = r.verdict.duration_s;
      j["ci95_rel"] =
          r.verdict.ci95_rel >= 0 ? nlohmann::json(r.verdict.ci95_rel) : nlohmann::json(nullptr);
    }
    if (!r.fresh.empty()) {
      j["fresh_tuples"] = fresh_tuples_json(r.fresh);
      j["fresh_wall_s"] = r.fresh_wall_s;
    }
    if (with_trace) j["trace"] = trace_json(r.trace);
    return j;
  };
  nlohmann::json doc{
      {"format", "serf-exhaustive/1"},
      {"model", model},
      {"hardware", {{"nodes", hardware.nodes}, {"cores_per_node", hardware.cores_per_node}}},
      {"total_wall_s", report.total_wall_s}};
  // One point per line: a point's trace holds thousands of numbers.
  auto list = [&](const std::vector<ExhaustiveRow>& rows, bool with_trace) {
    std::string s = "[";
    for (size_t k = 0; k < rows.size(); ++k)
      s += (k ? ",\n    " : "\n    ") + row_json(rows[k], with_trace).dump();
    return s + (rows.empty() ? "]" : "\n  ]");
  };
  std::string text = doc.dump(2);
  text.erase(text.rfind('}'));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  text += ",\n  \"points\": " + list(report.rows, true) +
          ",\n  \"best\": " + list(report.best_per_rate(), false) + "\n}\n";
  return text;
}

}  // namespace serf::profiler
