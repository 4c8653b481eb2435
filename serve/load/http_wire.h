#pragma once
// The HTTP/1.1 bytes of the load client: where to connect (--url), the one infer request it sends
// again and again (built once, so sending costs one write), and a parser of the responses that come
// back on a keep-alive connection (status line, headers, a Content-Length or chunked body).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "serf/core/status.h"

namespace serf::serve::load {

struct Endpoint {
  std::string host;  // "127.0.0.1", "::1", "localhost"
  int port = 0;
  std::string text() const;  // "127.0.0.1:8000", "[::1]:8000"
};

// "http://127.0.0.1:8000", "127.0.0.1:8000", "grpc://host:8001", "http://[::1]:8000/" -> host and
// port; `flag` names the flag in the error ("--url").
StatusOr<Endpoint> parse_url(const std::string& url, const std::string& flag);

// The bytes of `POST /v2/models/MODEL/infer` carrying `body`; `header_length` is the JSON part's
// length when the body uses the binary tensor extension (Inference-Header-Content-Length).
std::string http_infer_request(const Endpoint& to, const std::string& model,
                               const std::string& body, std::optional<size_t> header_length);

// One response read off a connection.
struct HttpResponse {
  int status = 0;
  bool close = false;  // the server closes the connection after it ("Connection: close")
  std::string body;
};

enum class ParseState { kNeedMore, kDone, kBad };

// Parses the response at the front of `buffer`. kDone: `*response` holds it and `*consumed` its
// bytes (the caller erases them); kBad: `*error` says what is wrong with the bytes.
ParseState parse_http_response(std::string_view buffer, HttpResponse* response, size_t* consumed,
                               std::string* error);

}  // namespace serf::serve::load
