// `serf load`: drive a KServe v2 server (serf serve --http/--grpc, or any other) with an open-loop
// schedule and report what came back (serve/load/).

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/plot.h"
#include "profiler/precision.h"
#include "serve/load/load_client.h"
#include "serve/load/load_report.h"

namespace serf::cli {

namespace {

struct LoadFlags {
  serve::load::LoadOptions options;
  double rate_per_s = 0;
  std::string load;
  ArrivalFlags arrivals;
  std::string protocol = "http";
  int connections = 0;  // 0: the protocol's default
  std::string out, plot;
  bool quiet = false;
  // Issue 17: with --precision, one point (one --rate) runs until its mean latency is precise
  // enough (profiler/precision.h: MSER-5 warm-up cut, batch-means CI, a bounded p99) or a cap.
  PrecisionFlags precision;  // off: a fixed run (--requests/--duration), no verdict
};

constexpr int kHttpConnections = 64;  // the server's default --http-threads
constexpr int kGrpcChannels = 1;      // HTTP/2 multiplexes the calls
constexpr double kDefaultDuration_s = 10;
constexpr double kPrecisionCap_s = 300;  // --precision without --duration/--requests
// The precision rule sorts and scans every answer so far: at most this often.
constexpr double kPrecisionCheckEvery_s = 2;
// Progress every half second on a terminal, every 5 s into a file or a pipe.
constexpr double kTerminalEvery_s = 0.5;
constexpr double kLogEvery_s = 5;

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends it at once
}

Status resolve(LoadFlags& f) {
  serve::load::LoadOptions& o = f.options;
  o.load.clear();
  if (!f.load.empty()) {
    SERF_ASSIGN_OR_RETURN(std::vector<RateChange> steps, parse_load_steps(f.load));
    for (const RateChange& s : steps) o.load.push_back({s.from_s, s.rate_per_s});
  } else if (f.rate_per_s > 0) {
    o.load.push_back({0, f.rate_per_s});
  } else {
    return InvalidArgument("--rate: give the arrival rate in requests/s (> 0), or --load");
  }
  SERF_ASSIGN_OR_RETURN(ArrivalFlags::Resolved a, f.arrivals.resolve());
  o.arrivals = a.kind;
  o.arrival_scv = a.scv;
  if (f.protocol != "http" && f.protocol != "grpc") {
    return InvalidArgument("--protocol " + f.protocol + ": expected http or grpc");
  }
  o.protocol = f.protocol == "grpc" ? serve::load::Protocol::kGrpc : serve::load::Protocol::kHttp;
  o.connections = f.connections > 0                            ? f.connections
                  : o.protocol == serve::load::Protocol::kGrpc ? kGrpcChannels
                                                               : kHttpConnections;
  if (f.precision.on()) {
    if (o.load.size() != 1) {
      return InvalidArgument(
          "--precision: judges one point: give one --rate, not a --load schedule");
    }
    if (o.requests == 0 && o.duration_s == 0) o.duration_s = kPrecisionCap_s;
  }
  if (o.requests == 0 && o.duration_s == 0) o.duration_s = kDefaultDuration_s;
  if (!f.out.empty()) SERF_RETURN_IF_ERROR(check_output_path("--out", f.out));
  if (!f.plot.empty()) {
    if (f.out.empty()) return InvalidArgument("--plot: needs --out FILE.json (the plot reads it)");
    SERF_RETURN_IF_ERROR(check_plot_path("--plot", f.plot, {{"--out", f.out}}));
  }
  return Status::Ok();
}

// The answered latencies of a run in scheduled order, up to the first request still in flight
// (`so_far`) or over every request that ended (at the end); what did not end in an answer is
// counted, and the span runs from the first scheduled time to the last answer.
struct AnsweredPrefix {
  std::vector<double> latency_ms;
  size_t not_answered = 0;
  double span_s = 0;
};

AnsweredPrefix answered_prefix(const serve::load::LoadRun& run, bool so_far) {
  AnsweredPrefix p;
  double last_s = 0;
  for (const serve::load::LoadRecord& r : run.records) {
    if (r.status == 0) {  // in flight, or never sent (the run stopped first)
      if (so_far) break;
      continue;
    }
    if (r.status == 200) {
      p.latency_ms.push_back(r.latency_ms());
    } else {
      ++p.not_answered;
    }
    last_s = std::max(last_s, r.done_s);
  }
  if (!run.records.empty()) p.span_s = std::max(0.0, last_s - run.records.front().scheduled_s);
  return p;
}

profiler::PointVerdict judge_run(const serve::load::LoadRun& run, bool so_far,
                                 const profiler::PrecisionTarget& target) {
  const AnsweredPrefix p = answered_prefix(run, so_far);
  return profiler::judge_point(p.latency_ms, p.span_s, target, p.not_answered);
}

std::string verdict_text(const profiler::PointVerdict& v, const profiler::PrecisionTarget& t) {
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "precision (target +-%.3g %% of the mean, >= %.3g s, >= %d requests, p%g bounded): %s; mean "
      "%.3f ms +- %.3f ms (95 %% CI, %.2f %%) over %zu answers after a warm-up of %zu, "
      "%.1f s\n",
      t.precision * 100, t.min_duration_s, t.min_requests, t.percentile,
      v.valid ? "VALID" : ("INVALID: " + v.reason_text()).c_str(), v.mean_ms,
      std::max(0.0, v.ci95_ms), std::max(0.0, v.ci95_rel) * 100, v.measured, v.warmup,
      v.duration_s);
  return buf;
}

