#include "serve/load/load_client.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "serf/core/statistics.h"
#include "serve/load/grpc_channel.h"
#include "serve/load/http_channel.h"
#include "serve/load/kserve_http.h"

namespace serf::serve::load {

namespace {

// The last step of a load lasts until the run ends: long enough at any rate.
constexpr double kOpenEnded_s = 1e9;

Status check_options(const LoadOptions& o) {
  if (o.load.empty()) return InvalidArgument("--rate or --load: give the arrival rate");
  if (o.requests < 0) return InvalidArgument("--requests: give at least 1");
  if (o.requests == 0 && !(o.duration_s > 0)) {
    return InvalidArgument("--requests or --duration: say how long the run lasts");
  }
  if (o.connections < 1) return InvalidArgument("--connections: give at least 1");
  if (!(o.timeout_s > 0)) return InvalidArgument("--timeout: give a time > 0 s");
  return Status::Ok();
}

StatusOr<ArrivalProcess> make_arrivals(const LoadOptions& o) {
  std::vector<RateSegment> segments;
  for (size_t k = 0; k < o.load.size(); ++k) {
    const double until =
        k + 1 < o.load.size() ? o.load[k + 1].from_s : o.load[k].from_s + kOpenEnded_s;
    segments.push_back({until - o.load[k].from_s, o.load[k].rate_per_s});
  }
  auto process = ArrivalProcess::CreateSchedule(o.arrivals, std::move(segments), o.arrival_scv);
  if (!process.ok()) return process.status().with_context("--load/--arrivals");
  return process;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The runner's state between reports: what ended since the last one.
struct Window {
  double since_s = 0;
  std::vector<double> latency_ms, lateness_ms;
  uint64_t ended = 0;
};

LoadProgress progress_of(const LoadRun& run, const LoadChannel& channel, Window* w, double now_s,
                         uint64_t sent, uint64_t ended, const std::map<int, uint64_t>& counts) {
  LoadProgress p;
  p.now_s = now_s;
  p.sent = sent;
  p.ended = ended;
  auto it = counts.find(200);
  p.answered = it == counts.end() ? 0 : it->second;
  p.in_flight = channel.in_flight();
  p.waiting = channel.waiting();
  p.connections = channel.connections();
  p.counts = counts;
  p.window_s = now_s - w->since_s;
  p.window_ended = w->ended;
  if (!w->latency_ms.empty()) {
    p.window_mean_ms = mean(w->latency_ms);
    p.window_p99_ms = quantile(w->latency_ms, 0.99);
  }
  if (!w->lateness_ms.empty()) p.window_lateness_p99_ms = quantile(w->lateness_ms, 0.99);
  (void)run;
  *w = Window{now_s, {}, {}, 0};
  return p;
}

}  // namespace

StatusOr<LoadRun> run_schedule(LoadChannel& channel, const LoadOptions& o, const LoadHooks& hooks) {
  SERF_RETURN_IF_ERROR(check_options(o));
  SERF_ASSIGN_OR_RETURN(ArrivalProcess arrivals, make_arrivals(o));
  // Wake-ups on time: the default 50 us timer slack would make every send late.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  LoadRun run;
  run.options = o;
  std::mt19937_64 rng(o.seed);
  const uint64_t limit =
      o.requests > 0 ? static_cast<uint64_t>(o.requests) : std::numeric_limits<uint64_t>::max();
  run.records.reserve(static_cast<size_t>(std::min<uint64_t>(limit, 1u << 20)));
  const double every_s = hooks.every_s > 0 ? hooks.every_s : 0.5;
  std::map<int, uint64_t> counts;
  uint64_t ended = 0;
  Window window;
  const Clock::time_point start = Clock::now();
  auto at = [&](double s) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const CompletionFn on_done = [&](const Completion& c) {
    LoadRecord& r = run.records[c.id];
    r.sent_s = seconds(c.sent - start);
    r.done_s = seconds(c.done - start);
    r.status = c.status;
    ++counts[c.status];
    ++ended;
    ++window.ended;
    if (c.status == 200) window.latency_ms.push_back(r.latency_ms());
    window.lateness_ms.push_back(r.lateness_ms());
    if (c.status != 200 && !run.first_errors.count(c.status)) {
      run.first_errors[c.status] = std::string(c.error.empty() ? c.body.substr(0, 300) : c.error);
    }
  };
  double next_s = arrivals.next_s(rng);
  bool sending = std::isfinite(next_s) && (o.duration_s <= 0 || next_s <= o.duration_s);
  double next_report_s = every_s;
  for (;;) {
    const double now_s = seconds(Clock::now() - start);
    while (sending && next_s <= now_s) {
      const uint64_t id = run.records.size();
      run.records.push_back({next_s, -1, -1, 0});
      channel.send(id);
      next_s = arrivals.next_s(rng);
      if (run.records.size() >= limit || !std::isfinite(next_s) ||
          (o.duration_s > 0 && next_s > o.duration_s)) {
        sending = false;
      }
    }
    if (sending && hooks.interrupted != nullptr && hooks.interrupted->load()) {
      sending = false;
      run.interrupted = true;
      run.stop_reason = "interrupted (SIGINT): the requests in flight end, no new ones go out";
    }
    if (!sending && channel.in_flight() == 0) break;
    if (now_s >= next_report_s) {
      next_report_s = now_s + every_s;
      std::string reason;
      if (sending && hooks.stop && hooks.stop(run, &reason)) {
        sending = false;
        run.interrupted = true;
        run.stop_reason = reason;
      }
      if (hooks.progress) {
        hooks.progress(
            progress_of(run, channel, &window, now_s, run.records.size(), ended, counts));
      }
    }
    const double wake_s = sending ? std::min(next_s, next_report_s) : next_report_s;
    channel.poll(at(wake_s), on_done);
  }
  run.end_s = seconds(Clock::now() - start);
  return run;
}

StatusOr<LoadRun> run_load(const LoadOptions& o, const LoadHooks& hooks) {
  SERF_RETURN_IF_ERROR(check_options(o));
  SERF_RETURN_IF_ERROR(make_arrivals(o).status());
  SERF_ASSIGN_OR_RETURN(Endpoint to, parse_url(o.url, "--url"));
  ServedModel model;
  std::unique_ptr<LoadChannel> channel;
  if (o.protocol == Protocol::kGrpc) {
    SERF_ASSIGN_OR_RETURN(model, grpc_model_metadata(to, o.model, o.ready_wait_s));
    SERF_ASSIGN_OR_RETURN(std::vector<float> input, load_input(model, o.input, o.seed));
    SERF_ASSIGN_OR_RETURN(channel, make_grpc_channel(to, model, input, o));
  } else {
    SERF_ASSIGN_OR_RETURN(model, http_model_metadata(to, o.url, o.model, o.ready_wait_s));
    SERF_ASSIGN_OR_RETURN(std::vector<float> input, load_input(model, o.input, o.seed));
    std::optional<size_t> header_length;
    const std::string body = infer_body(model, input, o.binary, &header_length);
    HttpChannelOptions h;
    h.endpoint = to;
    h.request = http_infer_request(to, o.model, body, header_length);
    h.max_connections = o.connections;
    h.timeout_s = o.timeout_s;
    SERF_ASSIGN_OR_RETURN(std::unique_ptr<HttpChannel> http, HttpChannel::Create(std::move(h)));
    channel = std::move(http);
  }
  SERF_ASSIGN_OR_RETURN(LoadRun run, run_schedule(*channel, o, hooks));
  run.model = model;
  return run;
}

}  // namespace serf::serve::load
