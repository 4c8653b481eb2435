#pragma once
// The KServe v2 side of the load client over HTTP: the model's metadata and readiness before a run
// (cpp-httplib, blocking: these are a few calls), the input tensor it sends, and the infer body in
// JSON or in Triton's binary tensor extension.

#include <optional>
#include <string>
#include <vector>

#include "serf/core/status.h"
#include "serve/load/http_wire.h"
#include "serve/load/load_client.h"

namespace serf::serve::load {

// GET /v2/models/MODEL, then /v2/models/MODEL/ready until 200 (at most `ready_wait_s`). An
// unreachable server, an unknown model or one never ready: InvalidArgument naming --url/--model.
StatusOr<ServedModel> http_model_metadata(const Endpoint& to, const std::string& url,
                                          const std::string& model, double ready_wait_s);

// The request's input: the safetensors file `path` (tensor "input" of the model's shape [1,C,H,W]
// or [1,C]) or, when `path` is empty, the seeded input of that shape (model/weights.h).
StatusOr<std::vector<float>> load_input(const ServedModel& model, const std::string& path,
                                        uint64_t seed);

// The infer request's body; with `binary`, `*header_length` is its JSON part's length.
std::string infer_body(const ServedModel& model, const std::vector<float>& input, bool binary,
                       std::optional<size_t>* header_length);

// The served model from a metadata document ({"name", "platform", "inputs", "outputs"}); -1
// dimensions of the input become 1. InvalidArgument when it describes no FP32 input or no output.
StatusOr<ServedModel> served_model_from_metadata(const std::string& json_text);

}  // namespace serf::serve::load
