#pragma once
// The load client over KServe v2 gRPC: the model's metadata and readiness before a run, and a
// channel of asynchronous ModelInfer calls on one completion queue (HTTP/2 multiplexes the calls,
// so a connection is never busy; `connections` spreads them over that many channels). Status codes
// are reported as the HTTP status KServe pairs them with (OK 200, INVALID_ARGUMENT 400, NOT_FOUND
// 404, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, INTERNAL 500); the client's own deadline passing is
// a timeout. A build without gRPC answers both with one error line.

#include <memory>
#include <string>
#include <vector>

#include "serf/core/status.h"
#include "serve/load/channel.h"
#include "serve/load/http_wire.h"
#include "serve/load/load_client.h"

namespace serf::serve::load {

// ModelMetadata, then ModelReady until true (at most `ready_wait_s`); errors name --url/--model.
StatusOr<ServedModel> grpc_model_metadata(const Endpoint& to, const std::string& model,
                                          double ready_wait_s);

// A channel sending ModelInfer with `input` (raw_input_contents with options.binary, else
// fp32_contents).
StatusOr<std::unique_ptr<LoadChannel>> make_grpc_channel(const Endpoint& to,
                                                         const ServedModel& model,
                                                         const std::vector<float>& input,
                                                         const LoadOptions& options);

}  // namespace serf::serve::load
