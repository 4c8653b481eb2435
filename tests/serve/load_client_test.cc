// The load client (serve/load/): its HTTP bytes, the open loop over real sockets against a canned
// server (sends at the scheduled time whatever the answers, a bounded connection pool, timeouts,
// servers that drop connections), an unreachable server, and the run's summary.
#include "serve/load/load_client.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>

#include "canned_http_server.h"
#include "serf/core/statistics.h"
#include "serve/load/http_channel.h"
#include "serve/load/http_wire.h"
#include "serve/load/load_report.h"

using namespace serf;
using namespace serf::serve::load;
using serf::testing::CannedHttpServer;

namespace {

LoadOptions options_at(double rate_per_s, int64_t requests) {
  LoadOptions o;
  o.url = "http://127.0.0.1:0";
  o.model = "m";
  o.load = {{0, rate_per_s}};
  o.arrivals = ArrivalKind::kDeterministic;
  o.arrival_scv = 0;
  o.requests = requests;
  o.timeout_s = 10;
  return o;
}

// The open loop over an HttpChannel to `server`.
LoadRun run_against(const CannedHttpServer& server, const LoadOptions& o,
                    const LoadHooks& hooks = {}) {
  HttpChannelOptions h;
  h.endpoint = {"127.0.0.1", server.port()};
  h.request = http_infer_request(h.endpoint, "m", "{}", std::nullopt);
  h.max_connections = o.connections;
  h.timeout_s = o.timeout_s;
  auto channel = HttpChannel::Create(h);
  REQUIRE(channel.ok());
  auto run = run_schedule(**channel, o, hooks);
  REQUIRE(run.ok());
  return std::move(run).value();
}

uint64_t count_of(const LoadSummary& s, int status) {
  auto it = s.counts.find(status);
  return it == s.counts.end() ? 0 : it->second;
}

}  // namespace

TEST_CASE("parse_url takes http://HOST:PORT and HOST:PORT", "[load]") {
  auto a = parse_url("http://127.0.0.1:8000", "--url");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 8000);
  auto b = parse_url("localhost:9/", "--url");
  REQUIRE(b.ok());
  CHECK(b->host == "localhost");
  CHECK(b->port == 9);
  auto c = parse_url("http://[::1]:8001", "--url");
  REQUIRE(c.ok());
  CHECK(c->host == "::1");
  CHECK(c->text() == "[::1]:8001");
  for (const char* bad : {"127.0.0.1", "http://h:0", "http://h:70000", "https://h:443",
                          "http://h:80/v2", ":80", "h:8x"}) {
    INFO(bad);
    auto r = parse_url(bad, "--url");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().rfind("--url", 0) == 0);
  }
}

TEST_CASE("the HTTP response parser reads lengths, chunks and partial responses", "[load]") {
  HttpResponse r;
  size_t used = 0;
  std::string error;
  const std::string one = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n\r\nbusy!";
  const std::string two =
      one + "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nConnection: close\r\n\r\nok";
  REQUIRE(parse_http_response(two, &r, &used, &error) == ParseState::kDone);
  CHECK(r.status == 503);
  CHECK(r.body == "busy!");
  CHECK_FALSE(r.close);
  CHECK(used == one.size());
  REQUIRE(parse_http_response(std::string_view(two).substr(used), &r, &used, &error) ==
          ParseState::kDone);
  CHECK(r.status == 200);
  CHECK(r.body == "ok");
  CHECK(r.close);
  for (size_t cut = 0; cut < one.size(); ++cut) {
    CHECK(parse_http_response(std::string_view(one).substr(0, cut), &r, &used, &error) ==
          ParseState::kNeedMore);
  }
  const std::string chunked =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\n\r\n";
  REQUIRE(parse_http_response(chunked, &r, &used, &error) == ParseState::kDone);
  CHECK(r.body == "abcdefg");
  CHECK(used == chunked.size());
  CHECK(parse_http_response("SMTP ready\r\n\r\n", &r, &used, &error) == ParseState::kBad);
  CHECK(parse_http_response("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", &r, &used, &error) ==
        ParseState::kBad);
  CHECK(error.find("Content-Length") != std::string::npos);
}

