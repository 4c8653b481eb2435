#include "serve/load/grpc_channel.h"

#include <grpcpp/grpcpp.h>

#include <set>
#include <thread>

#include "kserve_v2.grpc.pb.h"
#include "serf/core/statistics.h"

namespace serf::serve::load {

namespace {

using grpc::StatusCode;

std::shared_ptr<grpc::Channel> open_channel(const Endpoint& to) {
  grpc::ChannelArguments args;
  // Each channel its own connection (channels to one address share subchannels by default).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(to.text(), grpc::InsecureChannelCredentials(), args);
}

std::chrono::system_clock::time_point in_seconds(double s) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(s));
}

int http_status_of(StatusCode code) {
  switch (code) {
    case StatusCode::OK:
      return 200;
    case StatusCode::INVALID_ARGUMENT:
      return 400;
    case StatusCode::NOT_FOUND:
      return 404;
    case StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case StatusCode::UNIMPLEMENTED:
      return 501;
    case StatusCode::UNAVAILABLE:
      return 503;
    case StatusCode::DEADLINE_EXCEEDED:
      return 504;
    case StatusCode::INTERNAL:
      return 500;
    default:
      return kStatusError;
  }
}

class GrpcChannel : public LoadChannel {
 public:
  GrpcChannel(const Endpoint& to, int channels, double timeout_s,
              inference::ModelInferRequest request)
      : timeout_s_(timeout_s), request_(std::move(request)) {
    for (int i = 0; i < std::max(channels, 1); ++i) {
      stubs_.push_back(inference::GRPCInferenceService::NewStub(open_channel(to)));
    }
  }
  ~GrpcChannel() override {
    for (Call* c : calls_) c->ctx.TryCancel();
    void* tag = nullptr;
    bool ok = false;
    while (in_flight_ > 0 && cq_.Next(&tag, &ok)) {
      delete static_cast<Call*>(tag);
      --in_flight_;
    }
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) {
    }
  }

  void send(uint64_t id) override {
    auto* c = new Call;
    c->id = id;
    c->ctx.set_deadline(in_seconds(timeout_s_));
    c->sent = Clock::now();
    c->reader = stubs_[next_++ % stubs_.size()]->PrepareAsyncModelInfer(&c->ctx, request_, &cq_);
    c->reader->StartCall();
    c->reader->Finish(&c->reply, &c->status, c);
    calls_.insert(c);
    ++in_flight_;
  }

  void poll(Clock::time_point until, const CompletionFn& done) override {
    const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now());
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_nanos(std::max<int64_t>(wait.count(), 0), GPR_TIMESPAN));
    void* tag = nullptr;
    bool ok = false;
    // The first wait until `until`, then whatever else is ready already.
    while (cq_.AsyncNext(&tag, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT) {
      auto* c = static_cast<Call*>(tag);
      finish(c, done);
      deadline = gpr_time_0(GPR_CLOCK_MONOTONIC);
    }
  }

  size_t in_flight() const override { return in_flight_; }
  size_t waiting() const override { return 0; }
  size_t connections() const override { return stubs_.size(); }

 private:
  struct Call {
    uint64_t id = 0;
    grpc::ClientContext ctx;
    Clock::time_point sent;
    inference::ModelInferResponse reply;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
  };

  void finish(Call* c, const CompletionFn& done) {
    const Clock::time_point now = Clock::now();
    int status = http_status_of(c->status.error_code());
    if (c->status.error_code() == StatusCode::DEADLINE_EXCEEDED &&
        std::chrono::duration<double>(now - c->sent).count() >= timeout_s_) {
      status = kStatusTimeout;  // the client's deadline, not the server's queue timeout
    }
    const std::string message =
        c->status.ok() ? std::string()
                       : "gRPC " + std::to_string(static_cast<int>(c->status.error_code())) + ": " +
                             c->status.error_message();
    done({c->id, status, c->sent, now, {}, message});
    calls_.erase(c);
    delete c;
    --in_flight_;
  }

  double timeout_s_;
  inference::ModelInferRequest request_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  grpc::CompletionQueue cq_;
  std::set<Call*> calls_;
  size_t in_flight_ = 0;
  size_t next_ = 0;
};

}  // namespace

StatusOr<ServedModel> grpc_model_metadata(const Endpoint& to, const std::string& model,
                                          double ready_wait_s) {
  auto stub = inference::GRPCInferenceService::NewStub(open_channel(to));
  inference::ModelMetadataRequest req;
  req.set_name(model);
  inference::ModelMetadataResponse meta;
  grpc::ClientContext ctx;
  ctx.set_deadline(in_seconds(5));
  const grpc::Status st = stub->ModelMetadata(&ctx, req, &meta);
  if (st.error_code() == StatusCode::UNAVAILABLE ||
      st.error_code() == StatusCode::DEADLINE_EXCEEDED) {
    return InvalidArgument("--url " + to.text() + ": cannot reach a KServe v2 gRPC server (" +
                           st.error_message() + "); is `serf serve --grpc` running there?");
  }
  if (!st.ok()) {
    return InvalidArgument("--model " + model + ": the server at " + to.text() +
                           " answers: " + st.error_message());
  }
  if (meta.inputs_size() == 0 || meta.outputs_size() == 0) {
    return InvalidArgument("--model " + model + ": the server's metadata names no input or output");
  }
  ServedModel m;
  m.name = meta.name();
  m.platform = meta.platform();
  m.input = meta.inputs(0).name();
  m.input_datatype = meta.inputs(0).datatype();
  if (m.input_datatype != "FP32") {
    return InvalidArgument("--model " + model + ": input datatype " + m.input_datatype +
                           "; serf load sends FP32 only");
  }
  for (int64_t d : meta.inputs(0).shape()) m.input_shape.push_back(d < 0 ? 1 : d);
  m.output = meta.outputs(0).name();
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(ready_wait_s));
  for (;;) {
    inference::ModelReadyRequest rr;
    rr.set_name(model);
    inference::ModelReadyResponse ready;
    grpc::ClientContext rctx;
    rctx.set_deadline(in_seconds(5));
    if (stub->ModelReady(&rctx, rr, &ready).ok() && ready.ready()) return m;
    if (std::chrono::steady_clock::now() >= until) {
      return InvalidArgument("--model " + model + ": not ready at " + to.text() + " within " +
                             format_g(ready_wait_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

StatusOr<std::unique_ptr<LoadChannel>> make_grpc_channel(const Endpoint& to,
                                                         const ServedModel& model,
                                                         const std::vector<float>& input,
                                                         const LoadOptions& options) {
  inference::ModelInferRequest req;
  req.set_model_name(options.model);
  auto* in = req.add_inputs();
  in->set_name(model.input);
  in->set_datatype("FP32");
  for (int64_t d : model.input_shape) in->add_shape(d);
  if (options.binary) {
    req.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(input.data()), input.size() * sizeof(float)));
  } else {
    for (float v : input) in->mutable_contents()->add_fp32_contents(v);
  }
  return std::unique_ptr<LoadChannel>(
      new GrpcChannel(to, options.connections, options.timeout_s, std::move(req)));
}

}  // namespace serf::serve::load