nlohmann::json verdict_json(const profiler::PointVerdict& v, const profiler::PrecisionTarget& t) {
  const auto or_null = [](double x) {
    return x >= 0 ? nlohmann::json(x) : nlohmann::json(nullptr);
  };
  return {{"target",
           {{"precision", t.precision},
            {"min_duration_s", t.min_duration_s},
            {"min_requests", t.min_requests},
            {"percentile", t.percentile}}},
          {"valid", v.valid},
          {"verdict", v.reason_text()},
          {"warmup_cut", v.warmup},
          {"measured", v.measured},
          {"mean_ms", v.mean_ms},
          {"ci95_ms", or_null(v.ci95_ms)},
          {"ci95_rel", or_null(v.ci95_rel)},
          {"duration_s", v.duration_s},
          {"percentile_ms", v.percentile_ms},
          {"percentile_bounded", v.percentile_bounded}};
}

// Stops sending once the point is VALID (checked at most every kPrecisionCheckEvery_s of the
// run and only past the minimum duration, so a short noisy start cannot end it).
std::function<bool(const serve::load::LoadRun&, std::string*)> precision_stop(
    const profiler::PrecisionTarget& target) {
  auto next_check_s = std::make_shared<double>(target.min_duration_s);
  return [target, next_check_s](const serve::load::LoadRun& run, std::string* reason) {
    const AnsweredPrefix p = answered_prefix(run, true);
    if (p.span_s < *next_check_s) return false;
    *next_check_s = p.span_s + kPrecisionCheckEvery_s;
    const profiler::PointVerdict v =
        profiler::judge_point(p.latency_ms, p.span_s, target, p.not_answered);
    if (!v.valid) return false;
    char buf[160];
    std::snprintf(buf, sizeof buf, "precise: mean %.3f ms +- %.2f %% after %.1f s (--precision)",
                  v.mean_ms, v.ci95_rel * 100, p.span_s);
    *reason = buf;
    return true;
  };
}