TEST_CASE("the infer request carries its body and the binary header length", "[load]") {
  const std::string req = http_infer_request({"h", 80}, "tiny", "0123456789", size_t{4});
  CHECK(req.rfind("POST /v2/models/tiny/infer HTTP/1.1\r\n", 0) == 0);
  CHECK(req.find("Content-Length: 10\r\n") != std::string::npos);
  CHECK(req.find("Inference-Header-Content-Length: 4\r\n") != std::string::npos);
  CHECK(req.substr(req.size() - 14) == "\r\n\r\n0123456789");
}

TEST_CASE("every request is answered by a server that answers at once", "[load]") {
  CannedHttpServer server({});
  const LoadRun run = run_against(server, options_at(2000, 400));
  const LoadSummary s = summarize(run);
  CHECK(s.scheduled == 400);
  CHECK(s.sent == 400);
  CHECK(s.answered == 400);
  CHECK(count_of(s, 200) == 400);
  CHECK(server.requests() == 400);
  CHECK(s.latency.count == 400);
  CHECK(s.latency.p50_ms <= s.latency.p99_ms);
  CHECK(s.latency.p99_ms <= s.latency.max_ms);
  // Deterministic at 2000/s: 400 requests scheduled over 0.2 s (the first at 0.5 ms).
  CHECK(s.span_s == Approx(0.2).epsilon(1e-9));
  CHECK(s.offered_per_s == Approx(2000).epsilon(1e-9));
  for (const LoadRecord& r : run.records) {
    CHECK(r.sent_s >= r.scheduled_s);
    CHECK(r.done_s >= r.sent_s);
  }
}

TEST_CASE("the client sends on schedule without waiting for answers (open loop)", "[load]") {
  // 20 requests over 95 ms to a server that answers each 300 ms after it arrived: an open loop
  // sends all of them before the first answer; latency counts from the scheduled time.
  CannedHttpServer::Options so;
  so.delay_s = 0.3;
  CannedHttpServer server(so);
  const LoadRun run = run_against(server, options_at(200, 20));
  double last_sent = 0, first_done = 1e9;
  for (const LoadRecord& r : run.records) {
    REQUIRE(r.status == 200);
    last_sent = std::max(last_sent, r.sent_s);
    first_done = std::min(first_done, r.done_s);
    CHECK(r.latency_ms() >= 300);
  }
  CHECK(last_sent < first_done);
  CHECK(server.connections() == 20);  // each request found the others busy: 20 connections
}

TEST_CASE("a request that finds every connection busy waits, and its lateness shows it", "[load]") {
  CannedHttpServer::Options so;
  so.delay_s = 0.2;
  CannedHttpServer server(so);
  LoadOptions o = options_at(1000, 4);
  o.connections = 2;
  const LoadRun run = run_against(server, o);
  REQUIRE(run.records.size() == 4);
  for (const LoadRecord& r : run.records) REQUIRE(r.status == 200);
  const double first_done = std::min(run.records[0].done_s, run.records[1].done_s);
  CHECK(run.records[2].sent_s >= first_done);
  CHECK(run.records[3].sent_s >= first_done);
  CHECK(run.records[2].lateness_ms() >= 150);
  // Latency from the schedule holds the wait: about two service times.
  CHECK(run.records[3].latency_ms() >= 350);
  CHECK(server.connections() == 2);
}

TEST_CASE("a server that closes keep-alive connections loses no request", "[load]") {
  CannedHttpServer::Options so;
  so.close_after = 1;
  CannedHttpServer server(so);
  LoadOptions o = options_at(500, 100);
  o.connections = 4;
  const LoadSummary s = summarize(run_against(server, o));
  CHECK(count_of(s, 200) == 100);
  CHECK(count_of(s, kStatusError) == 0);
  CHECK(server.requests() == 100);
}

