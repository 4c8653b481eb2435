#include "serve/grpc_frontend.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "kserve_v2.grpc.pb.h"
#include "serve/kserve.h"
#include "serve/metrics.h"

namespace serf::serve {

namespace {

using Clock = std::chrono::steady_clock;
using grpc::StatusCode;
using nlohmann::json;

grpc::Status invalid(const Status& st) {
  return grpc::Status(StatusCode::INVALID_ARGUMENT, st.message());
}

// The protocol's parameters as JSON, so the HTTP checks apply unchanged.
json parameters_json(const google::protobuf::Map<std::string, inference::InferParameter>& map) {
  json out = json::object();
  for (const auto& [key, p] : map) {
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        out[key] = p.bool_param();
        break;
      case inference::InferParameter::kInt64Param:
        out[key] = p.int64_param();
        break;
      case inference::InferParameter::kStringParam:
        out[key] = p.string_param();
        break;
      case inference::InferParameter::kDoubleParam:
        out[key] = p.double_param();
        break;
      case inference::InferParameter::kUint64Param:
        out[key] = p.uint64_param();
        break;
      default:
        break;
    }
  }
  return out;
}

// Typed contents other than fp32_contents: an FP32 input cannot take them (they were ignored,
// and the error spoke of 0 fp32_contents).
Status check_other_contents(const inference::ModelInferRequest::InferInputTensor& in) {
  const inference::InferTensorContents& c = in.contents();
  const std::pair<const char*, int> others[] = {
      {"bool_contents", c.bool_contents_size()},     {"int_contents", c.int_contents_size()},
      {"int64_contents", c.int64_contents_size()},   {"uint_contents", c.uint_contents_size()},
      {"uint64_contents", c.uint64_contents_size()}, {"fp64_contents", c.fp64_contents_size()},
      {"bytes_contents", c.bytes_contents_size()}};
  for (const auto& [field, n] : others) {
    if (n > 0) {
      return InvalidArgument("input \"" + in.name() + "\": " + field + " given for an " +
                             in.datatype() + " input; give fp32_contents or raw_input_contents");
    }
  }
  return Status::Ok();
}

// The input tensor's values from raw_input_contents or contents.fp32_contents.
Status read_input(const ModelInfo& model, const inference::ModelInferRequest& req,
                  std::vector<float>* values) {
  if (req.inputs_size() != 1) {
    return InvalidArgument("inputs: expected the one input \"" + model.input.name + "\", got " +
                           std::to_string(req.inputs_size()));
  }
  const auto& in = req.inputs(0);
  std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
  SERF_RETURN_IF_ERROR(check_input(model, in.name(), in.datatype(), shape));
  SERF_RETURN_IF_ERROR(check_other_contents(in));
  // A model of any shape (emulated, no spec) takes the client's: its product must not overflow
  // (a shape of 2^62 x 4 wrapped to 0 values and was answered).
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("input \"" + in.name() + "\": a negative dimension");
    if (d != 0 && elements > std::numeric_limits<int64_t>::max() / 4 / d) {
      return InvalidArgument("input \"" + in.name() + "\": shape " + shape_text(shape) +
                             " holds more values than a message can carry");
    }
    elements *= d;
  }
  const bool typed = in.contents().fp32_contents_size() > 0;
  if (req.raw_input_contents_size() > 0) {
    if (typed) return InvalidArgument("input \"" + in.name() + "\": both raw and typed contents");
    if (req.raw_input_contents_size() != 1) {
      return InvalidArgument(
          "raw_input_contents: " + std::to_string(req.raw_input_contents_size()) +
          " entries for 1 input");
    }
    const std::string& raw = req.raw_input_contents(0);
    if (raw.size() != static_cast<size_t>(elements) * sizeof(float)) {
      return InvalidArgument("raw_input_contents[0]: " + std::to_string(raw.size()) +
                             " bytes, but " + std::to_string(elements) + " FP32 values take " +
                             std::to_string(elements * 4));
    }
    values->resize(static_cast<size_t>(elements));
    std::memcpy(values->data(), raw.data(), raw.size());
  } else {
    if (in.contents().fp32_contents_size() != elements) {
      return InvalidArgument("input \"" + in.name() +
                             "\": " + std::to_string(in.contents().fp32_contents_size()) +
                             " fp32_contents, but the shape holds " + std::to_string(elements));
    }
    values->assign(in.contents().fp32_contents().begin(), in.contents().fp32_contents().end());
  }
  if (!all_finite(*values)) return InvalidArgument("input \"" + in.name() + "\": NaN or infinity");
  return Status::Ok();
}

