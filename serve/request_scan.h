#pragma once
// Whether the bytes of one HTTP/1.1 request that have arrived make it whole, so that a thread of
// the HTTP front end serves it without ever waiting on its client (serve/http_connection.h: the
// connections wait in one poller thread until then). It follows the framing the front end
// accepts (Content-Length up to the body limit, or chunked coding); a request framed any other
// way is handed over as soon as its head is whole, since the front end refuses it from the head.

#include <cstddef>
#include <string_view>

namespace serf::serve {

class RequestScan {
 public:
  enum class State {
    kIncomplete,  // more bytes are needed
    kWhole,       // the request is all there (bytes past it belong to the next one)
    kHandOver,    // no use waiting: the front end answers it from what is there (bad framing)
  };
  // Heads longer than this are handed over (the front end answers them 4xx).
  static constexpr size_t kMaxHeadBytes = size_t{64} * 1024;

  explicit RequestScan(size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}
  // A new request starts.
  void reset();
  // `data` holds the request from its first byte on (the same bytes as the last call and more).
  State scan(std::string_view data);
  // The head is whole, says "Expect: 100-continue", and its body is awaited.
  bool expects_continue() const { return head_end_ > 0 && expect_continue_; }

 private:
  // The head's fields that frame the body (from its end, head_end_); false: hand it over.
  bool read_head(std::string_view head);
  State scan_chunks(std::string_view data);
  size_t max_body_bytes_;
  size_t head_end_ = 0;  // past the empty line that ends the head; 0: not there yet
  size_t searched_ = 0;  // where the search for the head's end goes on
  enum class Framing { kNone, kLength, kChunked } framing_ = Framing::kNone;
  size_t body_bytes_ = 0;  // kLength: the Content-Length; kChunked: chunk data so far
  bool expect_continue_ = false;
  // kChunked: where the next chunk's size line (or the trailer's next line) starts.
  size_t chunk_at_ = 0;
  bool in_trailer_ = false;
};

}  // namespace serf::serve
