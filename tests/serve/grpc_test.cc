// The KServe v2 gRPC front end over loopback, against a controller on a fake transport (no MPI):
// health and metadata, raw and typed tensors, classification, bad requests, UNAVAILABLE and
// DEADLINE_EXCEEDED.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "fake_transport.h"
#include "kserve_v2.grpc.pb.h"
#include "raw_socket.h"
#include "serve/grpc_frontend.h"
#include "serve/metrics.h"
#include "serve/service.h"

using namespace serf;
using namespace serf::serve;
using serf::serve::testing::connect_to;
using serf::serve::testing::read_all;

namespace {

struct Server {
  explicit Server(double service_s = 1e-3, size_t max_queue = kUnboundedQueue, int nodes = 2,
                  size_t max_message_bytes = 64u << 20, double read_timeout_s = 10,
                  double max_connection_age_s = 60)
      : transport(nodes, service_s), controller(transport, options(max_queue)) {
    REQUIRE(controller.configure({1, 1, 1}).ok());
    controller.add_answer_hook([this](const RequestRecord& r) { metrics.record(r); });
    ModelInfo m;
    m.name = "m";
    m.input = {"input", "FP32", {1, 2, 2}};
    m.output = {"output", "FP32", {1, 4}};
    service = std::make_unique<InferenceService>(controller, m, &metrics);
    loop = std::thread([this] { status = controller.serve(nullptr); });
    GrpcOptions o;
    o.port = 0;
    o.max_message_bytes = max_message_bytes;
    o.read_timeout_s = read_timeout_s;
    o.max_connection_age_s = max_connection_age_s;
    auto started = GrpcFrontend::Start(*service, o);
    REQUIRE(started.ok());
    grpc = std::move(started).value();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc->port()),
                                  grpc::InsecureChannelCredentials());
    stub = inference::GRPCInferenceService::NewStub(channel);
  }
  ~Server() { stop(); }
  void stop() {
    if (!loop.joinable()) return;
    controller.request_stop();
    loop.join();
    grpc->stop();
  }
  static ControllerOptions options(size_t max_queue) {
    ControllerOptions o;
    o.max_queue = max_queue;
    return o;
  }
  grpc::Status infer(const inference::ModelInferRequest& req, inference::ModelInferResponse* res) {
    grpc::ClientContext ctx;
    return stub->ModelInfer(&ctx, req, res);
  }

  FakeTransport transport;
  Controller controller;
  ServeMetrics metrics;
  std::unique_ptr<InferenceService> service;
  std::unique_ptr<GrpcFrontend> grpc;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
  std::thread loop;
  Status status;
};

inference::ModelInferRequest request(const std::vector<float>& values, bool raw = true) {
  inference::ModelInferRequest req;
  req.set_model_name("m");
  auto* in = req.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (int64_t d : {1, 2, 2}) in->add_shape(d);
  if (raw) {
    req.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  } else {
    for (float v : values) in->mutable_contents()->add_fp32_contents(v);
  }
  return req;
}

// A generic ModelInfer call that sends its headers and then nothing (no message, no half-close),
// on a channel of its own, with the completion queue its tags arrive on (1: started, 2: ended).
struct HeadersOnlyCall {
  explicit HeadersOnlyCall(int port)
      : channel(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                    grpc::InsecureChannelCredentials())),
        generic(channel) {
    call = generic.PrepareCall(&ctx, "/inference.GRPCInferenceService/ModelInfer", &cq);
    call->StartCall(reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    REQUIRE(cq.Next(&tag, &ok));
    REQUIRE(ok);
    call->Finish(&status, reinterpret_cast<void*>(2));
  }
  ~HeadersOnlyCall() {
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
  }
  // Waits up to 10 s for the call to end (its status is then in `status`).
  void wait_end() {
    void* tag = nullptr;
    bool ok = false;
    const auto limit = std::chrono::system_clock::now() + std::chrono::seconds(10);
    REQUIRE(cq.AsyncNext(&tag, &ok, limit) == grpc::CompletionQueue::GOT_EVENT);
    REQUIRE(tag == reinterpret_cast<void*>(2));
  }
  std::shared_ptr<grpc::Channel> channel;
  grpc::GenericStub generic;
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call;
  grpc::Status status;
};

