#include "cli/serve_frontends.h"

#include <unistd.h>

#include <iostream>

#include "model/model_spec.h"
#include "serf/io/profile_io.h"
#include "serve/grpc_frontend.h"
#include "serve/http_frontend.h"
#include "serve/metrics.h"
#include "serve/service.h"

namespace serf::cli {

namespace {

std::vector<int64_t> dims(const model::Shape& s) {
  if (s.height == 1 && s.width == 1) return {1, s.channels};
  return {1, s.channels, s.height, s.width};
}

// The served model as the front ends describe it: one input "input", one output "output", the
// batch dimension first. Emulated nodes compute nothing: their output is empty; without --model
// they take an input of any shape.
StatusOr<serve::ModelInfo> model_info(const RuntimeFlags& runtime, const RuntimeSession& session) {
  serve::ModelInfo m;
  m.name = session.model_name;
  m.input.name = "input";
  m.output.name = "output";
  m.input.shape = {-1};
  m.output.shape = {1, 0};
  if (!runtime.model.empty()) {
    SERF_ASSIGN_OR_RETURN(model::ModelPlan plan, model::load_model(runtime.model));
    m.name = plan.spec.name;
    m.input.shape = dims(plan.spec.input);
    m.output.shape = dims(plan.output());
  }
  m.emulated = session.emulation != nullptr;
  if (m.emulated) {
    m.platform = "serf_emulated";
    m.output.shape = {1, 0};
  }
  return m;
}

StatusOr<serve::LatencyPredictor> predictor(const FrontendFlags& flags, RuntimeSession& session,
                                            std::shared_ptr<const ConfigurationTable> table) {
  std::shared_ptr<const Profile> profile;
  if (!flags.profile.empty()) {
    SERF_ASSIGN_OR_RETURN(Profile p, io::load_profile(flags.profile));
    profile = std::make_shared<const Profile>(std::move(p));
  } else if (session.emulation) {
    profile = std::make_shared<const Profile>(*session.emulation);
  }
  const QueueKind queue = table ? table->queue : kDefaultQueue;
  return serve::LatencyPredictor(profile, std::move(table), session.nodes, queue);
}

}  // namespace

void add_frontend_flags(CLI::App* sub, FrontendFlags* f) {
  sub->add_option("--http", f->http,
                  "serve clients over KServe v2 HTTP at HOST:PORT (e.g. 127.0.0.1:8000; port 0: "
                  "any free port); without --rate/--load the server runs until SIGINT/SIGTERM "
                  "(to rank 0) or SIGUSR1 (to mpirun)");
  sub->add_option("--grpc", f->grpc, "serve clients over KServe v2 gRPC at HOST:PORT");
  sub->add_option(
         "--max-queue", f->max_queue,
         "requests waiting in one unit's queue at most; one more is answered 503 (default: "
         "64 with --http/--grpc, no bound for generated load alone; 0: reject when "
         "every slot is busy)")
      ->check(int_range(0, 1 << 24));
  sub->add_option("--max-body-mb", f->max_body_mb,
                  "largest request body (HTTP) or message (gRPC), MiB; larger: 413 (default 64)")
      ->check(finite_range(0.001, 4096));
  sub->add_option("--http-connections", f->http_connections,
                  "HTTP connections open at once, idle and slow ones included (they wait in one "
                  "poller thread, not in a serving thread); one more is answered 503 and closed, "
                  "counted in serf_refused_connections_total (default 1024)")
      ->check(int_range(1, 65536));
  sub->add_option("--http-threads", f->http_threads,
                  "HTTP requests served at once: a request takes a thread only once it arrived "
                  "whole, and holds it until its answer is sent (default 64)")
      ->check(int_range(1, 4096));
  sub->add_option("--read-timeout", f->read_timeout_s,
                  "seconds a client may take to send one whole HTTP request, headers and body; "
                  "a request still incomplete then is answered 408 and its connection closed "
                  "(gRPC: to open a connection, its HTTP/2 preface and settings) (default 10)")
      ->check(finite_range(0.01, 3600));
  sub->add_option("--grpc-max-connection-age", f->grpc_max_connection_age_s,
                  "seconds a gRPC connection lives before it is told to go away (GOAWAY; its "
                  "clients reconnect; +-10 % jitter); the calls still open on it get "
                  "--read-timeout more, then the connection is closed. This bounds a gRPC call "
                  "whose message trickles in or never ends (default 60)")
      ->check(finite_range(0.1, 86400));
  sub->add_option("--profile", f->profile,
                  "tuple profile (serf-profile/1) for /metrics' predicted mean latency (default: "
                  "the --emulate profile; else the --table entry's prediction)");
  sub->add_option("--metrics-window", f->metrics_window_s,
                  "seconds of the observed rolling mean latency and of the rate it is predicted "
                  "at in /metrics (default 30)")
      ->check(finite_range(1, 86400));
}

Status check_frontend_flags(const FrontendFlags& f) {
  std::string host;
  int port = 0;
  if (!f.http.empty())
    SERF_RETURN_IF_ERROR(serve::parse_listen_address(f.http, "--http", &host, &port));
  if (!f.grpc.empty()) {
    SERF_RETURN_IF_ERROR(serve::parse_listen_address(f.grpc, "--grpc", &host, &port));
    if (!serve::grpc_available()) {
      return InvalidArgument(
          "--grpc: this serf was built without gRPC (scripts/setup installs "
          "libgrpc++-dev and protobuf-compiler-grpc; then rebuild)");
    }
  }
  return Status::Ok();
}

struct ServeFrontends::State {
  std::unique_ptr<serve::ServeMetrics> metrics;
  std::unique_ptr<serve::InferenceService> service;
  std::unique_ptr<serve::HttpFrontend> http;
  std::unique_ptr<serve::GrpcFrontend> grpc;
};

StatusOr<std::unique_ptr<ServeFrontends>> ServeFrontends::Start(
    const FrontendFlags& flags, const RuntimeFlags& runtime, RuntimeSession& session,
    serve::Controller& controller, std::shared_ptr<const ConfigurationTable> table) {
  auto state = std::make_unique<State>();
  SERF_ASSIGN_OR_RETURN(serve::ModelInfo model, model_info(runtime, session));
  SERF_ASSIGN_OR_RETURN(serve::LatencyPredictor predict,
                        predictor(flags, session, std::move(table)));
  state->metrics =
      std::make_unique<serve::ServeMetrics>(std::move(predict), flags.metrics_window_s);
  serve::ServeMetrics* metrics = state->metrics.get();
  controller.add_answer_hook([metrics](const serve::RequestRecord& r) { metrics->record(r); });
  state->service = std::make_unique<serve::InferenceService>(controller, model, metrics);
  if (!flags.http.empty()) {
    serve::HttpOptions o;
    SERF_RETURN_IF_ERROR(serve::parse_listen_address(flags.http, "--http", &o.host, &o.port));
    o.connections = flags.http_connections;
    o.threads = flags.http_threads;
    o.read_timeout_s = flags.read_timeout_s;
    o.max_body_bytes = static_cast<size_t>(flags.max_body_mb * (1 << 20));
    SERF_ASSIGN_OR_RETURN(state->http, serve::HttpFrontend::Start(*state->service, o));
    std::cout << "serf: KServe v2 HTTP on http://" << o.host << ":" << state->http->port()
              << " (model " << model.name << "; rank 0 is pid " << getpid()
              << ": SIGTERM to it stops the service after the requests it has)" << std::endl;
  }
  if (!flags.grpc.empty()) {
    serve::GrpcOptions o;
    SERF_RETURN_IF_ERROR(serve::parse_listen_address(flags.grpc, "--grpc", &o.host, &o.port));
    o.max_message_bytes = static_cast<size_t>(flags.max_body_mb * (1 << 20));
    o.read_timeout_s = flags.read_timeout_s;
    o.max_connection_age_s = flags.grpc_max_connection_age_s;
    SERF_ASSIGN_OR_RETURN(state->grpc, serve::GrpcFrontend::Start(*state->service, o));
    std::cout << "serf: KServe v2 gRPC on " << o.host << ":" << state->grpc->port() << " (model "
              << model.name << "; rank 0 is pid " << getpid() << ")" << std::endl;
  }
  return std::unique_ptr<ServeFrontends>(new ServeFrontends(std::move(state)));
}

ServeFrontends::ServeFrontends(std::unique_ptr<State> state) : state_(std::move(state)) {}

ServeFrontends::~ServeFrontends() { stop(); }

serve::ServeMetrics* ServeFrontends::metrics() const { return state_->metrics.get(); }

void ServeFrontends::stop() {
  if (state_->http) state_->http->stop();
  if (state_->grpc) state_->grpc->stop();
}

}  // namespace serf::cli
