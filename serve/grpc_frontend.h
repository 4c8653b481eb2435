#pragma once
// KServe v2 over gRPC (inference.GRPCInferenceService, serve/kserve_v2.proto): ServerLive,
// ServerReady, ModelReady, ServerMetadata, ModelMetadata and ModelInfer with raw_input_contents /
// raw_output_contents. The same checks as HTTP; INVALID_ARGUMENT for a bad request, UNAVAILABLE
// when the unit's queue is full or the server is stopping, DEADLINE_EXCEEDED when the request's
// timeout (or the client's gRPC deadline) passed while it was queued. No thread waits for a
// request (gRPC's callback API), so gRPC itself never refuses one for lack of threads: every
// request is answered or refused by the controller, and counted.

#include <memory>
#include <string>

#include "serf/core/status.h"
#include "serve/service.h"

namespace serf::serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0: any free port
  // A larger ModelInfer message is refused with RESOURCE_EXHAUSTED and a reason, and counted as
  // invalid, whatever its size (gRPC hands the message over unparsed; it sets no limit itself).
  size_t max_message_bytes = 64u << 20;
  // A connection that has not sent its HTTP/2 preface and settings this long after it opened is
  // closed (gRPC's server handshake timeout; its default is 120 s). A slow call holds no thread.
  double read_timeout_s = 10;
  // A call whose message trickles in (or never comes) holds no thread and is not timed by SERF;
  // gRPC bounds it by the connection's age: once a connection is this old (gRPC adds up to +-10 %
  // jitter) it is told GOAWAY (its clients reconnect for new calls), and the calls still open on
  // it get read_timeout_s more, then it is closed. A ModelInfer call cut so before its message
  // came whole is counted (serf_grpc_cut_calls_total; received and timed out).
  double max_connection_age_s = 60;
};

// Whether this build has the gRPC front end (Debian's libgrpc++ found at configure time).
bool grpc_available();

class GrpcFrontend {
 public:
  static StatusOr<std::unique_ptr<GrpcFrontend>> Start(InferenceService& service,
                                                       const GrpcOptions& options);
  ~GrpcFrontend();
  int port() const;
  // Stops taking calls, lets the calls already received finish.
  void stop();

  class Impl;

 private:
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace serf::serve
