#include "serve/load/http_wire.h"

#include <cctype>
#include <cstdlib>

namespace serf::serve::load {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Digits of `s` in `base` (10 or 16) into `*value`; false if `s` is empty or holds anything else.
bool parse_size(std::string_view s, int base, size_t* value) {
  if (s.empty() || s.size() > 15) return false;
  size_t v = 0;
  for (char ch : s) {
    int d = -1;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    if (base == 16 && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    if (base == 16 && ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    if (d < 0) return false;
    v = v * static_cast<size_t>(base) + static_cast<size_t>(d);
  }
  *value = v;
  return true;
}

// A chunked body starting at `at`: kDone with the body and the end of the message.
ParseState parse_chunked(std::string_view buffer, size_t at, std::string* body, size_t* end,
                         std::string* error) {
  body->clear();
  for (;;) {
    const size_t line_end = buffer.find("\r\n", at);
    if (line_end == std::string_view::npos) return ParseState::kNeedMore;
    std::string_view size_text = buffer.substr(at, line_end - at);
    size_text = trim(size_text.substr(0, size_text.find(';')));
    size_t size = 0;
    if (!parse_size(size_text, 16, &size)) {
      *error = "bad chunk size \"" + std::string(size_text) + "\"";
      return ParseState::kBad;
    }
    at = line_end + 2;
    if (size == 0) {  // trailers, then an empty line
      for (;;) {
        const size_t e = buffer.find("\r\n", at);
        if (e == std::string_view::npos) return ParseState::kNeedMore;
        const bool empty = e == at;
        at = e + 2;
        if (empty) {
          *end = at;
          return ParseState::kDone;
        }
      }
    }
    if (buffer.size() < at + size + 2) return ParseState::kNeedMore;
    body->append(buffer.data() + at, size);
    at += size + 2;
  }
}

}  // namespace

std::string Endpoint::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

StatusOr<Endpoint> parse_url(const std::string& url, const std::string& flag) {
  const std::string fix = flag + " " + url +
                          ": expected http://HOST:PORT (or HOST:PORT), e.g. "
                          "http://127.0.0.1:8000, port 1..65535";
  std::string rest = url;
  for (const char* scheme : {"http://", "grpc://"}) {
    const std::string s = scheme;
    if (rest.compare(0, s.size(), s) == 0) rest = rest.substr(s.size());
  }
  if (rest.find("://") != std::string::npos) {
    return InvalidArgument(flag + " " + url + ": only http:// (and grpc://) URLs are served; " +
                           "https is not (use a plain-HTTP address of the server)");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return InvalidArgument(fix + " (no path: the client adds /v2/...)");
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
    return InvalidArgument(fix);
  }
  Endpoint e;
  e.host = rest.substr(0, colon);
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') {
    e.host = e.host.substr(1, e.host.size() - 2);
  }
  size_t port = 0;
  if (!parse_size(rest.substr(colon + 1), 10, &port) || port < 1 || port > 65535) {
    return InvalidArgument(fix);
  }
  e.port = static_cast<int>(port);
  return e;
}

std::string http_infer_request(const Endpoint& to, const std::string& model,
                               const std::string& body, std::optional<size_t> header_length) {
  std::string r =
      "POST /v2/models/" + model + "/infer HTTP/1.1\r\nHost: " + to.text() +
      "\r\nContent-Type: " + (header_length ? "application/octet-stream" : "application/json") +
      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (header_length) {
    r += "Inference-Header-Content-Length: " + std::to_string(*header_length) + "\r\n";
  }
  r += "\r\n";
  r += body;
  return r;
}

ParseState parse_http_response(std::string_view buffer, HttpResponse* response, size_t* consumed,
                               std::string* error) {
  const size_t head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (buffer.size() > (64u << 10)) {
      *error = "response headers over 64 KiB";
      return ParseState::kBad;
    }
    return ParseState::kNeedMore;
  }
  const std::string_view head = buffer.substr(0, head_end);
  // "HTTP/1.1 200 OK"
  const size_t first_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, first_end);
  size_t status = 0;
  if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0 ||
      !parse_size(status_line.substr(9, 3), 10, &status)) {
    *error = "not an HTTP response: \"" + std::string(status_line.substr(0, 40)) + "\"";
    return ParseState::kBad;
  }
  response->status = static_cast<int>(status);
  response->close = status_line.compare(0, 8, "HTTP/1.0") == 0;
  std::optional<size_t> length;
  bool chunked = false;
  size_t at = first_end == std::string_view::npos ? head.size() : first_end + 2;
  while (at < head.size()) {
    size_t e = head.find("\r\n", at);
    if (e == std::string_view::npos) e = head.size();
    const std::string_view line = head.substr(at, e - at);
    at = e + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      size_t n = 0;
      if (!parse_size(value, 10, &n)) {
        *error = "bad Content-Length \"" + std::string(value) + "\"";
        return ParseState::kBad;
      }
      length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      chunked = iequals(value, "chunked");
    } else if (iequals(name, "Connection")) {
      if (iequals(value, "close")) response->close = true;
      if (iequals(value, "keep-alive")) response->close = false;
    }
  }
  const size_t body_at = head_end + 4;
  if (chunked) return parse_chunked(buffer, body_at, &response->body, consumed, error);
  const bool no_body = status == 204 || status == 304 || (status >= 100 && status < 200);
  if (!length && !no_body) {
    *error = "a response without Content-Length (status " + std::to_string(status) + ")";
    return ParseState::kBad;
  }
  const size_t n = length.value_or(0);
  if (buffer.size() < body_at + n) return ParseState::kNeedMore;
  response->body.assign(buffer.data() + body_at, n);
  *consumed = body_at + n;
  return ParseState::kDone;
}

}  // namespace serf::serve::load
