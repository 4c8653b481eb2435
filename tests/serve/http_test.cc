// The KServe v2 HTTP front end end to end over loopback, against a controller on a fake transport
// (no MPI): endpoints, JSON and binary tensors, every kind of bad request, 413, 503, 504, slow
// headers, too many connections, and the drain.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "fake_transport.h"
#include "raw_socket.h"
#include "serve/http_frontend.h"
#include "serve/metrics.h"
#include "serve/request_scan.h"
#include "serve/service.h"
#include "test_models.h"

using namespace serf;
using namespace serf::serve;
using nlohmann::json;
using serf::serve::testing::connect_to;
using serf::serve::testing::model_2x2;
using serf::serve::testing::read_all;

namespace {

using Clock = std::chrono::steady_clock;

// A controller serving on its own thread behind an HTTP front end on a free port.
struct Server {
  explicit Server(double service_s = 1e-3, HttpOptions o = {}, size_t max_queue = kUnboundedQueue,
                  int nodes = 2)
      : transport(nodes, service_s), controller(transport, options(max_queue)) {
    REQUIRE(controller.configure({1, 1, 1}).ok());
    controller.add_answer_hook([this](const RequestRecord& r) { metrics.record(r); });
    service = std::make_unique<InferenceService>(controller, model_2x2(), &metrics);
    loop = std::thread([this] { status = controller.serve(nullptr); });
    o.port = 0;
    auto started = HttpFrontend::Start(*service, o);
    REQUIRE(started.ok());
    http = std::move(started).value();
  }
  ~Server() { stop(); }
  void stop() {
    if (!loop.joinable()) return;
    controller.request_stop();
    loop.join();
    http->stop();
  }
  static ControllerOptions options(size_t max_queue) {
    ControllerOptions o;
    o.max_queue = max_queue;
    return o;
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", http->port());
    c.set_read_timeout(10, 0);
    return c;
  }

  FakeTransport transport;
  Controller controller;
  ServeMetrics metrics;
  std::unique_ptr<InferenceService> service;
  std::unique_ptr<HttpFrontend> http;
  std::thread loop;
  Status status;
};

// A front end of `threads` serving threads holding at most `connections` open, each closed after
// `keep_alive_s` without a request (the cases on connection limits).
HttpOptions pool_options(int threads, int connections, double keep_alive_s) {
  HttpOptions o;
  o.threads = threads;
  o.connections = connections;
  o.keep_alive_s = keep_alive_s;
  return o;
}

json infer_body(json data, json shape = {1, 2, 2}, std::string name = "input",
                std::string datatype = "FP32") {
  return {{"inputs", {{{"name", name}, {"shape", shape}, {"datatype", datatype}, {"data", data}}}}};
}

httplib::Result post(httplib::Client& c, const std::string& body,
                     const std::string& path = "/v2/models/m/infer",
                     const httplib::Headers& headers = {}) {
  return c.Post(path.c_str(), headers, body, "application/json");
}

// Expects `status` and an {"error": ...} body that contains `text`.
void expect_error(httplib::Result& r, int status, const std::string& text) {
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == status);
  json doc = json::parse(r->body);
  REQUIRE(doc["error"].get<std::string>().find(text) != std::string::npos);
}

}  // namespace

TEST_CASE("health, server and model metadata", "[serve][http]") {
  Server s;
  auto c = s.client();
  REQUIRE(c.Get("/v2/health/live")->status == 200);
  REQUIRE(c.Get("/v2/health/ready")->status == 200);
  REQUIRE(c.Get("/v2/models/m/ready")->status == 200);
  REQUIRE(c.Get("/v2/models/m/versions/1/ready")->status == 200);
  json server = json::parse(c.Get("/v2")->body);
  REQUIRE(server["name"] == "serf");
  REQUIRE(server["extensions"].size() == 3);
  json meta = json::parse(c.Get("/v2/models/m")->body);
  REQUIRE(meta["inputs"][0]["shape"] == json({1, 2, 2}));
  REQUIRE(meta["outputs"][0]["name"] == "output");
  auto unknown = c.Get("/v2/models/x");
  expect_error(unknown, 400, "unknown model \"x\"");
  auto version = c.Get("/v2/models/m/versions/7/ready");
  expect_error(version, 400, "unknown version \"7\"");
  auto path = c.Get("/v3/nothing");
  expect_error(path, 404, "no endpoint GET /v3/nothing");
}