std::vector<float> raw_output(const inference::ModelInferResponse& res) {
  REQUIRE(res.raw_output_contents_size() == 1);
  const std::string& raw = res.raw_output_contents(0);
  std::vector<float> out(raw.size() / sizeof(float));
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

}  // namespace

TEST_CASE("gRPC health and metadata", "[serve][grpc]") {
  Server s;
  grpc::ClientContext c1, c2, c3, c4, c5, c6;
  inference::ServerLiveResponse live;
  REQUIRE(s.stub->ServerLive(&c1, {}, &live).ok());
  REQUIRE(live.live());
  inference::ServerReadyResponse ready;
  REQUIRE(s.stub->ServerReady(&c2, {}, &ready).ok());
  REQUIRE(ready.ready());
  inference::ModelReadyRequest mr;
  mr.set_name("m");
  inference::ModelReadyResponse model_ready;
  REQUIRE(s.stub->ModelReady(&c3, mr, &model_ready).ok());
  REQUIRE(model_ready.ready());
  inference::ServerMetadataResponse server;
  REQUIRE(s.stub->ServerMetadata(&c4, {}, &server).ok());
  REQUIRE(server.name() == "serf");
  REQUIRE(server.extensions_size() == 3);
  inference::ModelMetadataRequest mm;
  mm.set_name("m");
  inference::ModelMetadataResponse meta;
  REQUIRE(s.stub->ModelMetadata(&c5, mm, &meta).ok());
  REQUIRE(meta.inputs(0).shape_size() == 3);
  REQUIRE(meta.outputs(0).name() == "output");
  mm.set_name("x");
  grpc::Status unknown = s.stub->ModelMetadata(&c6, mm, &meta);
  REQUIRE(unknown.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(unknown.error_message().find("unknown model \"x\"") != std::string::npos);
}

TEST_CASE("gRPC ModelInfer: raw and typed inputs, raw outputs, classification", "[serve][grpc]") {
  Server s;
  inference::ModelInferResponse res;
  auto req = request({1, 2, 3, 4});
  req.set_id("r1");
  grpc::Status st = s.infer(req, &res);
  REQUIRE(st.ok());
  REQUIRE(res.id() == "r1");
  REQUIRE(res.outputs(0).datatype() == "FP32");
  REQUIRE(res.outputs(0).shape_size() == 2);
  REQUIRE(raw_output(res) == std::vector<float>{2, 3, 4, 5});
  inference::ModelInferResponse typed;
  REQUIRE(s.infer(request({0.5f, 0, 0, 9}, false), &typed).ok());
  REQUIRE(raw_output(typed) == std::vector<float>{1.5f, 1, 1, 10});
  auto top = request({1, 7, 3, 4});
  auto* out = top.add_outputs();
  out->set_name("output");
  (*out->mutable_parameters())["classification"].set_int64_param(1);
  inference::ModelInferResponse cls;
  REQUIRE(s.infer(top, &cls).ok());
  REQUIRE(cls.outputs(0).datatype() == "BYTES");
  const std::string& raw = cls.raw_output_contents(0);
  REQUIRE(raw.size() == 4 + std::strlen("8.000000:1"));
  REQUIRE(raw.substr(4) == "8.000000:1");
}

TEST_CASE("gRPC bad requests are INVALID_ARGUMENT naming what is wrong", "[serve][grpc]") {
  Server s;
  struct Case {
    inference::ModelInferRequest req;
    std::string text;
  };
  std::vector<Case> cases;
  auto short_raw = request({1, 2, 3});
  cases.push_back({short_raw, "raw_input_contents[0]: 12 bytes, but 4 FP32 values take 16"});
  auto typed = request({1, 2, 3}, false);
  cases.push_back({typed, "3 fp32_contents, but the shape holds 4"});
  auto name = request({1, 2, 3, 4});
  name.mutable_inputs(0)->set_name("image");
  cases.push_back({name, "unknown input \"image\""});
  auto shape = request({1, 2, 3, 4});
  shape.mutable_inputs(0)->set_shape(1, 4);
  cases.push_back({shape, "shape [1, 4, 2], the model takes [1, 2, 2]"});
  auto type = request({1, 2, 3, 4});
  type.mutable_inputs(0)->set_datatype("FP16");
  cases.push_back({type, "datatype FP16"});
  auto model = request({1, 2, 3, 4});
  model.set_model_name("other");
  cases.push_back({model, "unknown model \"other\""});
  auto timeout = request({1, 2, 3, 4});
  (*timeout.mutable_parameters())["timeout"].set_int64_param(-1);
  cases.push_back({timeout, "parameters.timeout: -1"});
  auto nan = request({1, 2, NAN, 4});
  cases.push_back({nan, "NaN or infinity"});
  for (const Case& k : cases) {
    inference::ModelInferResponse res;
    grpc::Status st = s.infer(k.req, &res);
    INFO(st.error_message());
    REQUIRE(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE(st.error_message().find(k.text) != std::string::npos);
  }
  inference::ModelInferResponse res;
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());
  REQUIRE(s.metrics.prometheus_text(s.controller.live())
              .find("serf_invalid_requests_total{protocol=\"grpc\"} " +
                    std::to_string(cases.size())) != std::string::npos);
}

TEST_CASE("gRPC: a full queue is UNAVAILABLE, a timeout passed in the queue DEADLINE_EXCEEDED",
          "[serve][grpc]") {
  Server s(0.2, 0);
  std::vector<std::future<grpc::Status>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(std::async(std::launch::async, [&s] {
      inference::ModelInferResponse res;
      return s.infer(request({1, 2, 3, 4}), &res);
    }));
  }
  int ok = 0, unavailable = 0;
  for (auto& f : calls) {
    grpc::Status st = f.get();
    ok += st.ok() ? 1 : 0;
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      ++unavailable;
      REQUIRE(st.error_message().find("is full") != std::string::npos);
    }
  }
  REQUIRE(ok >= 1);
  REQUIRE(ok + unavailable == 6);
  Server t(0.2, 8);
  std::vector<std::future<grpc::Status>> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(std::async(std::launch::async, [&t] {
      inference::ModelInferResponse res;
      return t.infer(request({1, 2, 3, 4}), &res);
    }));
  }
  REQUIRE(wait_received(t.controller, 2));
  std::vector<std::future<grpc::Status>> late;
  for (int i = 0; i < 4; ++i) {
    late.push_back(std::async(std::launch::async, [&t] {
      auto req = request({1, 2, 3, 4});
      (*req.mutable_parameters())["timeout"].set_int64_param(20000);
      inference::ModelInferResponse res;
      return t.infer(req, &res);
    }));
  }
  int exceeded = 0;
  for (auto& f : late) exceeded += f.get().error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  REQUIRE(exceeded >= 2);
  for (auto& f : busy) REQUIRE(f.get().ok());
}

