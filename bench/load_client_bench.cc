// Is `serf load` the bottleneck? Its HTTP channel against a server that answers at once (a canned
// epoll responder on its own thread, in this process, on the same cores), at rising Poisson rates:
// the throughput it reaches and its lateness (sent - scheduled). For comparison, cpp-httplib's
// blocking client from threads in a closed loop (as fast as it can, no schedule), the client the
// load generator does not use.
//   build/bin/bench_load_client [--seconds S] [--repeat N] [--rates R1,R2,...] [--lateness-ms L]
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "canned_http_server.h"
#include "serf/core/statistics.h"
#include "serve/load/http_channel.h"
#include "serve/load/http_wire.h"
#include "serve/load/load_client.h"
#include "serve/load/load_report.h"

using namespace serf;
using namespace serf::serve::load;
using serf::testing::CannedHttpServer;

namespace {

struct Args {
  double seconds = 3;
  int repeat = 3;
  std::vector<double> rates = {1000, 2000, 5000, 10000, 20000, 30000, 40000, 60000};
  double lateness_ms = 1;  // "sustained": every request answered, lateness p99 within this
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--seconds") a.seconds = std::atof(argv[i + 1]);
    if (k == "--repeat") a.repeat = std::atoi(argv[i + 1]);
    if (k == "--lateness-ms") a.lateness_ms = std::atof(argv[i + 1]);
    if (k == "--rates") {
      a.rates.clear();
      std::stringstream ss(argv[i + 1]);
      std::string r;
      while (std::getline(ss, r, ',')) a.rates.push_back(std::atof(r.c_str()));
    }
  }
  return a;
}

// A KServe-sized request and answer: the tiny model's JSON input (432 numbers) and its output.
std::string tiny_body() {
  std::string data;
  for (int i = 0; i < 432; ++i) data += (i ? "," : "") + std::to_string(0.001 * (i % 1000) - 0.25);
  return R"({"inputs":[{"name":"input","shape":[1,3,12,12],"datatype":"FP32","data":[)" + data +
         "]}]}";
}

struct Point {
  double offered = 0, throughput = 0, late_p50 = 0, late_p99 = 0, late_max = 0, lat_p50 = 0,
         lat_p99 = 0;
  uint64_t sent = 0, answered = 0;
};

Point run_at(const CannedHttpServer& server, const std::string& request, double rate, double s,
             uint64_t seed) {
  HttpChannelOptions h;
  h.endpoint = {"127.0.0.1", server.port()};
  h.request = request;
  h.max_connections = 64;
  auto channel = HttpChannel::Create(h);
  LoadOptions o;
  o.url = "bench";
  o.model = "m";
  o.load = {{0, rate}};
  o.duration_s = s;
  o.seed = seed;
  auto run = run_schedule(**channel, o, {});
  const LoadSummary sum = summarize(*run);
  Point p;
  p.offered = sum.offered_per_s;
  p.throughput = sum.throughput_per_s;
  p.sent = sum.sent;
  p.answered = sum.answered;
  p.late_p50 = sum.lateness.p50_ms;
  p.late_p99 = sum.lateness.p99_ms;
  p.late_max = sum.lateness.max_ms;
  p.lat_p50 = sum.latency.p50_ms;
  p.lat_p99 = sum.latency.p99_ms;
  return p;
}

// cpp-httplib's blocking client: `threads` keep-alive connections, each sending its next request
// when the last one was answered, for `s` seconds. Requests/s.
double httplib_closed_loop(const CannedHttpServer& server, const std::string& body, int threads,
                           double s) {
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_keep_alive(true);
      // Headers and body go in two sends: without TCP_NODELAY the body waits for the server's
      // delayed ACK (Nagle), about 40 ms a request here.
      c.set_tcp_nodelay(true);
      while (!stop) {
        auto r = c.Post("/v2/models/m/infer", body, "application/json");
        if (r && r->status == 200) ++done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
  stop = true;
  for (auto& t : pool) t.join();
  return static_cast<double>(done) / s;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  CannedHttpServer::Options so;
  so.body = R"({"model_name":"tiny","outputs":[{"name":"output","shape":[1,10],"datatype":"FP32",)"
            R"("data":[0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1]}]})";
  CannedHttpServer server(so);
  const std::string body = tiny_body();
  const std::string request = http_infer_request({"127.0.0.1", server.port()}, "m", body, {});
  std::printf(
      "serf load's HTTP channel against a server answering at once (same process, %u "
      "cores), Poisson arrivals, %g s per point, median of %d runs\n",
      std::thread::hardware_concurrency(), a.seconds, a.repeat);
  std::printf("%10s %12s %10s %14s %14s %14s %12s %12s\n", "rate/s", "answered/s", "lost",
              "late p50 ms", "late p99 ms", "late max ms", "lat p50 ms", "lat p99 ms");
  double sustained = 0;
  for (double rate : a.rates) {
    std::vector<double> thr, lp50, lp99, lmax, p50, p99;
    uint64_t lost = 0;
    for (int r = 0; r < a.repeat; ++r) {
      const Point p = run_at(server, request, rate, a.seconds, 1 + static_cast<uint64_t>(r));
      thr.push_back(p.throughput);
      lp50.push_back(p.late_p50);
      lp99.push_back(p.late_p99);
      lmax.push_back(p.late_max);
      p50.push_back(p.lat_p50);
      p99.push_back(p.lat_p99);
      lost += p.sent - p.answered;
    }
    const double med_p99 = median(lp99);
    std::printf("%10.0f %12.0f %10llu %14.3f %14.3f %14.3f %12.3f %12.3f\n", rate, median(thr),
                static_cast<unsigned long long>(lost), median(lp50), med_p99, median(lmax),
                median(p50), median(p99));
    std::fflush(stdout);
    if (lost == 0 && med_p99 <= a.lateness_ms && median(thr) >= 0.97 * rate) {
      sustained = rate;
    }
  }
  std::printf(
      "sustained (every request answered, median lateness p99 <= %g ms, throughput >= 97%% "
      "of offered): %.0f requests/s\n",
      a.lateness_ms, sustained);
  for (int threads : {1, 4, 16}) {
    std::printf("cpp-httplib blocking client, %2d threads, closed loop: %.0f requests/s\n", threads,
                httplib_closed_loop(server, body, threads, a.seconds));
  }
  return 0;
}