TEST_CASE("infer answers each request with its own output, JSON flat or nested, or binary",
          "[serve][http]") {
  Server s;
  auto c = s.client();
  auto flat = post(c, infer_body({1, 2, 3, 4}).dump());
  REQUIRE(flat->status == 200);
  json out = json::parse(flat->body);
  REQUIRE(out["model_name"] == "m");
  REQUIRE(out["outputs"][0]["shape"] == json({1, 4}));
  REQUIRE(out["outputs"][0]["data"] == json({2, 3, 4, 5}));
  json nested = infer_body({{{1, 2}, {3, 4.5}}});
  nested["id"] = "abc";
  nested["outputs"] = {{{"name", "output"}, {"parameters", {{"classification", 2}}}}};
  out = json::parse(post(c, nested.dump())->body);
  REQUIRE(out["id"] == "abc");
  REQUIRE(out["outputs"][0]["datatype"] == "BYTES");
  REQUIRE(out["outputs"][0]["data"] == json({"5.500000:3", "4.000000:2"}));
  // curl -d sends any body as application/x-www-form-urlencoded; one over 8 KiB (a cifar10
  // image is 22 KB) is served like any other (httplib alone answered 413).
  auto form = c.Post("/v2/models/m/infer", infer_body({1, 2, 3, 4}).dump() + std::string(9000, ' '),
                     "application/x-www-form-urlencoded");
  REQUIRE(form->status == 200);
  REQUIRE(json::parse(form->body)["outputs"][0]["data"] == json({2, 3, 4, 5}));
  // Binary tensor extension both ways.
  const std::vector<float> input = {0.25f, -1.5f, 3.0f, 7.0f};
  json header{{"inputs",
               {{{"name", "input"},
                 {"shape", {1, 2, 2}},
                 {"datatype", "FP32"},
                 {"parameters", {{"binary_data_size", 16}}}}}},
              {"outputs", {{{"name", "output"}, {"parameters", {{"binary_data", true}}}}}}};
  std::string body = header.dump();
  const size_t json_length = body.size();
  body.append(reinterpret_cast<const char*>(input.data()), 16);
  auto bin = post(c, body, "/v2/models/m/versions/1/infer",
                  {{"Inference-Header-Content-Length", std::to_string(json_length)}});
  REQUIRE(bin->status == 200);
  const size_t hl = std::stoul(bin->get_header_value("Inference-Header-Content-Length"));
  json bin_header = json::parse(bin->body.substr(0, hl));
  REQUIRE(bin_header["outputs"][0]["parameters"]["binary_data_size"] == 16);
  REQUIRE(bin->body.size() == hl + 16);
  std::vector<float> got(4);
  std::memcpy(got.data(), bin->body.data() + hl, 16);
  REQUIRE(got == std::vector<float>{1.25f, -0.5f, 4.0f, 8.0f});
}