Status run_load_command(LoadFlags& f) {
  SERF_RETURN_IF_ERROR(resolve(f));
  serve::load::LoadHooks hooks;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  hooks.every_s = terminal ? kTerminalEvery_s : kLogEvery_s;
  bool printed = false;
  if (!f.quiet) {
    hooks.progress = [&](const serve::load::LoadProgress& p) {
      const std::string line = serve::load::progress_text(p);
      if (terminal) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      std::fflush(stderr);
      printed = true;
    };
  }
  if (f.precision.on()) hooks.stop = precision_stop(f.precision.target_of());
  g_interrupted = false;
  hooks.interrupted = &g_interrupted;
  auto previous = std::signal(SIGINT, on_interrupt);
  StatusOr<serve::load::LoadRun> run = serve::load::run_load(f.options, hooks);
  std::signal(SIGINT, previous);
  if (printed && terminal) std::fprintf(stderr, "\n");
  if (!run.ok()) return run.status();
  const serve::load::LoadSummary summary = serve::load::summarize(*run);
  std::cout << serve::load::summary_text(*run, summary);
  nlohmann::json extra = nlohmann::json::object();
  if (f.precision.on()) {
    const profiler::PrecisionTarget target = f.precision.target_of();
    const profiler::PointVerdict v = judge_run(*run, false, target);
    std::cout << verdict_text(v, target);
    extra["precision"] = verdict_json(v, target);
  }
  if (!f.out.empty()) {
    SERF_RETURN_IF_ERROR(serve::load::write_run(f.out, *run, summary, extra));
    std::cout << "wrote " << f.out << " and " << f.out << ".csv\n";
  }
  if (!f.plot.empty()) {
    std::cout << std::flush;  // the script prints its own "wrote FILE.png" after these lines
    SERF_RETURN_IF_ERROR(run_plot_script("plot_load.py", {f.out, f.plot}));
  }
  return Status::Ok();
}

}  // namespace

void register_load_commands(CLI::App& app, CommandRegistry& registry) {
  auto f = std::make_shared<LoadFlags>();
  auto* sub = app.add_subcommand(
      "load",
      "Send an open-loop load to a KServe v2 server (serf serve --http/--grpc): each request at "
      "its scheduled time, whatever the answers before it; latency counted from the scheduled "
      "time; counts by status, latency percentiles and the client's own lateness.\n"
      "  serf load --url http://127.0.0.1:8000 --model tiny --rate 200 --duration 10");
  serve::load::LoadOptions& o = f->options;
  sub->add_option("--url", o.url, "the server: http://HOST:PORT (gRPC: HOST:PORT)")->required();
  sub->add_option("--model", o.model, "the served model's name (GET /v2/models/NAME)")->required();
  auto* rate = sub->add_option("--rate", f->rate_per_s, "arrival rate, requests/s")
                   ->check(positive_finite());
  auto* load = sub->add_option("--load", f->load,
                               "a load that changes: \"SECONDS:RATE;...\" from 0 s (requests/s)");
  rate->excludes(load);
  f->arrivals.add(sub, "");
  sub->add_option("--requests", o.requests, "send this many requests (count)")->check(at_least(1));
  sub->add_option("--duration", o.duration_s,
                  "send the requests scheduled in the first SECONDS (default 10 when --requests "
                  "is not given; with both, whichever ends first)")
      ->check(positive_finite());
  f->precision.add(sub,
                   "judges one point (one --rate) and stops sending once it is VALID, else says "
                   "INVALID with the reasons; --duration/--requests cap it (default 300 s)");
  sub->add_option("--input", o.input,
                  "the request's input: safetensors with tensor 'input' of the model's shape "
                  "[1,C,H,W] (default: seeded from --seed)");
  sub->add_option("--protocol", f->protocol, "http (default) or grpc");
  sub->add_flag("--binary", o.binary,
                "HTTP: Triton's binary tensor extension for the input and output instead of JSON "
                "numbers; gRPC: raw_input_contents instead of fp32_contents");
  sub->add_option("--connections", f->connections,
                  "HTTP: keep-alive connections open at most (default 64; a request that finds "
                  "them all busy waits, and its lateness says so); gRPC: channels (default 1)")
      ->check(int_range(1, 4096));
  sub->add_option("--timeout", o.timeout_s,
                  "seconds a request may wait for its answer after it was sent (default 30); "
                  "later: counted as a timeout")
      ->check(positive_finite());
  add_seed(sub, &o.seed, "seed of the arrival times and of the seeded input (default 1)");
  add_output(sub, "--out", &f->out,
             "the run: JSON (summary, first errors, per-second timeline) here and one row per "
             "request in FILE.csv",
             false);
  add_output(sub, "--plot", &f->plot,
             "also draw load, latency and lateness over time to this PNG "
             "(scripts/plot_load.py; needs --out)",
             false);
  sub->add_flag("--quiet", f->quiet, "no progress line");
  registry.add(sub, [f] { return run_load_command(*f); });
}

}  // namespace serf::cli
