#include "serve/http_frontend.h"

#include <strings.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "serve/http_connection.h"
#include "serve/kserve.h"
#include "serve/metrics.h"
#include "serve/status_page.h"

namespace serf::serve {

namespace {

using Clock = std::chrono::steady_clock;
using httplib::Request;
using httplib::Response;

constexpr const char* kJson = "application/json";
// /v2/models/NAME[/versions/VERSION]: the model's part of a path, captured as (1) and (2).
// A keep-alive connection is closed after this many requests (a client then reconnects).
constexpr size_t kRequestsPerConnection = 100000;
const std::string kModelPath = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

// Front-end time of the request this thread handles (receive to hand-over, answer to send).
thread_local Clock::time_point t_answered;
thread_local double t_frontend_s = -1;  // < 0: no answered infer request pending

void json_error(Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_body(message), kJson);
}

// Response::set_content without its copy: httplib 0.11 takes the body by const reference only.
void set_body(Response& res, std::string&& body, const char* content_type) {
  res.body = std::move(body);
  const auto types = res.headers.equal_range("Content-Type");
  res.headers.erase(types.first, types.second);
  res.set_header("Content-Type", content_type);
}

int status_of(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAnswered:
      return 200;
    case Outcome::kRejected:
      return 503;
    case Outcome::kTimedOut:
      return 504;
    case Outcome::kFailed:
      return 500;
  }
  return 500;
}

}  // namespace

Status parse_listen_address(const std::string& text, const std::string& flag, std::string* host,
                            int* port) {
  const auto colon = text.rfind(':');
  const std::string fix = flag + " " + text + ": expected HOST:PORT, e.g. 127.0.0.1:8000 " +
                          "(port 0..65535, 0: any free port)";
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument(fix);
  }
  char* end = nullptr;
  const std::string digits = text.substr(colon + 1);
  const long p = std::strtol(digits.c_str(), &end, 10);
  if (*end != '\0' || p < 0 || p > 65535 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(fix);
  }
  *host = text.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);  // [::1]:8000
  }
  *port = static_cast<int>(p);
  return Status::Ok();
}

class HttpFrontend::Impl {
 public:
  Impl(InferenceService& service, const HttpOptions& o)
      : service_(service),
        options_(o),
        server_(ConnectionLimits{o.connections, o.threads, o.read_timeout_s, o.write_timeout_s,
                                 o.keep_alive_s, o.max_body_bytes},
                [this] {
                  if (service_.metrics()) service_.metrics()->count_refused_connection();
                }) {}

  Status start() {
    SERF_RETURN_IF_ERROR(fit_file_limit());
    server_.set_payload_max_length(options_.max_body_bytes);
    server_.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, options_.keep_alive_s)));
    server_.set_keep_alive_max_count(kRequestsPerConnection);
    routes();
    port_ = options_.port == 0
                ? server_.bind_to_any_port(options_.host)
                : (server_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
    if (port_ < 0) {
      return InvalidArgument("--http " + options_.host + ":" + std::to_string(options_.port) +
                             ": cannot listen there (in use, or not an address of this host)");
    }
    if (!server_.widen_backlog()) {
      return Internal("--http " + options_.host + ":" + std::to_string(port_) +
                      ": cannot widen the listen backlog: " + std::strerror(errno));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    return Status::Ok();
  }

  void stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }

 private:
  void routes();
  // Each open connection is a file descriptor: --http-connections must fit the process's limit.
  Status fit_file_limit() const;
  // POST .../infer: the body read under --max-body-mb (chunked too), then infer().
  void read_infer(const Request& req, Response& res, const httplib::ContentReader& read);
  // Why a request's framing or head is refused before any route, and with which status (0 and
  // "" when it is not). Its body is not read: it is refused at once, not after the read timeout.
  std::pair<int, std::string> framing_error(const Request& req) const;
  std::string body_limit_error() const;
  // A request not whole within the read timeout (BoundedServer::on_slow_request).
  void answer_slow(DeadlineStream& stream);
  void infer(const Request& req, const std::string& body, Response& res);
  void handle_error(const Request& req, Response& res);
  // The model named by the path; false (and a 400 written) when it is not the served one.
  bool model_ok(const Request& req, Response& res) {
    Status st = service_.check_model(req.matches[1], req.matches[2]);
    if (st.ok()) return true;
    invalid();
    json_error(res, 400, st.message());
    return false;
  }
  void invalid() {
    if (service_.metrics()) service_.metrics()->count_invalid("http");
  }

  InferenceService& service_;
  HttpOptions options_;
  BoundedServer server_;
  int port_ = -1;
  std::thread thread_;
};