TEST_CASE("every kind of bad request gets 400 naming what is wrong; the server keeps serving",
          "[serve][http]") {
  HttpOptions o;
  o.max_body_bytes = 4096;
  Server s(1e-3, o);
  auto c = s.client();
  struct Case {
    std::string body;
    std::string text;
    httplib::Headers headers;
  };
  json bad_output = infer_body({1, 2, 3, 4});
  bad_output["outputs"] = {{{"name", "logits"}}};
  json bad_k = infer_body({1, 2, 3, 4});
  bad_k["outputs"] = {{{"name", "output"}, {"parameters", {{"classification", 9}}}}};
  json bad_timeout = infer_body({1, 2, 3, 4});
  bad_timeout["parameters"] = {{"timeout", -5}};
  json binary_header{{"inputs",
                      {{{"name", "input"},
                        {"shape", {1, 2, 2}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", 12}}}}}}};
  const std::string hdr = binary_header.dump();
  binary_header["inputs"][0]["parameters"]["binary_data_size"] = 16;
  const std::string hdr16 = binary_header.dump();
  const httplib::Headers hl16 = {{"Inference-Header-Content-Length", std::to_string(hdr16.size())}};
  const httplib::Headers hl = {{"Inference-Header-Content-Length", std::to_string(hdr.size())}};
  const std::vector<Case> cases = {
      {"{\"inputs\": [", "malformed JSON", {}},
      {"[1, 2]", "must be a JSON object", {}},
      {R"({"inputs": [{"name": "input", "shape": [1, 2, 2], "shape": [1, 4]}]})",
       "key inputs[0].shape appears twice",
       {}},
      {json{{"inputs", json::array()}}.dump(), "inputs: expected an array with the one input", {}},
      {infer_body({1, 2, 3, 4}, {1, 2, 2}, "image").dump(), "unknown input \"image\"", {}},
      {infer_body({1, 2, 3, 4}, {1, 2, 2}, "input", "INT64").dump(), "datatype INT64", {}},
      {infer_body({1, 2, 3, 4}, {1, 4}).dump(), "shape [1, 4], the model takes [1, 2, 2]", {}},
      {infer_body({1, 2, 3}).dump(), "3 values, but shape [1, 2, 2] holds 4", {}},
      {infer_body({{{1, 2}, {3}}}).dump(), "1 values where shape [1, 2, 2] needs 2", {}},
      {infer_body({1, "x", 3, 4}).dump(), "data[1]: expected a number, got string", {}},
      {infer_body({1, 2, 3, 1e300}).dump(), "is not a finite FP32 value", {}},
      {bad_output.dump(), "unknown output \"logits\"", {}},
      {bad_k.dump(), "classification 9 must be an integer in [1, 4]", {}},
      {bad_timeout.dump(), "parameters.timeout: -5", {}},
      {hdr + std::string(16, 'x'), "binary_data_size: 12 bytes, but 4 FP32 values", hl},
      {hdr + std::string(12, 'x'), "binary tensors needs the Inference-Header-Content-Length", {}},
      {hdr, "binary_data_size given but no Inference-Header-Content-Length", {}},
      {hdr16 + std::string(20, 'x'), "4 bytes after the JSON header and the binary inputs", hl16},
      {hdr, "is not a byte count", {{"Inference-Header-Content-Length", "12abc"}}},
      {hdr, "is more than the body's", {{"Inference-Header-Content-Length", "100000"}}},
  };
  for (const Case& k : cases) {
    INFO(k.body.substr(0, 200));
    auto r = post(c, k.body, "/v2/models/m/infer", k.headers);
    expect_error(r, 400, k.text);
  }
  auto model = post(c, infer_body({1, 2, 3, 4}).dump(), "/v2/models/other/infer");
  expect_error(model, 400, "unknown model \"other\"");
  auto big = post(c, std::string(8192, ' '));
  // The limit in bytes (it printed "over 0 MiB" for a limit under 1 MiB).
  expect_error(big, 413, "request body over 4096 bytes (--max-body-mb 0.00390625)");
  // multipart/form-data is not a KServe v2 body.
  auto form =
      c.Post("/v2/models/m/infer", "--b\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b");
  expect_error(form, 400, "multipart/form-data");
  auto c2 = s.client();
  REQUIRE(post(c2, infer_body({1, 2, 3, 4}).dump())->status == 200);
  REQUIRE(s.metrics.prometheus_text(s.controller.live())
              .find("serf_invalid_requests_total{protocol=\"http\"} " +
                    std::to_string(cases.size() + 3)) != std::string::npos);
  REQUIRE(s.controller.counts().received == 1);  // malformed requests are not received
}

TEST_CASE("a full queue answers 503, a request queued past its timeout 504", "[serve][http]") {
  // c = 1 on 2 units, no waiting room: a request that finds its unit's slot busy is refused.
  Server s(0.5, {}, 0);
  std::vector<std::future<httplib::Result>> r;
  for (int i = 0; i < 6; ++i) {
    r.push_back(std::async(std::launch::async, [&s] {
      auto c = s.client();
      return post(c, infer_body({1, 2, 3, 4}).dump());
    }));
  }
  int ok = 0, refused = 0;
  for (auto& f : r) {
    auto res = f.get();
    REQUIRE(res);
    if (res->status == 200) ++ok;
    if (res->status == 503) {
      ++refused;
      REQUIRE(json::parse(res->body)["error"].get<std::string>().find("is full") !=
              std::string::npos);
    }
  }
  REQUIRE(ok >= 1);
  REQUIRE(refused >= 1);  // six at once on two slots (unless the six were spread over 0.5 s)
  REQUIRE(ok + refused == 6);
  // 504: with a waiting room of 8, a 20 ms timeout passes behind a 200 ms request.
  Server t(0.2, {}, 8);
  auto slow = std::async(std::launch::async, [&t] {
    auto c = t.client();
    return post(c, infer_body({1, 2, 3, 4}).dump());
  });
  auto slow2 = std::async(std::launch::async, [&t] {
    auto c = t.client();
    return post(c, infer_body({1, 2, 3, 4}).dump());
  });
  REQUIRE(wait_received(t.controller, 2));  // both units busy for up to 200 ms
  std::vector<std::future<httplib::Result>> late;
  json timed = infer_body({1, 2, 3, 4});
  timed["parameters"] = {{"timeout", 20000}};
  for (int i = 0; i < 4; ++i) {
    late.push_back(std::async(std::launch::async, [&t, timed] {
      auto c = t.client();
      return post(c, timed.dump());
    }));
  }
  int timed_out = 0;
  for (auto& f : late) {
    auto res = f.get();
    if (res->status == 504) {
      ++timed_out;
      // Queued, then expired; or, on a machine busy enough to delay its admission, expired first.
      REQUIRE(json::parse(res->body)["error"].get<std::string>().find("timeout of 20000 us") !=
              std::string::npos);
    }
  }
  REQUIRE(timed_out >= 2);  // both units busy: at least two of four wait past 20 ms
  REQUIRE(slow.get()->status == 200);
  REQUIRE(slow2.get()->status == 200);
  t.stop();
  REQUIRE(t.controller.counts().balanced());
  REQUIRE(t.controller.counts().timed_out == static_cast<uint64_t>(timed_out));
}

TEST_CASE("a client that sends its headers slowly is cut off; others are served meanwhile",
          "[serve][http]") {
  HttpOptions o;
  o.read_timeout_s = 0.5;
  Server s(1e-3, o);
  const int fd = connect_to(s.http->port());
  const auto t0 = Clock::now();
  std::thread trickle([fd] {
    const std::string head = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n";
    for (char ch : head) {
      if (::send(fd, &ch, 1, MSG_NOSIGNAL) <= 0) return;  // the server closed the connection
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto c = s.client();
  REQUIRE(post(c, infer_body({1, 2, 3, 4}).dump())->status == 200);
  read_all(fd, 5.0);  // returns when the server closes
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  REQUIRE(took < 2.0);  // the read timeout, not the 4.4 s the trickle would take
  trickle.join();
  ::close(fd);
}

TEST_CASE("many clients trickling at once, more than the threads: good requests are served at once",
          "[serve][http]") {
  // Issue 14: with a thread per connection, clients that send a byte now and then held every
  // thread, and a good client waited until a read timeout freed one (or was refused 503). Now a
  // connection takes a thread only once its request is whole. 4 threads; 24 connections trickle
  // a byte every 100 ms (8 heads, 8 Content-Length bodies, 8 chunked bodies), 8 more sit idle
  // after a request, 8 send nothing. Meanwhile each good request (a new connection, and one
  // kept alive) is answered in < 1 s; the tricklers get 408 at the read timeout (3 s).
  HttpOptions o = pool_options(4, 64, 5);
  o.read_timeout_s = 3;
  Server s(1e-3, o);
  const std::string body = infer_body({1, 2, 3, 4}).dump();
  const std::string head = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n";
  std::vector<std::string> sends;
  for (int i = 0; i < 8; ++i) {
    sends.push_back(head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    sends.push_back(head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    sends.push_back(head + "Transfer-Encoding: chunked\r\n\r\n" + "1\r\n{\r\n1\r\n\"\r\n1\r\n");
  }
  std::vector<int> fds;
  std::vector<size_t> sent(sends.size(), 0);
  for (size_t i = 0; i < sends.size(); ++i) {
    fds.push_back(connect_to(s.http->port()));
    // Heads trickle from their first byte; bodies from their first byte after a whole head.
    if (i % 3 != 0) {
      sent[i] = sends[i].find("\r\n\r\n") + 4;
      REQUIRE(::send(fds[i], sends[i].data(), sent[i], MSG_NOSIGNAL) ==
              static_cast<ssize_t>(sent[i]));
    }
  }
  std::vector<int> idle, silent;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(connect_to(s.http->port()));
    const std::string get = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
    REQUIRE(::send(idle.back(), get.data(), get.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(get.size()));
    silent.push_back(connect_to(s.http->port()));
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (sent[i] < sends[i].size() - 1 &&  // never the last byte
            ::send(fds[i], sends[i].data() + sent[i], 1, MSG_NOSIGNAL) == 1) {
          ++sent[i];
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // every trickler has begun
  auto kept = s.client();
  double slowest = 0;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    auto fresh = s.client();
    REQUIRE(post(fresh, body)->status == 200);
    REQUIRE(post(kept, body)->status == 200);
    slowest = std::max(slowest, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  INFO("the slowest pair of good requests took " << slowest << " s");
  REQUIRE(slowest < 1.0);
  stop = true;
  trickle.join();
  int timed_out = 0;
  for (int fd : fds) {
    const std::string got = read_all(fd, 8.0);
    timed_out += got.rfind("HTTP/1.1 408", 0) == 0;
    ::close(fd);
  }
  REQUIRE(timed_out == static_cast<int>(fds.size()));
  for (int fd : idle) ::close(fd);
  for (int fd : silent) ::close(fd);
  const std::string text = s.metrics.prometheus_text(s.controller.live());
  REQUIRE(text.find("serf_http_read_timeouts_total{part=\"head\"} 8\n") != std::string::npos);
  REQUIRE(text.find("serf_http_read_timeouts_total{part=\"body\"} 16\n") != std::string::npos);
  REQUIRE(text.find("serf_refused_connections_total 0\n") != std::string::npos);
}

TEST_CASE("connections over --http-connections are refused 503 and counted, each at once",
          "[serve][http]") {
  // The cap counts open connections, however they wait: trickling, idle or being served.
  Server s(1e-3, pool_options(2, 6, 5));
  std::vector<int> held;
  for (int i = 0; i < 6; ++i) {
    held.push_back(connect_to(s.http->port()));
    if (i % 2 == 0) REQUIRE(::send(held.back(), "POST /v2", 8, MSG_NOSIGNAL) == 8);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 3; ++i) {
    const int extra = connect_to(s.http->port());
    const auto t0 = Clock::now();
    const std::string got = read_all(extra, 3.0);
    ::close(extra);
    INFO(got);
    REQUIRE(got.rfind("HTTP/1.1 503", 0) == 0);
    REQUIRE(got.find("too many connections: the server holds 6 open at once") != std::string::npos);
    REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() < 1.0);
  }
  for (int fd : held) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the poller sees them closed
  auto c = s.client();
  REQUIRE(post(c, infer_body({1, 2, 3, 4}).dump())->status == 200);
  REQUIRE(
      s.metrics.prometheus_text(s.controller.live()).find("serf_refused_connections_total 3\n") !=
      std::string::npos);
}

TEST_CASE("a burst of connections over the cap: each refused 503 at once, good clients served",
          "[serve][http]") {
  // Until session 31 one thread refused the connections over the cap, one at a time, and waited
  // for each client to close (up to 2 s) before the next: 200 refused clients that kept their
  // sockets open took 400 s to clear. Now the accept thread writes the 503 without waiting and
  // the poller closes the connection. Cap 16: one good keep-alive client and 15 idle connections;
  // then 200 more at once, none closed until all are read. Each must get its 503 and the close
  // within 3 s of the burst's start, and the good client's requests meanwhile within 1 s each.
  Server s(1e-3, pool_options(4, 16, 30));
  auto good = s.client();
  good.set_keep_alive(true);
  REQUIRE(post(good, infer_body({1, 2, 3, 4}).dump())->status == 200);
  std::vector<int> idle;
  for (int i = 0; i < 15; ++i) idle.push_back(connect_to(s.http->port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all 16 adopted
  std::atomic<bool> done{false};
  std::vector<std::pair<int, double>> served;  // status, seconds
  std::thread client([&] {
    while (!done.load()) {
      const auto t = Clock::now();
      auto r = post(good, infer_body({1, 2, 3, 4}).dump());
      served.emplace_back(r ? r->status : -1,
                          std::chrono::duration<double>(Clock::now() - t).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  constexpr int kBurst = 200;
  constexpr double kBoundS = 3.0;
  const auto t0 = Clock::now();
  std::vector<int> burst;
  for (int i = 0; i < kBurst; ++i) burst.push_back(connect_to(s.http->port()));
  // Read each in turn, none closed before all are read; checked once the good client is joined.
  double last_s = 0;
  int refused = 0;
  std::string first_wrong;
  for (size_t i = 0; i < burst.size(); ++i) {
    const double left = kBoundS - std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string got = read_all(burst[i], std::max(left, 0.1));
    last_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (got.rfind("HTTP/1.1 503", 0) == 0 &&
        got.find("too many connections: the server holds 16 open at once") != std::string::npos &&
        last_s < kBoundS) {
      ++refused;
    } else if (first_wrong.empty()) {
      first_wrong = "connection " + std::to_string(i) + " after " + std::to_string(last_s) +
                    " s: \"" + got + "\"";
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // good requests after the burst
  done = true;
  client.join();
  for (int fd : burst) ::close(fd);
  for (int fd : idle) ::close(fd);
  INFO("the first not refused at once: " << first_wrong);
  REQUIRE(refused == kBurst);
  INFO("all " << kBurst << " refused within " << last_s << " s; " << served.size()
              << " good requests meanwhile");
  REQUIRE(served.size() >= 2);
  for (const auto& [status, took_s] : served) {
    INFO("a good request: " << status << " in " << took_s << " s");
    REQUIRE(status == 200);
    REQUIRE(took_s < 1.0);
  }
  REQUIRE(s.metrics.prometheus_text(s.controller.live())
              .find("serf_refused_connections_total " + std::to_string(kBurst) + "\n") !=
          std::string::npos);
}

TEST_CASE("a request not whole within the read timeout: 408 naming the late part, counted",
          "[serve][http]") {
  // The head (or the body) arrives in part and no more: answered 408 once the read timeout
  // passed, not 400 (malformed: it was not) and not nothing; counted by part; the connection is
  // closed. With Expect: 100-continue the interim 100 stays before the 408. A connection that
  // sends nothing is closed without an answer after the keep-alive time, counted apart.
  HttpOptions o;
  o.read_timeout_s = 0.5;
  o.keep_alive_s = 1;
  Server s(1e-3, o);
  const std::string body = infer_body({1, 2, 3, 4}).dump();
  const std::string head = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n";
  struct Case {
    std::string sent, part, before_408;
  };
  const Case cases[] = {{head.substr(0, 20), "head", ""},
                        {head + "\r\n" + body.substr(0, 10), "body", ""},
                        {head + "Expect: 100-continue\r\n\r\n" + body.substr(0, 10), "body",
                         "HTTP/1.1 100 Continue\r\n\r\n"}};
  for (const Case& c : cases) {
    INFO(c.sent);
    const int fd = connect_to(s.http->port());
    const auto t0 = Clock::now();
    REQUIRE(::send(fd, c.sent.data(), c.sent.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(c.sent.size()));
    const std::string got = read_all(fd, 5.0);  // until the server closes
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    ::close(fd);
    INFO(got);
    REQUIRE(got.rfind(c.before_408 + "HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
    REQUIRE(got.find("Connection: close") != std::string::npos);
    REQUIRE(got.find("the request's " + c.part) != std::string::npos);
    REQUIRE(got.find("(--read-timeout 0.5 s for a whole request)") != std::string::npos);
    REQUIRE(took >= 0.45);
    REQUIRE(took < 3.0);
  }
  const int idle = connect_to(s.http->port());
  const auto t0 = Clock::now();
  REQUIRE(read_all(idle, 5.0).empty());
  REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() >= 0.9);
  ::close(idle);
  auto c = s.client();
  REQUIRE(post(c, body)->status == 200);
  const std::string text = s.metrics.prometheus_text(s.controller.live());
  REQUIRE(text.find("serf_http_read_timeouts_total{part=\"head\"} 1\n") != std::string::npos);
  REQUIRE(text.find("serf_http_read_timeouts_total{part=\"body\"} 2\n") != std::string::npos);
  REQUIRE(text.find("serf_http_silent_connections_total 1\n") != std::string::npos);
  REQUIRE(text.find("serf_invalid_requests_total{protocol=\"http\"} 0\n") != std::string::npos);
}

TEST_CASE("framing httplib would wait on is refused from the head, not after the read timeout",
          "[serve][http]") {
  // Each head is sent whole and its body never: an answer from the head alone comes at once.
  HttpOptions o;
  o.read_timeout_s = 5;
  o.max_body_bytes = 4096;
  Server s(1e-3, o);
  const std::string line = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n";
  const std::pair<std::string, std::string> cases[] = {
      {line + "Content-Length: 4097\r\n\r\n", "HTTP/1.1 413"},
      {line + "Content-Length: 18446744073709551616\r\n\r\n", "HTTP/1.1 413"},
      {line + "Content-Length: -1\r\n\r\n", "HTTP/1.1 400"},
      {line + "Content-Length: 1 2\r\n\r\n", "HTTP/1.1 400"},
      {line + "Content-Length: 0x10\r\n\r\n", "HTTP/1.1 400"},
      {line + "\r\n", "HTTP/1.1 411"},
      {line + "Transfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501"}};
  for (const auto& [sent, status] : cases) {
    INFO(sent);
    const int fd = connect_to(s.http->port());
    const auto t0 = Clock::now();
    REQUIRE(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(sent.size()));
    const std::string got = read_all(fd, 10.0);
    ::close(fd);
    INFO(got);
    REQUIRE(got.rfind(status, 0) == 0);
    REQUIRE(got.find("{\"error\":") != std::string::npos);
    REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() < 4.0);
  }
}

TEST_CASE("requests pipelined on one connection in one send are all answered, in order",
          "[serve][http]") {
  // The connection's stream reads ahead into a buffer: the second and third requests arrive
  // with the first and must be served from it, not wait for the socket to say readable again.
  Server s;
  const int fd = connect_to(s.http->port());
  const std::string body = infer_body({1, 2, 3, 4}).dump();
  const std::string infer = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
  const std::string three = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n" + infer +
                            "GET /v2/models/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(::send(fd, three.data(), three.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(three.size()));
  const auto t0 = Clock::now();
  const std::string got = read_all(fd, 5.0);  // the third asks to close
  ::close(fd);
  REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() < 4.0);
  const size_t first = got.find("HTTP/1.1 200");
  const size_t second = got.find("HTTP/1.1 200", first + 1);
  const size_t third = got.find("HTTP/1.1 400", second + 1);
  INFO(got);
  REQUIRE(first == 0);
  REQUIRE(second != std::string::npos);
  REQUIRE(third != std::string::npos);
  REQUIRE(got.find("\"output\"", second) < third);  // the infer answer is the second
  REQUIRE(got.find("unknown model", third) != std::string::npos);
}

TEST_CASE("one connection too many is answered 503 and closed", "[serve][http]") {
  HttpOptions o;
  o.connections = 2;
  o.keep_alive_s = 3;
  Server s(1e-3, o);
  const int a = connect_to(s.http->port()), b = connect_to(s.http->port());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both hold a thread, idle
  const int extra = connect_to(s.http->port());
  const std::string got = read_all(extra, 3.0);
  REQUIRE(got.rfind("HTTP/1.1 503", 0) == 0);
  REQUIRE(got.find("too many connections") != std::string::npos);
  ::close(a);
  ::close(b);
  ::close(extra);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto c = s.client();
  REQUIRE(post(c, infer_body({1, 2, 3, 4}).dump())->status == 200);
  REQUIRE(s.metrics.prometheus_text(s.controller.live()).find("serf_refused_connections_total 1") !=
          std::string::npos);
}

TEST_CASE("a stop: ready turns false, queued requests finish, new ones get 503", "[serve][http]") {
  Server s(0.15, {}, 8);
  auto first = std::async(std::launch::async, [&s] {
    auto c = s.client();
    return post(c, infer_body({1, 2, 3, 4}).dump());
  });
  REQUIRE(wait_received(s.controller, 1));
  s.controller.request_stop();
  REQUIRE(wait_not_ready(s.controller));
  auto c = s.client();
  REQUIRE(c.Get("/v2/health/ready")->status == 400);
  REQUIRE(c.Get("/v2/health/live")->status == 200);
  auto refused = post(c, infer_body({1, 2, 3, 4}).dump());
  expect_error(refused, 503, "the server is stopping");
  REQUIRE(first.get()->status == 200);
  s.stop();
  REQUIRE(s.status.ok());
  const OutcomeCounts n = s.controller.counts();
  REQUIRE(n.received == 2);
  REQUIRE(n.answered == 1);
  REQUIRE(n.rejected == 1);
  REQUIRE(n.balanced());
}

TEST_CASE("the listen backlog is wide: clients connecting at once are not reset", "[serve][http]") {
  // httplib listens with a backlog of 5; beside busy processes the accept thread lagged, the
  // kernel answered with SYN cookies and reset clients whose segments failed the cookie check
  // (test_serve_cli_http_overload's ConnectionResetError). The listening socket must take more.
  Server s;
  int backlog = -1;
  for (int fd = 0; fd < 1024; ++fd) {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    int listening = 0;
    socklen_t ll = sizeof(listening);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET ||
        ntohs(a.sin_port) != s.http->port() ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) != 0 || !listening) {
      continue;
    }
    tcp_info info{};
    socklen_t il = sizeof(info);
    REQUIRE(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &il) == 0);
    backlog = static_cast<int>(info.tcpi_sacked);  // a listener's maximum accept backlog
  }
  REQUIRE(backlog >= 128);
  // 48 clients at once, each sending its headers and its body in two sends (as Python's
  // http.client does): every one reads its whole 200 answer.
  const std::string body = infer_body({1, 2, 3, 4}).dump();
  const std::string head =
      "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  std::vector<std::future<std::string>> answers;
  for (int i = 0; i < 48; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      const int fd = connect_to(s.http->port());
      ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
      ::send(fd, body.data(), body.size(), MSG_NOSIGNAL);
      bool reset = false;
      std::string got = read_all(fd, 20.0, &reset);
      ::close(fd);
      return reset ? "reset after: " + got : got;
    }));
  }
  for (auto& a : answers) {
    const std::string got = a.get();
    INFO(got);
    REQUIRE(got.rfind("HTTP/1.1 200", 0) == 0);
    REQUIRE(got.find("\"output\"") != std::string::npos);
  }
}

TEST_CASE("an answer given before the body was read reaches the client whole, never a reset",
          "[serve][http]") {
  // A multipart body is refused from the headers, without reading the body, and the connection
  // closed as the client asked; the client still sends its body after the answer. A close with
  // the body unread (or arriving after it) resets the connection: the client's send fails and
  // the answer may be lost. The server must drain the body and close gracefully.
  Server s;
  const int fd = connect_to(s.http->port());
  const std::string body(size_t{256} * 1024, 'x');
  const std::string head =
      "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server has answered
  // In pieces, as a slow client would: a reset shows as a failed send.
  for (size_t sent = 0; sent < body.size();) {
    const ssize_t n =
        ::send(fd, body.data() + sent, std::min<size_t>(16384, body.size() - sent), MSG_NOSIGNAL);
    INFO("send: " << std::strerror(errno));
    REQUIRE(n > 0);  // not EPIPE / ECONNRESET
    sent += static_cast<size_t>(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::shutdown(fd, SHUT_WR);
  bool reset = false;
  const std::string got = read_all(fd, 10.0, &reset);
  ::close(fd);
  INFO(got);
  REQUIRE_FALSE(reset);
  REQUIRE(got.rfind("HTTP/1.1 400", 0) == 0);
  REQUIRE(got.find("multipart/form-data body") != std::string::npos);
  REQUIRE(got.find("body itself\"}") != std::string::npos);  // the whole answer
}

TEST_CASE("a client that closes its connection while its request is queued: dropped, not computed",
          "[serve][http]") {
  Server s(0.3, {}, 8, 1);  // one unit of one slot, 300 ms a request
  auto busy = std::async(std::launch::async, [&s] {
    auto c = s.client();
    return post(c, infer_body({1, 2, 3, 4}).dump());
  });
  REQUIRE(wait_received(s.controller, 1));
  const std::string body = infer_body({5, 6, 7, 8}).dump();
  const std::string head = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  const int fd = connect_to(s.http->port());
  const std::string request = head + body;
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  REQUIRE(wait_received(s.controller, 2));  // queued behind the busy slot
  ::close(fd);                              // the client gives up
  auto r = busy.get();
  REQUIRE(r);
  REQUIRE(r->status == 200);
  check_dropped_before_dispatch(s);  // counted as timed out, never sent to a node
  // A pipelined request behind an answered one is data, not a close: both are answered.
  Server t(0.05, {}, 8, 1);
  const int fd2 = connect_to(t.http->port());
  const std::string two = request + request;
  REQUIRE(::send(fd2, two.data(), two.size(), 0) == static_cast<ssize_t>(two.size()));
  const std::string got = read_all(fd2, 1.0);
  ::close(fd2);
  size_t oks = 0;
  for (size_t at = got.find("HTTP/1.1 200"); at != std::string::npos;
       at = got.find("HTTP/1.1 200", at + 1))
    ++oks;
  REQUIRE(oks == 2);
  t.stop();
  REQUIRE(t.controller.counts().answered == 2);
}

TEST_CASE("timeouts of 0 and of days are served; one past the clock's range is refused",
          "[serve][http]") {
  Server s(1e-3);
  auto c = s.client();
  // 0 is no timeout; 1e12 us (11.6 days) is a deadline far off; unknown parameters (Triton's
  // "priority", a made-up one) are ignored, as KServe servers do, and the request served.
  for (const json& timeout : {json(0), json(1e12), json(0.5e6)}) {
    json body = infer_body({1, 2, 3, 4});
    body["parameters"] = {{"timeout", timeout}, {"priority", 3}, {"frob", "x"}};
    INFO(body["parameters"].dump());
    auto r = post(c, body.dump());
    REQUIRE(r);
    REQUIRE(r->status == 200);
  }
  // 1e300 us overflowed the steady clock's nanoseconds: the deadline landed in the past and the
  // request was dropped 504 at once. Now the timeout is refused, with the range named.
  for (const json& timeout : {json(1e300), json(1e16)}) {
    json body = infer_body({1, 2, 3, 4});
    body["parameters"] = {{"timeout", timeout}};
    INFO(body["parameters"].dump());
    auto r = post(c, body.dump());
    expect_error(r, 400, "must be a number of microseconds in [0, 1e+15]");
  }
  s.stop();
  REQUIRE(s.controller.counts().answered == 3);
  REQUIRE(s.controller.counts().timed_out == 0);
  REQUIRE(s.controller.counts().balanced());
}

TEST_CASE("RequestScan: a request is whole once its head and body (by its framing) are there",
          "[serve][http]") {
  using State = RequestScan::State;
  RequestScan scan(100);
  // Fed byte by byte: whole exactly at the last byte, never before.
  auto first_whole = [&](const std::string& request) {
    scan.reset();
    for (size_t n = 1; n <= request.size(); ++n) {
      const State st = scan.scan(std::string_view(request).substr(0, n));
      if (st != State::kIncomplete) return std::make_pair(st, n);
    }
    return std::make_pair(State::kIncomplete, request.size() + 1);
  };
  const std::string get = "GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(first_whole(get) == std::make_pair(State::kWhole, get.size()));
  const std::string length = "POST /i HTTP/1.1\r\ncontent-length:  5 \r\n\r\nhello";
  REQUIRE(first_whole(length) == std::make_pair(State::kWhole, length.size()));
  const std::string chunked =
      "POST /i HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n"
      "0\r\nTrailer: t\r\n\r\n";
  REQUIRE(first_whole(chunked) == std::make_pair(State::kWhole, chunked.size()));
  // Pipelined bytes past the request do not matter.
  scan.reset();
  REQUIRE(scan.scan(length + get) == State::kWhole);
  // Expect: 100-continue is seen once the head is whole and the body awaited.
  scan.reset();
  REQUIRE(scan.scan("POST /i HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n") ==
          State::kIncomplete);
  REQUIRE(scan.expects_continue());
  // Framing the front end refuses from the head is handed over as soon as the head is whole:
  // no use waiting for a body.
  for (const char* head :
       {"POST /i HTTP/1.1\r\nContent-Length: 101\r\n\r\n",  // over the limit: 413
        "POST /i HTTP/1.1\r\nContent-Length: -1\r\n\r\n",   // no byte count: 400
        "POST /i HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST /i HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /i HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",  // 501
        "POST /i HTTP/1.1\r\nno colon\r\nContent-Length: 5\r\n\r\n"}) {
    INFO(head);
    scan.reset();
    REQUIRE(scan.scan(head) == State::kHandOver);
  }
  // Chunks over the limit, or malformed, are handed over too; a head that never ends as well.
  for (const std::string body : {"65\r\n", "zz\r\n", "3\r\nabcde"}) {
    INFO(body);
    scan.reset();
    REQUIRE(scan.scan("POST /i HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + body) ==
            State::kHandOver);
  }
  scan.reset();
  REQUIRE(scan.scan("GET /" + std::string(RequestScan::kMaxHeadBytes, 'a')) == State::kHandOver);
}
