#pragma once
// KServe v2 over HTTP/1.1 (cpp-httplib): health, metadata, infer (JSON or binary tensors,
// classification), Triton's statistics, Prometheus /metrics, and a status page at /
// (serve/status_page.h). A connection waits for its request in one poller thread and takes a
// thread of a bounded pool only once the request is whole (serve/http_connection.h), so slow or
// idle clients hold no thread; connections over a cap are answered 503 and closed; a client must
// send a whole request within the read timeout (headers or body sent slowly byte by byte
// included), else it is answered 408.

#include <memory>
#include <string>

#include "serf/core/status.h"
#include "serve/service.h"

namespace serf::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port (port() says which)
  int connections = 1024;             // open at once (idle, arriving or served); more: 503
  int threads = 64;                   // serving whole requests, each until its answer
  double read_timeout_s = 10;         // to receive one whole request (headers and body)
  double write_timeout_s = 10;        // to send one response
  double keep_alive_s = 5;            // an idle keep-alive connection is closed after this
  size_t max_body_bytes = 64u << 20;  // a larger body is answered 413
};

// "127.0.0.1:8000" -> host and port; `flag` names the flag in errors.
Status parse_listen_address(const std::string& text, const std::string& flag, std::string* host,
                            int* port);

class HttpFrontend {
 public:
  // Binds (an error names the address) and starts serving on a thread of its own.
  static StatusOr<std::unique_ptr<HttpFrontend>> Start(InferenceService& service,
                                                       const HttpOptions& options);
  ~HttpFrontend();
  int port() const;
  // Stops accepting, lets every request already received finish, joins the threads.
  void stop();

  class Impl;

 private:
  explicit HttpFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace serf::serve
