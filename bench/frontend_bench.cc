// What the KServe v2 front end costs, in one process on loopback (no MPI): a controller whose
// nodes answer at once (zero service time), the HTTP front end, and client threads with
// keep-alive connections sending JSON bodies of the tiny model. Prints requests/s and latency
// through HTTP and, for comparison, through the controller alone (InferenceService::infer from
// threads), the difference being what HTTP adds; and the time to parse infer requests (JSON tiny
// and cifar10 inputs, a 224x224x3 binary input) and to encode an answer. --protocol grpc: the
// same through the gRPC front end (ModelInfer with raw_input_contents, one channel per client).
//   build/bench/bench_frontend [--seconds S] [--clients C] [--protocol http|grpc|both]
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serf/core/statistics.h"
#include "serve/controller.h"
#include "serve/http_frontend.h"
#include "serve/kserve.h"
#include "serve/metrics.h"
#include "serve/service.h"
#ifdef SERF_BENCH_GRPC
#include <grpcpp/grpcpp.h>

#include "kserve_v2.grpc.pb.h"
#include "serve/grpc_frontend.h"
#endif

using namespace serf;
using namespace serf::serve;
using Clock = std::chrono::steady_clock;

namespace {

// Nodes of zero service time: a request is answered at the next poll, its output its input.
class InstantTransport : public Transport {
 public:
  int nodes() const override { return 1; }
  Status configure(const Configuration&) override { return Status::Ok(); }
  Status send_run(int, const RunAction& a, const std::vector<float>& input) override {
    pending_.push_back({a, input});
    return Status::Ok();
  }
  StatusOr<std::optional<RunResult>> poll_result() override {
    if (pending_.empty()) return std::optional<RunResult>();
    RunResult r;
    r.request_id = pending_.front().first.request_id;
    r.slot = pending_.front().first.slot;
    output_ = std::move(pending_.front().second);
    r.payload_floats = static_cast<int32_t>(output_.size());
    pending_.erase(pending_.begin());
    return std::optional<RunResult>(r);
  }
  std::vector<float> take_output() override { return std::move(output_); }
  Status probe(int, double) override { return Status::Ok(); }
  Status shutdown() override { return Status::Ok(); }

 private:
  std::vector<std::pair<RunAction, std::vector<float>>> pending_;
  std::vector<float> output_;
};

ModelInfo model_of(std::vector<int64_t> in, std::vector<int64_t> out) {
  ModelInfo m;
  m.name = "m";
  m.input = {"input", "FP32", std::move(in)};
  m.output = {"output", "FP32", std::move(out)};
  return m;
}

std::string json_body(size_t n, const std::vector<int64_t>& shape) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = 0.001f * static_cast<float>(i % 1000) - 0.5f;
  nlohmann::json doc{
      {"inputs", {{{"name", "input"}, {"shape", shape}, {"datatype", "FP32"}, {"data", values}}}}};
  return doc.dump();
}

// Median microseconds of `fn` over `reps` runs (after one warm-up run).
template <typename Fn>
double time_us(int reps, Fn fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median(t);
}

