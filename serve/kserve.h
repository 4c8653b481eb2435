#pragma once
// The KServe v2 inference protocol's messages, independent of the transport: an infer request
// (JSON tensors flat or nested, or Triton's binary tensor extension) checked against the model
// and turned into the request's input; the answer turned into the response (JSON or binary
// outputs, the classification extension); model metadata and the statistics extension. The HTTP
// and gRPC front ends share the checks, so both refuse the same requests with the same words.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serf/core/status.h"
#include "serve/model_info.h"
#include "serve/request.h"

namespace serf::serve {

// An output the client asked for, with the extensions' parameters.
struct RequestedOutput {
  bool binary = false;     // binary tensor extension: raw bytes after the JSON
  int classification = 0;  // > 0: the top k as "score:index" strings (BYTES)
};

// A checked infer request.
struct InferCall {
  std::string id;  // echoed in the response ("" when the client gave none)
  std::vector<float> input;
  double timeout_us = 0;  // > 0: answer 504 if still queued this long after arrival
  RequestedOutput output;
};

// Checks the tensor the client describes against the model's input: name, datatype, shape.
Status check_input(const ModelInfo& model, const std::string& name, const std::string& datatype,
                   const std::vector<int64_t>& shape);
// Checks a requested output's name and parameters (binary_data, classification).
StatusOr<RequestedOutput> check_output(const ModelInfo& model, const std::string& name,
                                       const nlohmann::json& parameters);
// The request-level "timeout" parameter (microseconds in [0, kMaxTimeoutUs]); 0 when absent or
// none.
StatusOr<double> timeout_parameter(const nlohmann::json& parameters);

// Whether every value is finite (no NaN, no infinity). Branch-free over the exponent bits, so the
// compiler vectorizes it: the early-exit loop it replaces ran one value at a time, 72-104 us of a
// 224x224x3 input's 602 KB parse (bench_frontend; which of the two depended on the loop's
// alignment in the build).
bool all_finite(const std::vector<float>& values);

// Parses a REST infer body. `header_length` is the Inference-Header-Content-Length header: the
// body's first that many bytes are the JSON, the rest the binary tensors in input order.
StatusOr<InferCall> parse_infer_request(const ModelInfo& model, std::string_view body,
                                        std::optional<size_t> header_length);

// A REST infer response: `body`, and when any output is binary the JSON part's length (to send
// as Inference-Header-Content-Length).
struct EncodedResponse {
  std::string body;
  std::optional<size_t> header_length;
};
// `output` is the answer's output tensor (the model's output elements; empty when emulated).
EncodedResponse encode_infer_response(const ModelInfo& model, const InferCall& call,
                                      const std::vector<float>& output);

// The top `k` of `output` as "score:index" (highest first, the lower index first on ties).
std::vector<std::string> classification(const std::vector<float>& output, int k);
// The shape an answer's output tensor has ([1, 0] when emulated).
std::vector<int64_t> answer_shape(const ModelInfo& model, size_t output_elements);

nlohmann::json server_metadata();
nlohmann::json model_metadata(const ModelInfo& model);
// {"error": message}
std::string error_body(const std::string& message);
// A tensor shape as errors show it: "[1, 3, 224, 224]".
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace serf::serve