// The request checked: its input, timeout (the smaller of the "timeout" parameter and the
// client's deadline) and output.
Status read_call(const ModelInfo& model, const inference::ModelInferRequest& req,
                 const grpc::ServerContextBase& ctx, InferCall* call) {
  SERF_RETURN_IF_ERROR(read_input(model, req, &call->input));
  SERF_ASSIGN_OR_RETURN(call->timeout_us, timeout_parameter(parameters_json(req.parameters())));
  const auto deadline = ctx.deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const double left_us =
        std::chrono::duration<double, std::micro>(deadline - std::chrono::system_clock::now())
            .count();
    const double us = std::max(left_us, 1.0);
    call->timeout_us = call->timeout_us > 0 ? std::min(call->timeout_us, us) : us;
  }
  if (req.outputs_size() > 1) {
    return InvalidArgument("outputs: the model has one output, \"" + model.output.name + "\"");
  }
  for (const auto& o : req.outputs()) {
    SERF_ASSIGN_OR_RETURN(call->output,
                          check_output(model, o.name(), parameters_json(o.parameters())));
  }
  call->id = req.id();
  return Status::Ok();
}

void write_answer(const ModelInfo& model, const InferCall& call, const std::vector<float>& output,
                  inference::ModelInferResponse* res) {
  res->set_model_name(model.name);
  res->set_model_version(model.version);
  res->set_id(call.id);
  auto* out = res->add_outputs();
  out->set_name(model.output.name);
  std::string* raw = res->add_raw_output_contents();
  if (call.output.classification > 0) {
    const std::vector<std::string> top = classification(output, call.output.classification);
    out->set_datatype("BYTES");
    out->add_shape(1);
    out->add_shape(static_cast<int64_t>(top.size()));
    for (const std::string& s : top) {  // 4-byte little-endian length, then the bytes
      const auto n = static_cast<uint32_t>(s.size());
      for (int b = 0; b < 4; ++b) raw->push_back(static_cast<char>((n >> (8 * b)) & 0xff));
      raw->append(s);
    }
    return;
  }
  out->set_datatype("FP32");
  for (int64_t d : answer_shape(model, output.size())) out->add_shape(d);
  raw->assign(reinterpret_cast<const char*>(output.data()), output.size() * sizeof(float));
  if (model.emulated) (*res->mutable_parameters())["emulated"].set_bool_param(true);
}

grpc::Status status_of(const InferAnswer& a) {
  switch (a.outcome) {
    case Outcome::kAnswered:
      return grpc::Status::OK;
    case Outcome::kRejected:
      return grpc::Status(StatusCode::UNAVAILABLE, a.reason);
    case Outcome::kTimedOut:
      return grpc::Status(StatusCode::DEADLINE_EXCEEDED, a.reason);
    case Outcome::kFailed:
      return grpc::Status(StatusCode::INTERNAL, a.reason);
  }
  return grpc::Status(StatusCode::INTERNAL, a.reason);
}

// Every method on gRPC's callback API: no thread waits for a request. ModelInfer hands the
// request to the controller and returns; the controller's answer finishes the call. So admission
// is SERF's alone (the unit's bounded queue: UNAVAILABLE, counted), where the synchronous server
// refused calls past its thread quota with RESOURCE_EXHAUSTED that the controller never saw.
// ModelInfer is generic (InferReactor below): gRPC hands over the call once its headers are in,
// then the message's bytes, whose size is checked before they are parsed. So gRPC takes a message
// of any size and SERF refuses (and counts) every one over --max-body-mb (before session 26 gRPC
// refused those over twice the limit itself, uncounted), and a call whose message never comes is
// seen and counted too (before session 31 ModelInfer was a raw unary method: gRPC hands such a
// call to no handler before its message is whole, and it ended unseen).
using KServeBase = inference::GRPCInferenceService::WithGenericMethod_ModelInfer<
    inference::GRPCInferenceService::CallbackService>;

constexpr const char* kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";

class KServeService;