Status HttpFrontend::Impl::fit_file_limit() const {
  constexpr rlim_t kOthers = 256;  // MPI, gRPC, files, the poller
  // Refused connections linger too (ConnectionPool::refuse), a bounded number.
  const rlim_t need = static_cast<rlim_t>(options_.connections) + kOthers +
                      static_cast<rlim_t>(ConnectionPool::kRefusedLingering);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= need) return Status::Ok();
  if (limit.rlim_max >= need) {
    limit.rlim_cur = need;  // the soft limit up to what the connections need
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) return Status::Ok();
  }
  return InvalidArgument("--http-connections " + std::to_string(options_.connections) +
                         ": this process may open only " + std::to_string(limit.rlim_max) +
                         " files (ulimit -Hn), and needs " + std::to_string(need) +
                         ": fewer connections, or a higher limit");
}

void HttpFrontend::Impl::routes() {
  auto health = [](bool ok, Response& res) { res.status = ok ? 200 : 400; };
  server_.Get("/v2/health/live",
              [&, health](const Request&, Response& res) { health(service_.live(), res); });
  server_.Get("/v2/health/ready",
              [&, health](const Request&, Response& res) { health(service_.ready(), res); });
  server_.Get("/v2", [](const Request&, Response& res) {
    res.set_content(server_metadata().dump(), kJson);
  });
  server_.Get(kModelPath, [&](const Request& req, Response& res) {
    if (model_ok(req, res)) res.set_content(model_metadata(service_.model()).dump(), kJson);
  });
  server_.Get(kModelPath + "/ready", [&, health](const Request& req, Response& res) {
    if (model_ok(req, res)) health(service_.ready(), res);
  });
  auto stats = [&](const Request& req, Response& res) {
    if (req.matches.size() > 1 && !model_ok(req, res)) return;
    if (service_.metrics() == nullptr) return json_error(res, 500, "no statistics are kept");
    res.set_content(service_.metrics()->triton_stats(service_.model()).dump(), kJson);
  };
  server_.Get(kModelPath + "/stats", stats);
  server_.Get("/v2/models/stats", stats);
  server_.Get("/", [&](const Request&, Response& res) {
    if (service_.metrics() == nullptr) return json_error(res, 500, "no metrics are kept");
    StatusSnapshot snap = service_.metrics()->snapshot(service_.status());
    snap.model = service_.model().name;
    res.set_header("Cache-Control", "no-store");
    res.set_content(status_page_html(snap), "text/html; charset=utf-8");
  });
  server_.Get("/metrics", [&](const Request&, Response& res) {
    if (service_.metrics() == nullptr) return json_error(res, 500, "no metrics are kept");
    res.set_content(service_.metrics()->prometheus_text(service_.status()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  // The body is read here, not by httplib before the handler: httplib refuses a form-encoded body
  // over 8 KiB with 413, and that is curl -d's default content type (a cifar10 request is 22 KB).
  server_.Post(kModelPath + "/infer",
               [&](const Request& req, Response& res, const httplib::ContentReader& read) {
                 read_infer(req, res, read);
               });
  server_.set_pre_routing_handler([&](const Request& req, Response& res) {
    const auto [status, why] = framing_error(req);
    if (status == 0) return httplib::Server::HandlerResponse::Unhandled;
    invalid();
    json_error(res, status, why);
    res.set_header("Connection", "close");  // the body, whatever its length, is not read
    return httplib::Server::HandlerResponse::Handled;
  });
  server_.on_slow_request([&](DeadlineStream& stream) { answer_slow(stream); });
  server_.on_silent([&] {
    if (service_.metrics()) service_.metrics()->count_silent_connection();
  });
  server_.set_error_handler([&](const Request& req, Response& res) { handle_error(req, res); });
  server_.set_exception_handler([](const Request&, Response& res, const std::exception_ptr& ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what += std::string(": ") + e.what();
    } catch (...) {
    }
    json_error(res, 500, what);
  });
  server_.on_sent([&] {
    // The answer is in the socket: the answer-to-send part of the front end's time.
    if (t_frontend_s < 0) return;  // not an answered infer request
    t_frontend_s += std::chrono::duration<double>(Clock::now() - t_answered).count();
    if (service_.metrics() != nullptr) service_.metrics()->observe_frontend(t_frontend_s);
    t_frontend_s = -1;
  });
}

void HttpFrontend::Impl::read_infer(const Request& req, Response& res,
                                    const httplib::ContentReader& read) {
  if (req.is_multipart_form_data()) {
    invalid();
    return json_error(res, 400,
                      "a multipart/form-data body: send the KServe v2 JSON request (or a binary "
                      "tensor request) as the body itself");
  }
  std::string body;
  // On failure httplib set the status (413 over --max-body-mb, 400); handle_error writes the
  // error. httplib bounds a body by its Content-Length only: a chunked one is bounded here.
  bool over = false;
  if (!read([&](const char* data, size_t n) {
        over = body.size() + n > options_.max_body_bytes;
        if (!over) body.append(data, n);
        return !over;
      })) {
    if (over) res.status = 413;
    if (res.status < 400) res.status = 400;
    res.set_header("Connection", "close");  // the rest of the body is unread
    return;
  }
  infer(req, body, res);
}

// Framing httplib would read one way and a proxy in front another (request smuggling): two
// different Content-Lengths (httplib takes the first), or a Content-Length beside chunked; and
// a header line that is no field line, which httplib drops (RFC 9112: 400, and close). Framing
// httplib would wait on until the read timeout: a Content-Length that is no byte count (httplib
// read "-1" as 2^64 - 1 and "1 2" as 1), one over --max-body-mb (httplib reads and drops that
// many bytes before answering 413), a body with neither Content-Length nor chunked coding
// (httplib reads it to the end of the connection), a transfer coding other than chunked.
std::pair<int, std::string> HttpFrontend::Impl::framing_error(const Request& req) const {
  const size_t lengths = req.get_header_value_count("Content-Length");
  const std::string length = req.get_header_value("Content-Length");
  for (size_t i = 1; i < lengths; ++i) {
    if (req.get_header_value("Content-Length", i) != length) {
      return {400, "two different Content-Length headers (" + length + " and " +
                       req.get_header_value("Content-Length", i) + "): give one"};
    }
  }
  const bool coded = req.has_header("Transfer-Encoding");
  if (lengths > 0 && coded) return {400, "both Content-Length and Transfer-Encoding: give one"};
  const DeadlineStream* stream = DeadlineStream::current();
  if (stream && !stream->bad_header_line().empty()) {
    return {400, "the header line \"" + stream->bad_header_line() +
                     "\" is not NAME: VALUE (a token, a colon right after it, the value; no "
                     "line folding)"};
  }
  if (coded && strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") != 0) {
    return {501, "Transfer-Encoding: " + req.get_header_value("Transfer-Encoding") +
                     ": only chunked is served"};
  }
  if (lengths > 0) {
    // RFC 9110 section 8.6: 1*DIGIT. Past 2^64 - 1 strtoull saturates: over any limit too.
    if (length.empty() || length.find_first_not_of("0123456789") != std::string::npos) {
      return {400, "Content-Length: \"" + length + "\" is not a byte count"};
    }
    if (std::strtoull(length.c_str(), nullptr, 10) > options_.max_body_bytes) {
      return {413, body_limit_error()};
    }
  } else if (!coded && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH")) {
    return {411, "a " + req.method + " without Content-Length (or Transfer-Encoding: chunked)"};
  }
  return {0, ""};
}

std::string HttpFrontend::Impl::body_limit_error() const {
  // In bytes: a limit under 1 MiB printed in whole MiB read "over 0 MiB".
  char mib[32];
  std::snprintf(mib, sizeof(mib), "%g", static_cast<double>(options_.max_body_bytes) / (1 << 20));
  return "request body over " + std::to_string(options_.max_body_bytes) + " bytes (--max-body-mb " +
         mib + ")";
}

void HttpFrontend::Impl::answer_slow(DeadlineStream& stream) {
  // httplib's own refusal of what it read in time stands (414: a request line too long); its 400
  // for the read that timed out becomes a 408 naming the part that was late.
  const int held = stream.held_status();
  if (held != 0 && held != 400) return;
  const char* part = stream.in_head() ? "head" : "body";
  if (service_.metrics()) service_.metrics()->count_read_timeout(part);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", options_.read_timeout_s);
  const std::string body =
      error_body(std::string("the request's ") +
                 (stream.in_head() ? "head (request line and headers)" : "body") +
                 " did not arrive within the read timeout (--read-timeout " + seconds +
                 " s for a whole request): send it at once");
  stream.replace_held(
      "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
}

void HttpFrontend::Impl::handle_error(const Request& req, Response& res) {
  if (!res.body.empty()) return;  // a handler's own {"error": ...}
  const DeadlineStream* stream = DeadlineStream::current();
  if (res.status == 400 && stream != nullptr && stream->timed_out()) return;  // answer_slow's
  if (res.status == 413) {
    invalid();
    return json_error(res, 413, body_limit_error());
  }
  if (res.status == 404) {
    return json_error(res, 404,
                      "no endpoint " + req.method + " " + req.path +
                          " (KServe v2: /v2, /v2/health/{live,ready}, "
                          "/v2/models/NAME[/ready|/infer|/stats], /metrics; / is a status page)");
  }
  if (res.status == 400) {
    invalid();
    return json_error(res, 400, "malformed HTTP request");
  }
  if (res.status >= 400) json_error(res, res.status, "HTTP status " + std::to_string(res.status));
}

void HttpFrontend::Impl::infer(const Request& req, const std::string& body, Response& res) {
  const Clock::time_point received = Clock::now();
  t_frontend_s = -1;  // not an answered request unless set below
  if (!model_ok(req, res)) return;
  std::optional<size_t> header_length;
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string v = req.get_header_value("Inference-Header-Content-Length");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || v.find_first_not_of("0123456789") != std::string::npos) {
      invalid();
      return json_error(res, 400,
                        "Inference-Header-Content-Length: \"" + v + "\" is not a byte count");
    }
    header_length = static_cast<size_t>(n);
  }
  StatusOr<InferCall> call = parse_infer_request(service_.model(), body, header_length);
  if (!call.ok()) {
    invalid();
    return json_error(res, 400, call.status().message());
  }
  const double parse_s = std::chrono::duration<double>(Clock::now() - received).count();
  // A client that closes its connection while the request is queued is not waited for: this
  // thread waits in infer() meanwhile, so the stream (and its socket) outlive every ask.
  const DeadlineStream* stream = DeadlineStream::current();
  std::function<bool()> gone;
  if (stream != nullptr) gone = [stream] { return stream->peer_closed(); };
  InferAnswer answer =
      service_.infer(std::move(call->input), received, call->timeout_us, std::move(gone));
  t_answered = Clock::now();
  if (answer.outcome != Outcome::kAnswered) {
    return json_error(res, status_of(answer.outcome), answer.reason);
  }
  EncodedResponse encoded = encode_infer_response(service_.model(), *call, answer.output);
  if (encoded.header_length) {
    res.set_header("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
    set_body(res, std::move(encoded.body), "application/octet-stream");
  } else {
    set_body(res, std::move(encoded.body), kJson);
  }
  t_frontend_s = parse_s;
}

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFrontend::~HttpFrontend() { stop(); }

StatusOr<std::unique_ptr<HttpFrontend>> HttpFrontend::Start(InferenceService& service,
                                                            const HttpOptions& options) {
  auto impl = std::make_unique<Impl>(service, options);
  SERF_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(impl)));
}

int HttpFrontend::port() const { return impl_->port(); }

void HttpFrontend::stop() { impl_->stop(); }

}  // namespace serf::serve