TEST_CASE("gRPC: more calls at once than the old thread quota all reach the controller",
          "[serve][grpc]") {
  // The synchronous server refused calls past its 64 threads with RESOURCE_EXHAUSTED before the
  // controller saw them; now 200 calls wait in SERF's own (here unbounded) queue and all are
  // answered, and the controller counts every one.
  constexpr int kCalls = 200;
  Server s(0.01);
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    inference::ModelInferResponse res;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
  };
  std::vector<std::unique_ptr<Call>> calls;
  const auto req = request({1, 2, 3, 4});
  for (int i = 0; i < kCalls; ++i) {
    auto c = std::make_unique<Call>();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    c->reader = s.stub->AsyncModelInfer(&c->ctx, req, &cq);
    c->reader->Finish(&c->res, &c->status, c.get());
    calls.push_back(std::move(c));
  }
  // Two units of one slot, 10 ms a request: the backlog takes about a second to clear, so most
  // of the calls are inside the controller at once.
  REQUIRE(wait_received(s.controller, 100));
  int ok = 0;
  std::map<int, int> codes;
  for (int i = 0; i < kCalls; ++i) {
    void* tag = nullptr;
    bool fine = false;
    REQUIRE(cq.Next(&tag, &fine));
    const Call* c = static_cast<const Call*>(tag);
    if (c->status.ok()) {
      ++ok;
      REQUIRE(raw_output(c->res) == std::vector<float>{2, 3, 4, 5});
    }
    ++codes[static_cast<int>(c->status.error_code())];
  }
  INFO("status codes: " << codes.size() << " kinds; RESOURCE_EXHAUSTED "
                        << codes[grpc::StatusCode::RESOURCE_EXHAUSTED]);
  REQUIRE(ok == kCalls);
  const std::string text = s.metrics.prometheus_text(s.controller.live());
  REQUIRE(text.find("serf_requests_total{outcome=\"answered\"} " + std::to_string(kCalls)) !=
          std::string::npos);
}