// One ModelInfer call, from its headers to its end: reads the request message (whole: gRPC hands
// it over at once), hands it to the controller (KServeService::infer) and sends its answer, or
// ends it with a status. A call that ends without its message (its connection closed at
// --grpc-max-connection-age plus --read-timeout, or its client cancelled) is counted at its end:
// serf_grpc_cut_calls_total, and received and timed out in the controller's accounting.
class InferReactor final : public grpc::ServerGenericBidiReactor {
 public:
  InferReactor(KServeService& kserve, grpc::GenericCallbackServerContext* ctx)
      : kserve_(kserve), ctx_(ctx), opened_(Clock::now()) {
    StartRead(&message_);
  }
  void OnReadDone(bool ok) override;
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override;
  grpc::CallbackServerContext* context() const { return ctx_; }
  // The call's end: a status (not OK), or OK with the answer written into answer().
  void end(const grpc::Status& status) { Finish(status); }
  grpc::ByteBuffer* answer() { return &answer_; }
  void send_answer() { StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK); }

 private:
  KServeService& kserve_;
  grpc::GenericCallbackServerContext* ctx_;
  Clock::time_point opened_;  // its headers came: the request's arrival if it is cut
  grpc::ByteBuffer message_, answer_;
  bool message_read_ = false;
  std::atomic<bool> cancelled_{false};
};

class KServeService final : public KServeBase {
 public:
  KServeService(InferenceService& service, size_t max_message_bytes)
      : service_(service), max_message_bytes_(max_message_bytes) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* res) override {
    res->set_live(service_.live());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* res) override {
    res->set_ready(service_.ready());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* req,
                                       inference::ModelReadyResponse* res) override {
    Status st = service_.check_model(req->name(), req->version());
    if (!st.ok()) return done(ctx, counted(st));
    res->set_ready(service_.ready());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* res) override {
    const json meta = server_metadata();
    res->set_name(meta["name"].get<std::string>());
    res->set_version(meta["version"].get<std::string>());
    for (const auto& e : meta["extensions"]) res->add_extensions(e.get<std::string>());
    return done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* req,
                                          inference::ModelMetadataResponse* res) override {
    Status st = service_.check_model(req->name(), req->version());
    if (!st.ok()) return done(ctx, counted(st));
    const ModelInfo& m = service_.model();
    res->set_name(m.name);
    res->add_versions(m.version);
    res->set_platform(m.platform);
    for (const auto& [tensor, list] : {std::make_pair(&m.input, res->mutable_inputs()),
                                       std::make_pair(&m.output, res->mutable_outputs())}) {
      auto* t = list->Add();
      t->set_name(tensor->name);
      t->set_datatype(tensor->datatype);
      for (int64_t d : tensor->shape) t->add_shape(d);
    }
    return done(ctx, grpc::Status::OK);
  }
  // A ModelInfer call's message, read whole: checked, handed to the controller, answered.
  void infer(InferReactor* call, const grpc::ByteBuffer& message) {
    const Clock::time_point received = Clock::now();
    grpc::CallbackServerContext* ctx = call->context();
    const size_t bytes = message.Length();
    if (bytes > max_message_bytes_) return call->end(too_large(bytes));
    inference::ModelInferRequest parsed;
    grpc::ByteBuffer copy(message);  // shares the slices; parsing consumes the buffer it reads
    if (!grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&copy, &parsed).ok())
      return call->end(counted(InvalidArgument("the message is not a ModelInferRequest")));
    Status st = service_.check_model(parsed.model_name(), parsed.model_version());
    InferCall request;
    if (st.ok()) st = read_call(service_.model(), parsed, *ctx, &request);
    if (!st.ok()) return call->end(counted(st));
    const double parse_s = std::chrono::duration<double>(Clock::now() - received).count();
    std::vector<float> input = std::move(request.input);
    const double timeout_us = request.timeout_us;
    // Runs on the controller's thread (or here, when the server is stopping): the answer message
    // is a copy of the output, the sending is gRPC's.
    service_.submit(
        std::move(input), received, timeout_us,
        [this, call, parse_s, request = std::move(request)](InferAnswer&& a) {
          if (a.outcome != Outcome::kAnswered) return call->end(status_of(a));
          const Clock::time_point answered = Clock::now();
          inference::ModelInferResponse res;
          write_answer(service_.model(), request, a.output, &res);
          bool own = false;
          const grpc::Status written =
              grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(
                  res, call->answer(), &own);
          if (!written.ok()) {
            return call->end(grpc::Status(StatusCode::INTERNAL,
                                          "cannot write the answer: " + written.error_message()));
          }
          if (service_.metrics()) {
            // Sending follows; the encoding here is counted.
            service_.metrics()->observe_frontend(
                parse_s + std::chrono::duration<double>(Clock::now() - answered).count());
          }
          call->send_answer();
        },
        // Valid until the call ends (its context lives until OnDone); on the callback API
        // IsCancelled() follows the client's cancellation and its deadline as they happen.
        [ctx] { return ctx->IsCancelled(); });
  }
  // A call that ended before its message came whole (InferReactor::OnDone).
  void cut(Clock::time_point opened) {
    if (service_.metrics()) service_.metrics()->count_grpc_cut_call();
    service_.count_ended(opened,
                         "the call ended before its request message came whole (its connection "
                         "closed: --grpc-max-connection-age, then --read-timeout; or its client "
                         "cancelled)");
  }
  // A call whose client ended its side without a message.
  grpc::Status no_message() {
    return counted(InvalidArgument("the call ended its side without a request message"));
  }

 private:
  static grpc::ServerUnaryReactor* done(grpc::CallbackServerContext* ctx,
                                        const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
  grpc::Status counted(const Status& st) {
    if (service_.metrics()) service_.metrics()->count_invalid("grpc");
    return invalid(st);
  }
  // A message over --max-body-mb, as HTTP's 413: refused with a reason and counted as invalid.
  grpc::Status too_large(size_t bytes) {
    if (service_.metrics()) service_.metrics()->count_invalid("grpc");
    char mib[32];
    std::snprintf(mib, sizeof(mib), "%g", static_cast<double>(max_message_bytes_) / (1 << 20));
    return grpc::Status(StatusCode::RESOURCE_EXHAUSTED,
                        "request message of " + std::to_string(bytes) + " bytes, over " +
                            std::to_string(max_message_bytes_) + " bytes (--max-body-mb " + mib +
                            ")");
  }
  InferenceService& service_;
  size_t max_message_bytes_;
};

