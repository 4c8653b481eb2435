#include "serve/request_scan.h"

#include <strings.h>

#include <algorithm>
#include <string>

namespace serf::serve {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool is(std::string_view name, const char* want) {
  return name.size() == std::char_traits<char>::length(want) &&
         strncasecmp(name.data(), want, name.size()) == 0;
}

// A byte count of 1*DIGIT no larger than `max`; false otherwise.
bool byte_count(std::string_view s, size_t max, size_t* n) {
  if (s.empty() || s.size() > 19) return false;
  size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  *n = v;
  return v <= max;
}

}  // namespace

void RequestScan::reset() { *this = RequestScan(max_body_bytes_); }

RequestScan::State RequestScan::scan(std::string_view data) {
  if (head_end_ == 0) {
    const size_t from = searched_ > 3 ? searched_ - 3 : 0;
    const size_t end = data.find("\r\n\r\n", from);
    if (end == std::string_view::npos) {
      searched_ = data.size();
      return data.size() > kMaxHeadBytes ? State::kHandOver : State::kIncomplete;
    }
    head_end_ = end + 4;
    if (head_end_ > kMaxHeadBytes || !read_head(data.substr(0, end + 2))) return State::kHandOver;
    chunk_at_ = head_end_;
  }
  switch (framing_) {
    case Framing::kNone:
      return State::kWhole;
    case Framing::kLength:
      return data.size() - head_end_ >= body_bytes_ ? State::kWhole : State::kIncomplete;
    case Framing::kChunked:
      return scan_chunks(data);
  }
  return State::kHandOver;
}

bool RequestScan::read_head(std::string_view head) {
  size_t lengths = 0, length = 0;
  bool coded = false;
  size_t at = head.find("\r\n");  // past the request line
  if (at == 0) return false;      // an empty request line: the front end answers 400
  for (at += 2; at < head.size();) {
    const size_t eol = head.find("\r\n", at);
    const std::string_view line = head.substr(at, eol - at);
    at = eol + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;  // 400 from the head
    const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (is(name, "Content-Length")) {
      size_t n = 0;
      if (!byte_count(value, max_body_bytes_, &n) || (lengths > 0 && n != length)) return false;
      length = n;
      ++lengths;
    } else if (is(name, "Transfer-Encoding")) {
      if (coded || !is(value, "chunked")) return false;  // 501
      coded = true;
    } else if (is(name, "Expect")) {
      expect_continue_ = is(value, "100-continue");
    }
  }
  if (lengths > 0 && coded) return false;  // 400: both
  framing_ = coded ? Framing::kChunked : lengths > 0 ? Framing::kLength : Framing::kNone;
  body_bytes_ = coded ? 0 : length;
  return true;
}

// Chunks: SIZE (hex) [;extensions] CRLF, SIZE bytes, CRLF; then 0 CRLF, trailer lines, CRLF.
RequestScan::State RequestScan::scan_chunks(std::string_view data) {
  constexpr size_t kMaxLine = 4096;
  for (;;) {
    const size_t eol = data.find("\r\n", chunk_at_);
    if (eol == std::string_view::npos) {
      return data.size() - chunk_at_ > kMaxLine ? State::kHandOver : State::kIncomplete;
    }
    const std::string_view line = data.substr(chunk_at_, eol - chunk_at_);
    if (in_trailer_) {
      chunk_at_ = eol + 2;
      if (line.empty()) return State::kWhole;
      continue;
    }
    const std::string_view hex = trim(line.substr(0, line.find(';')));
    size_t size = 0;
    if (hex.empty() || hex.size() > 15) return State::kHandOver;
    for (char c : hex) {
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return State::kHandOver;
      size = size * 16 + static_cast<size_t>(d);
    }
    if (size == 0) {
      in_trailer_ = true;
      chunk_at_ = eol + 2;
      continue;
    }
    if (size > max_body_bytes_ - std::min(body_bytes_, max_body_bytes_)) {
      return State::kHandOver;  // over the limit: 413 as it arrives
    }
    const size_t next = eol + 2 + size + 2;
    if (data.size() < next) return State::kIncomplete;
    if (data.compare(next - 2, 2, "\r\n") != 0) return State::kHandOver;
    body_bytes_ += size;
    chunk_at_ = next;
  }
}

}  // namespace serf::serve