TEST_CASE("requests without an answer time out, and the run ends", "[load]") {
  CannedHttpServer::Options so;
  so.silent = true;
  CannedHttpServer server(so);
  LoadOptions o = options_at(100, 5);
  o.timeout_s = 0.2;
  const auto t0 = std::chrono::steady_clock::now();
  const LoadRun run = run_against(server, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const LoadSummary s = summarize(run);
  CHECK(count_of(s, kStatusTimeout) == 5);
  CHECK(s.answered == 0);
  CHECK(run.first_errors.at(kStatusTimeout).find("--timeout") != std::string::npos);
  CHECK(took < 5);
}

TEST_CASE("answers other than 200 are counted by status with the first message", "[load]") {
  CannedHttpServer::Options so;
  so.status = 503;
  so.body = R"({"error":"queue full"})";
  CannedHttpServer server(so);
  const LoadRun run = run_against(server, options_at(1000, 10));
  const LoadSummary s = summarize(run);
  CHECK(count_of(s, 503) == 10);
  CHECK(s.answered == 0);
  CHECK(run.first_errors.at(503).find("queue full") != std::string::npos);
  const std::string text = summary_text(run, s);
  CHECK(text.find("503 10") != std::string::npos);
}

TEST_CASE("the stop hook ends a run early; requests in flight still end", "[load]") {
  CannedHttpServer server({});
  LoadOptions o = options_at(200, 0);
  o.duration_s = 20;
  LoadHooks hooks;
  hooks.every_s = 0.1;
  int reports = 0;
  hooks.progress = [&](const LoadProgress& p) {
    ++reports;
    CHECK(p.sent >= p.ended);
  };
  hooks.stop = [](const LoadRun& so_far, std::string* reason) {
    if (so_far.records.size() < 60) return false;
    *reason = "enough";
    return true;
  };
  const LoadRun run = run_against(server, o, hooks);
  CHECK(run.interrupted);
  CHECK(run.stop_reason == "enough");
  CHECK(run.records.size() >= 60);
  CHECK(run.records.size() < 200);
  CHECK(reports >= 3);
  for (const LoadRecord& r : run.records) CHECK(r.status == 200);
}

TEST_CASE("an unreachable server is one error naming --url, not a hang", "[load]") {
  int port = 0;
  {
    CannedHttpServer gone({});  // a port that was free a moment ago
    port = gone.port();
  }
  LoadOptions o = options_at(10, 10);
  o.url = "http://127.0.0.1:" + std::to_string(port);
  const auto t0 = std::chrono::steady_clock::now();
  auto run = run_load(o, {});
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().code() == StatusCode::kInvalidArgument);
  CHECK(run.status().message().rfind("--url http://127.0.0.1:" + std::to_string(port), 0) == 0);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10);
}

TEST_CASE("the summary's quantiles and rates come from the records", "[load]") {
  LoadRun run;
  run.options = options_at(10, 10);
  for (int i = 0; i < 10; ++i) {
    const double at = 0.1 * (i + 1);
    // latencies 1..10 ms; the last one rejected
    run.records.push_back({at, at, at + (i + 1) * 1e-3, i == 9 ? 503 : 200});
  }
  const LoadSummary s = summarize(run);
  CHECK(s.answered == 9);
  CHECK(count_of(s, 503) == 1);
  CHECK(s.latency.mean_ms == Approx(5));
  CHECK(s.latency.p50_ms == Approx(5));
  CHECK(s.latency.p90_ms == Approx(quantile({1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.9)));
  CHECK(s.latency.max_ms == Approx(9));
  CHECK(s.lateness.max_ms == 0);
  CHECK(s.span_s == Approx(1.0));
  CHECK(s.offered_per_s == Approx(10));
  const nlohmann::json j = run_json(run, s);
  CHECK(j["format"] == "serf-load/1");
  CHECK(j["summary"]["counts"]["503"] == 1);
  REQUIRE(j["timeline"].size() == 1);
  CHECK(j["timeline"][0]["offered"] == 10);
}