void InferReactor::OnReadDone(bool ok) {
  if (ok) {
    message_read_ = true;
    return kserve_.infer(this, message_);
  }
  // No message: the client half-closed without one (answered here), or the call ended (cut:
  // counted in OnDone; the status goes nowhere).
  if (cancelled_ || ctx_->IsCancelled()) return Finish(grpc::Status::CANCELLED);
  Finish(kserve_.no_message());
}

void InferReactor::OnDone() {
  if (!message_read_ && (cancelled_ || ctx_->IsCancelled())) kserve_.cut(opened_);
  delete this;
}

// Takes the calls gRPC has no registered method for: ModelInfer's (InferReactor), and any
// unknown method (UNIMPLEMENTED, as gRPC answers one itself).
class GenericCalls final : public grpc::CallbackGenericService {
 public:
  explicit GenericCalls(KServeService& kserve) : kserve_(kserve) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() != kModelInferMethod) return CallbackGenericService::CreateReactor(ctx);
    return new InferReactor(kserve_, ctx);
  }

 private:
  KServeService& kserve_;
};

}  // namespace

bool grpc_available() { return true; }

class GrpcFrontend::Impl {
 public:
  Impl(InferenceService& service, const GrpcOptions& o)
      : service_(service, o.max_message_bytes), generic_(service_), options_(o) {}

  Status start() {
    grpc::ServerBuilder builder;
    const std::string address = options_.host + ":" + std::to_string(options_.port);
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    builder.RegisterCallbackGenericService(&generic_);
    // No limit of gRPC's own: ModelInfer sees the size of every message before parsing it, and
    // refuses and counts one over the limit (above).
    builder.SetMaxReceiveMessageSize(-1);
    // A slow client: the callback API gives no call a thread of its own, so a call whose bytes
    // trickle in holds only its connection's buffers; a connection that never completes its
    // HTTP/2 preface and settings is closed after the read timeout, as HTTP's slow heads are.
    builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                               static_cast<int>(std::ceil(options_.read_timeout_s * 1e3)));
    // A slow call after the opening (its message a byte at a time, or no half-close): gRPC hands
    // a unary call to no handler before its message is whole, so nothing of SERF's can time it,
    // and gRPC's defaults never end it (no idle or age limit; keep-alive pings every 2 h only
    // find dead peers). Its connection's age does: GOAWAY at the age, the open calls closed
    // --read-timeout later.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(std::ceil(options_.max_connection_age_s * 1e3)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(std::ceil(options_.read_timeout_s * 1e3)));
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      return InvalidArgument("--grpc " + address +
                             ": cannot listen there (in use, or not an address of this host)");
    }
    return Status::Ok();
  }

  void stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
    server_.reset();
  }

  int port() const { return port_; }

 private:
  KServeService service_;
  GenericCalls generic_;
  GrpcOptions options_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcFrontend::~GrpcFrontend() { stop(); }

StatusOr<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(InferenceService& service,
                                                            const GrpcOptions& options) {
  auto impl = std::make_unique<Impl>(service, options);
  SERF_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

int GrpcFrontend::port() const { return impl_->port(); }
void GrpcFrontend::stop() { impl_->stop(); }

}  // namespace serf::serve
