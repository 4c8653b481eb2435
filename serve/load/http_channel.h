#pragma once
// The load client's HTTP/1.1 channel: a pool of keep-alive connections driven by one thread through
// epoll (non-blocking sockets; a timerfd wakes the thread at the next scheduled send). A request
// goes out at once on an idle connection, or on a new one while fewer than `max_connections` are
// open; otherwise it waits for the first connection to free up (HTTP/1.1 carries one request at a
// time on a connection), and that wait is the client's lateness, reported. cpp-httplib's client
// blocks a thread per request; this sends a prebuilt request with one write and never blocks, so
// one thread keeps up with a server on the same two cores (bench/load_client_bench.cc).

#include <memory>
#include <string>

#include "serf/core/status.h"
#include "serve/load/channel.h"
#include "serve/load/http_wire.h"

namespace serf::serve::load {

struct HttpChannelOptions {
  Endpoint endpoint;
  std::string request;       // the bytes of one request (http_infer_request)
  int max_connections = 64;  // open at once
  double timeout_s = 30;     // a request not answered this long after it was sent: kStatusTimeout
};

class HttpChannel : public LoadChannel {
 public:
  // Resolves the address (an error names it); opens no connection yet.
  static StatusOr<std::unique_ptr<HttpChannel>> Create(HttpChannelOptions options);
  ~HttpChannel() override;

  void send(uint64_t id) override;
  void poll(Clock::time_point until, const CompletionFn& done) override;
  size_t in_flight() const override;
  size_t waiting() const override;
  size_t connections() const override;

  class Impl;

 private:
  explicit HttpChannel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace serf::serve::load