void bench_parsing() {
  const ModelInfo tiny = model_of({1, 3, 12, 12}, {1, 10});
  const ModelInfo cifar = model_of({1, 3, 32, 32}, {1, 10});
  const ModelInfo imagenet = model_of({1, 3, 224, 224}, {1, 1000});
  const std::string tiny_body = json_body(432, {1, 3, 12, 12});
  const std::string cifar_body = json_body(3072, {1, 3, 32, 32});
  // 224x224x3 as Triton's binary tensor extension: JSON header, then the raw floats.
  const std::string header =
      nlohmann::json{{"inputs",
                      {{{"name", "input"},
                        {"shape", {1, 3, 224, 224}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", 150528 * 4}}}}}}}
          .dump();
  std::string binary = header;
  std::vector<float> pixels(150528, 0.25f);
  binary.append(reinterpret_cast<const char*>(pixels.data()), pixels.size() * 4);
  const double tiny_us = time_us(2000, [&] { (void)parse_infer_request(tiny, tiny_body, {}); });
  const double cifar_us = time_us(500, [&] { (void)parse_infer_request(cifar, cifar_body, {}); });
  const double bin_us =
      time_us(200, [&] { (void)parse_infer_request(imagenet, binary, header.size()); });
  InferCall call;
  std::vector<float> out(10, 0.1f);
  const double encode_us = time_us(2000, [&] { (void)encode_infer_response(tiny, call, out); });
  std::printf(
      "parse infer request, median of runs: tiny JSON (432 values, %zu B) %.1f us, "
      "cifar10 JSON (3072 values, %zu B) %.1f us, 224x224x3 binary (%zu B) %.1f us; "
      "encode a 10-value JSON answer %.1f us\n",
      tiny_body.size(), tiny_us, cifar_body.size(), cifar_us, binary.size(), bin_us, encode_us);
}

struct LoadResult {
  double rate_per_s = 0;
  std::vector<double> latency_us;
};

// `clients` threads, each sending requests back to back for `seconds` through `send`.
template <typename Send>
LoadResult closed_loop(int clients, double seconds, Send send) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::atomic<bool> stop{false};
  std::atomic<long> failed{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto state = send.make();
      while (!stop) {
        const auto s = Clock::now();
        if (!send.one(state)) ++failed;
        lat[static_cast<size_t>(c)].push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - s).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  LoadResult r;
  for (auto& l : lat) r.latency_us.insert(r.latency_us.end(), l.begin(), l.end());
  r.rate_per_s = static_cast<double>(r.latency_us.size()) / took;
  if (failed > 0) std::printf("  (%ld requests failed)\n", failed.load());
  return r;
}

// The median of a Prometheus histogram in `text`, interpolated linearly inside the bucket that
// holds it (as PromQL's histogram_quantile does).
double histogram_median(const std::string& text, const std::string& name) {
  const std::string key = name + "_bucket{le=\"";
  double total = 0, lower = 0, below = 0;
  std::vector<std::pair<double, double>> buckets;  // (upper bound, cumulative count)
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const char* p = text.c_str() + at + key.size();
    const double le = std::strncmp(p, "+Inf", 4) == 0 ? INFINITY : std::atof(p);
    const double n = std::atof(std::strchr(p, '}') + 1);
    buckets.emplace_back(le, n);
    total = n;
  }
  for (const auto& [le, n] : buckets) {
    if (n >= total / 2 && n > below) {
      if (std::isinf(le)) return lower;
      return lower + (le - lower) * (total / 2 - below) / (n - below);
    }
    lower = le;
    below = n;
  }
  return 0;
}

#ifdef SERF_BENCH_GRPC
// One channel (one HTTP/2 connection) per client thread; the request is built once.
struct GrpcSend {
  std::string target;
  const std::vector<float>* input;
  struct State {
    std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
    inference::ModelInferRequest request;
  };
  std::unique_ptr<State> make() {
    auto s = std::make_unique<State>();
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // not one connection shared by all
    s->stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    s->request.set_model_name("m");
    auto* in = s->request.add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    for (int64_t d : {1, 3, 12, 12}) in->add_shape(d);
    s->request.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(input->data()), input->size() * 4));
    return s;
  }
  bool one(std::unique_ptr<State>& s) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse res;
    return s->stub->ModelInfer(&ctx, s->request, &res).ok();
  }
};
#endif

// The server's own account: parsing and hand-over, encoding and sending (serf_frontend_*).
void frontend_time(const std::string& text) {
  auto value = [&](const std::string& key) {
    const auto at = text.find("\n" + key + " ");
    return at == std::string::npos ? 0.0 : std::atof(text.c_str() + at + key.size() + 2);
  };
  const double count = value("serf_frontend_duration_seconds_count");
  if (count == 0) return;
  std::printf(
      "front end's own time per answered request (serf_frontend_duration_seconds): "
      "mean %.1f us, p50 %.1f us (interpolated in its histogram's bucket) over %.0f requests\n",
      value("serf_frontend_duration_seconds_sum") / count * 1e6,
      histogram_median(text, "serf_frontend_duration_seconds") * 1e6, count);
}

void report(const char* what, const LoadResult& r) {
  std::printf("%-34s %9.0f requests/s   latency p50 %7.1f us  p99 %7.1f us\n", what, r.rate_per_s,
              median(r.latency_us), quantile(r.latency_us, 0.99));
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  int clients = 4;
  std::string protocol = "http";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seconds") seconds = std::atof(argv[i + 1]);
    if (std::string(argv[i]) == "--clients") clients = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--protocol") protocol = argv[i + 1];
  }
  if (protocol != "http" && protocol != "grpc" && protocol != "both") {
    std::fprintf(stderr, "bench_frontend: --protocol %s: expected http, grpc or both\n",
                 protocol.c_str());
    return 2;
  }
#ifndef SERF_BENCH_GRPC
  if (protocol != "http") {
    std::fprintf(stderr, "bench_frontend: --protocol %s: this build has no gRPC front end\n",
                 protocol.c_str());
    return 2;
  }
#endif
  bench_parsing();
  InstantTransport transport;
  ControllerOptions o;
  Controller controller(transport, o);
  if (!controller.configure({1, 1, 1}).ok()) return 1;
  ServeMetrics metrics;
  controller.add_answer_hook([&](const RequestRecord& r) { metrics.record(r); });
  const ModelInfo tiny = model_of({1, 3, 12, 12}, {1, 432});
  InferenceService service(controller, tiny, &metrics);
  std::thread loop([&] { (void)controller.serve(nullptr); });
  const std::string body = json_body(432, {1, 3, 12, 12});
  std::vector<float> input(432, 0.5f);
  struct Direct {
    InferenceService* s;
    const std::vector<float>* in;
    int make() { return 0; }
    bool one(int) { return s->infer(*in, Clock::now(), 0).outcome == Outcome::kAnswered; }
  };
  struct Http {
    int port;
    const std::string* body;
    std::unique_ptr<httplib::Client> make() {
      auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
      // cpp-httplib writes the headers and the body in two sends: without TCP_NODELAY the body
      // waits for the server's delayed ACK of the headers (Nagle), milliseconds per request.
      c->set_tcp_nodelay(true);
      c->set_keep_alive(true);
      return c;
    }
    bool one(std::unique_ptr<httplib::Client>& c) {
      auto r = c->Post("/v2/models/m/infer", *body, "application/json");
      return r && r->status == 200;
    }
  };
  std::printf(
      "%d client threads, %.0f s each, zero service time, tiny model (432 floats in, 432 "
      "out), %u hardware threads\n",
      clients, seconds, std::thread::hardware_concurrency());
  const LoadResult direct = closed_loop(clients, seconds, Direct{&service, &input});
  report("controller alone (no HTTP)", direct);
  if (protocol != "grpc") {
    HttpOptions ho;
    ho.port = 0;
    auto http = HttpFrontend::Start(service, ho);
    if (!http.ok()) return 1;
    const LoadResult over_http = closed_loop(clients, seconds, Http{(*http)->port(), &body});
    report("HTTP/1.1 keep-alive, JSON bodies", over_http);
    std::printf("HTTP adds %.1f us at the median (client to client, loopback)\n",
                median(over_http.latency_us) - median(direct.latency_us));
    frontend_time(metrics.prometheus_text(controller.live()));
    (*http)->stop();
  }
#ifdef SERF_BENCH_GRPC
  if (protocol != "http") {
    // A service of its own, so that its front-end times are not mixed with HTTP's.
    ServeMetrics grpc_metrics;
    InferenceService grpc_service(controller, tiny, &grpc_metrics);
    GrpcOptions go;
    go.port = 0;
    auto grpc = GrpcFrontend::Start(grpc_service, go);
    if (!grpc.ok()) return 1;
    const std::string target = "127.0.0.1:" + std::to_string((*grpc)->port());
    const LoadResult over_grpc = closed_loop(clients, seconds, GrpcSend{target, &input});
    report("gRPC ModelInfer, raw_input_contents", over_grpc);
    std::printf("gRPC adds %.1f us at the median (client to client, loopback)\n",
                median(over_grpc.latency_us) - median(direct.latency_us));
    frontend_time(grpc_metrics.prometheus_text(controller.live()));
    (*grpc)->stop();
  }
#endif
  controller.request_stop();
  loop.join();
  return 0;
}