TEST_CASE("gRPC: a call cancelled while queued is dropped before dispatch, counted timed out",
          "[serve][grpc]") {
  Server s(0.3, kUnboundedQueue, 1);  // one unit of one slot, 300 ms a request
  auto busy = std::async(std::launch::async, [&s] {
    inference::ModelInferResponse res;
    return s.infer(request({1, 2, 3, 4}), &res);
  });
  REQUIRE(wait_received(s.controller, 1));
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  inference::ModelInferResponse res;
  grpc::Status status;
  auto reader = s.stub->AsyncModelInfer(&ctx, request({5, 6, 7, 8}), &cq);
  reader->Finish(&res, &status, &ctx);
  REQUIRE(wait_received(s.controller, 2));  // queued behind the busy slot
  ctx.TryCancel();
  void* tag = nullptr;
  bool fine = false;
  REQUIRE(cq.Next(&tag, &fine));
  REQUIRE(status.error_code() == grpc::StatusCode::CANCELLED);
  REQUIRE(busy.get().ok());
  check_dropped_before_dispatch(s);  // counted as timed out, never sent to a node
}

TEST_CASE("gRPC: every message over --max-body-mb is refused by SERF and counted, however large",
          "[serve][grpc]") {
  Server s(1e-3, kUnboundedQueue, 2, 1u << 20);
  for (size_t mib : {2, 3, 9}) {  // up to 2 MiB gRPC itself refused those over 2 MiB, uncounted
    auto req = request({1, 2, 3, 4});
    req.set_raw_input_contents(0, std::string(mib << 20, '\0'));
    inference::ModelInferResponse res;
    const grpc::Status st = s.infer(req, &res);
    INFO(mib << " MiB: " << st.error_message());
    REQUIRE(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    REQUIRE(st.error_message().find("--max-body-mb 1") != std::string::npos);
  }
  inference::ModelInferResponse res;
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());  // still serving
  REQUIRE(raw_output(res) == std::vector<float>{2, 3, 4, 5});
  const std::string text = s.metrics.prometheus_text(s.controller.live());
  REQUIRE(text.find("serf_invalid_requests_total{protocol=\"grpc\"} 3") != std::string::npos);
}

TEST_CASE("gRPC: a connection that does not open within the read timeout is closed; calls go on",
          "[serve][grpc]") {
  // HTTP's slow heads have gRPC's like in a connection's opening: its HTTP/2 preface and settings
  // (gRPC's server handshake timeout, set to --read-timeout). One connection sends nothing, one
  // the preface a byte every 200 ms (4.8 s for 24 bytes): both are closed after the read timeout
  // (0.5 s), and a call on a channel of its own is answered meanwhile. A slow call past its
  // opening holds no thread (the callback API), so it cannot hold the others.
  Server s(1e-3, kUnboundedQueue, 2, 64u << 20, 0.5);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const int idle = connect_to(s.grpc->port()), slow = connect_to(s.grpc->port());
  std::thread trickle([slow] {
    for (char ch : std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) {
      if (::send(slow, &ch, 1, MSG_NOSIGNAL) <= 0) return;  // closed by the server
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  inference::ModelInferResponse res;
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());
  REQUIRE(raw_output(res) == std::vector<float>{2, 3, 4, 5});
  for (const int fd : {idle, slow}) {
    read_all(fd, 10.0);  // until the server closes (or resets) it
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO((fd == idle ? "silent" : "slow preface") << ": closed after " << took << " s");
    REQUIRE(took >= 0.45);
    REQUIRE(took < 2.5);
  }
  trickle.join();
  ::close(idle);
  ::close(slow);
}

TEST_CASE("gRPC: a call that opens and never sends its message is ended by the connection's age",
          "[serve][grpc]") {
  // Past the opening a unary call reaches no handler before its message is whole, and gRPC's
  // defaults never end such a call (before session 30 this one stayed open for as long as the
  // client liked). Now its connection is told GOAWAY at --grpc-max-connection-age (1 s here,
  // gRPC adds up to 10 % jitter) and closed --read-timeout (0.5 s) later, which ends the call.
  // Good calls on the same server are answered before, during and after.
  Server s(1e-3, kUnboundedQueue, 2, 64u << 20, 0.5, 1.0);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  HeadersOnlyCall cut(s.grpc->port());
  inference::ModelInferResponse res;
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());
  cut.wait_end();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO("the call ended after " << took << " s: " << cut.status.error_code() << " "
                               << cut.status.error_message());
  REQUIRE(!cut.status.ok());
  REQUIRE(took >= 0.85);  // not before the age (less the jitter)
  REQUIRE(took < 3.0);    // the age, its jitter and the 0.5 s grace, with room for a loaded host
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());  // its client reconnects
  REQUIRE(raw_output(res) == std::vector<float>{2, 3, 4, 5});
}

TEST_CASE("gRPC: a call cut by the connection's age is counted: /metrics and the accounting",
          "[serve][grpc]") {
  // The call of the case above ended unseen before session 31: gRPC hands a unary call to no
  // handler before its message is whole, so neither /metrics nor rank 0's received = answered +
  // rejected + timed out + failed knew of it. Now ModelInfer is taken when its headers come and
  // a call that ends without its message is counted: serf_grpc_cut_calls_total, and received and
  // timed out (its record in the run's requests, as --out writes them). Age 1 s, read timeout
  // 0.5 s; one good call before the cut and one after.
  Server s(1e-3, kUnboundedQueue, 2, 64u << 20, 0.5, 1.0);
  HeadersOnlyCall cut(s.grpc->port());
  inference::ModelInferResponse res;
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());
  cut.wait_end();
  REQUIRE(!cut.status.ok());
  REQUIRE(s.infer(request({1, 2, 3, 4}), &res).ok());
  {
    // A call whose client ends its side without a message is answered, not cut: invalid.
    grpc::CompletionQueue& cq = cut.cq;
    void* tag = nullptr;
    bool ok = false;
    grpc::ClientContext empty_ctx;
    auto empty =
        cut.generic.PrepareCall(&empty_ctx, "/inference.GRPCInferenceService/ModelInfer", &cq);
    empty->StartCall(reinterpret_cast<void*>(3));
    REQUIRE(cq.Next(&tag, &ok));
    empty->WritesDone(reinterpret_cast<void*>(4));
    REQUIRE(cq.Next(&tag, &ok));
    grpc::Status empty_status;
    empty->Finish(&empty_status, reinterpret_cast<void*>(5));
    REQUIRE(cq.Next(&tag, &ok));
    REQUIRE(tag == reinterpret_cast<void*>(5));
    INFO(empty_status.error_message());
    REQUIRE(empty_status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE(empty_status.error_message().find("without a request message") != std::string::npos);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.controller.live().counts.timed_out == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string text = s.metrics.prometheus_text(s.controller.live());
  s.stop();
  INFO(text);
  REQUIRE(text.find("serf_grpc_cut_calls_total 1\n") != std::string::npos);
  REQUIRE(text.find("serf_requests_total{outcome=\"timed_out\"} 1\n") != std::string::npos);
  REQUIRE(text.find("serf_invalid_requests_total{protocol=\"grpc\"} 1\n") != std::string::npos);
  const OutcomeCounts n = s.controller.counts();
  INFO(accounting_line(n));
  REQUIRE(n.balanced());
  REQUIRE(n.received == 3);
  REQUIRE(n.answered == 2);
  REQUIRE(n.timed_out == 1);
  REQUIRE(s.transport.sent == 2);  // never dispatched
  int cut_records = 0;
  for (const RequestRecord& r : s.controller.records()) {
    if (r.client && r.outcome == Outcome::kTimedOut && r.dispatch_s == 0) ++cut_records;
  }
  REQUIRE(cut_records == 1);
}
