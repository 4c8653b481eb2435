#include "serve/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

namespace serf::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Writes up to this size are held and sent together (an answer's headers and body).
constexpr size_t kHeldBytes = size_t{64} * 1024;

}  // namespace

bool wait_fd(int fd, short events, double timeout_s) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(std::max(timeout_s, 0.0)));
  for (;;) {
    const double left = std::chrono::duration<double>(end - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max(left, 0.0) * 1e3 + 0.999));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR || left <= 0) return false;
  }
}

namespace {

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

}  // namespace

void DeadlineStream::start_request() {
  deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(read_timeout_s_));
  in_head_ = true;
  timed_out_ = false;
  continue_sent_ = false;
  line_.clear();
  line_colon_ = line_bad_ = false;
  lines_ = 0;
  bad_header_.clear();
}

namespace {
thread_local const DeadlineStream* current_stream = nullptr;

// RFC 9110 section 5.6.2: a field name is a token.
bool token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}
}  // namespace

const DeadlineStream* DeadlineStream::current() { return current_stream; }

void DeadlineStream::scan_head(const char* ptr, size_t n) {
  constexpr size_t kQuoted = 80;  // the bad line's first bytes, for the error message
  for (size_t i = 0; i < n && in_head_; ++i) {
    const char c = ptr[i];
    if (c == '\n') {
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      if (lines_ == 0 && line_.empty()) continue;  // an empty line before the request line
      if (lines_ > 0 && line_.empty() && !line_bad_) {
        in_head_ = false;  // the empty line: the body follows
      } else if (lines_ > 0 && (line_bad_ || !line_colon_) && bad_header_.empty()) {
        bad_header_ = line_.empty() ? std::string("(a line of whitespace)") : line_;
      }
      ++lines_;
      line_.clear();
      line_colon_ = line_bad_ = false;
      continue;
    }
    if (lines_ > 0 && !line_colon_) {
      // The field name: a token up to the colon; anything else (a space, a line that starts
      // with whitespace, an empty name) makes the line no field line.
      if (c == ':') {
        line_colon_ = true;
        if (line_.empty()) line_bad_ = true;
      } else if (c != '\r' && !token_char(c)) {
        line_bad_ = true;
      }
    }
    if (line_.size() < kQuoted) line_.push_back(c);
  }
}

bool DeadlineStream::is_readable() const {
  if (pos_ < end_) return true;
  if (wait_fd(fd_, POLLIN, std::chrono::duration<double>(deadline_ - Clock::now()).count())) {
    return true;
  }
  timed_out_ = Clock::now() >= deadline_;  // else the wait itself failed
  return false;
}

namespace {
// The status of the answer that starts at `at` in `out` (0: none there).
int status_at(const std::string& out, size_t at) {
  // "HTTP/1.1 400 Bad Request\r\n...": the three digits after the version.
  const size_t space = out.find(' ', at);
  if (out.compare(at, 5, "HTTP/") != 0 || space == std::string::npos || out.size() < space + 4) {
    return 0;
  }
  int status = 0;
  for (size_t i = space + 1; i < space + 4; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(out[i]))) return 0;
    status = status * 10 + (out[i] - '0');
  }
  return status;
}
}  // namespace

size_t DeadlineStream::final_answer_at() const {
  // Past interim answers ("100 Continue", held while the body's first bytes were buffered).
  size_t at = 0;
  for (int status = status_at(out_, at); status >= 100 && status < 200;
       status = status_at(out_, at)) {
    const size_t end = out_.find("\r\n\r\n", at);
    if (end == std::string::npos) break;
    at = end + 4;
  }
  return at;
}

int DeadlineStream::held_status() const { return status_at(out_, final_answer_at()); }

void DeadlineStream::replace_held(const std::string& answer) {
  out_.replace(final_answer_at(), std::string::npos, answer);
}

bool DeadlineStream::held_closes() const {
  // In the answer's head only (its headers, up to the empty line), not its body.
  const size_t at = final_answer_at();
  const size_t head_end = out_.find("\r\n\r\n", at);
  if (head_end == std::string::npos) return false;
  const std::string_view head(out_.data() + at, head_end + 2 - at);
  return head.find("\r\nConnection: close\r\n") != std::string_view::npos;
}

bool DeadlineStream::peer_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  if ((p.revents & POLLIN) == 0) return false;
  char c = 0;  // a pipelined next request is data, not a close
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool DeadlineStream::is_writable() const { return wait_fd(fd_, POLLOUT, write_timeout_s_); }

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (pos_ == end_) {
    // The client may wait for what was written (an answer, "100 Continue") before it sends more.
    if (!flush()) return -1;
    // A large read goes straight to the caller; a small one fills the buffer. The socket is
    // tried first and waited on (poll, up to the deadline) only when it has nothing.
    const bool direct = size >= kBufferBytes;
    for (;;) {
      const ssize_t n = direct ? ::recv(fd_, ptr, size, MSG_DONTWAIT) : fill();
      if (n > 0 && direct) {
        if (in_head_) scan_head(ptr, static_cast<size_t>(n));
        return n;
      }
      if (n > 0) break;
      if (n == 0) return 0;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!is_readable()) return -1;  // the request did not arrive whole in time
    }
  }
  const size_t k = std::min(size, end_ - pos_);
  std::memcpy(ptr, buf_.data() + pos_, k);
  pos_ += k;
  if (in_head_) scan_head(ptr, k);
  return static_cast<ssize_t>(k);
}

ssize_t DeadlineStream::fill() {
  if (pos_ == end_) pos_ = end_ = 0;
  if (buf_.size() - end_ < kBufferBytes) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    if (buf_.size() - end_ < kBufferBytes)
      buf_.resize(std::max(2 * buf_.size(), end_ + kBufferBytes));
  }
  for (;;) {
    const size_t room = buf_.size() - end_;
    const ssize_t n = ::recv(fd_, buf_.data() + end_, room, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    drained_ = n > 0 && static_cast<size_t>(n) < room;
    if (n > 0) end_ += static_cast<size_t>(n);
    return n;
  }
}

void DeadlineStream::shrink() {
  if (pos_ == end_ && buf_.size() > 4 * kBufferBytes) {
    buf_ = std::vector<char>(kBufferBytes);
    pos_ = end_ = 0;
  }
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  if (continue_sent_ && std::string_view(ptr, size).rfind("HTTP/1.1 100 ", 0) == 0) {
    continue_sent_ = false;  // the poller asked for the body already
    return static_cast<ssize_t>(size);
  }
  if (out_.size() + size <= kHeldBytes) {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  if (!flush() || !send_all(ptr, size)) return -1;
  return static_cast<ssize_t>(size);
}

bool DeadlineStream::flush() {
  if (out_.empty()) return true;
  const bool ok = send_all(out_.data(), out_.size());
  out_.clear();
  return ok;
}

bool DeadlineStream::send_all(const char* ptr, size_t size) {
  // The socket is tried first and waited on (poll, up to the write timeout) only when full.
  while (size > 0) {
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      ptr += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || !is_writable()) return false;
  }
  return true;
}

namespace {
// `cache`, asked of the kernel the first time: the peer's address (getpeername) or ours.
template <typename Ask>
void cached_address(int fd, Ask ask, DeadlineStream::Address& cache, std::string& ip, int& port) {
  if (!cache.known) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (ask(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    address_of(addr, cache.ip, cache.port);
    cache.known = true;
  }
  ip = cache.ip;
  port = cache.port;
}
}  // namespace

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  cached_address(fd_, ::getpeername, remote_, ip, port);
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const {
  cached_address(fd_, ::getsockname, local_, ip, port);
}

BoundedServer::BoundedServer(ConnectionLimits limits, std::function<void()> on_reject)
    : limits_(limits), on_reject_(std::move(on_reject)) {
  new_task_queue = [this] {
    pool_ = new ConnectionPool(*this, limits_);
    return pool_;
  };
}

void BoundedServer::reject(int fd) const {
  const std::string body = R"({"error":"too many connections: the server holds )" +
                           std::to_string(limits_.connections) +
                           R"( open at once (--http-connections); retry later"})";
  const std::string response =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
      "application/json\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  // A new connection's send buffer is empty: the answer fits without waiting. Until session 31
  // one thread waited here for each refused client to close (up to kLingerS), one at a time: a
  // burst of 200 refused connections took minutes to clear.
  (void)::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  pool_->refuse(fd);
}

bool BoundedServer::process_and_close_socket(socket_t sock) {
  if (ConnectionPool::rejecting_connection()) {
    if (on_reject_) on_reject_();
    reject(sock);
  } else {
    pool_->adopt(sock);  // on the accept thread: the poller waits for its first request
  }
  return true;
}

namespace {
// Waits for the connection's next request to be whole, for `window_s` at most and only while no
// other connection waits for a thread (a request's head and body often come in two segments).
Connection::Progress follow(Connection& c, ConnectionPool& pool, double window_s, double slice_s) {
  Connection::Progress p = Connection::Progress::kWaiting;
  if (c.stream.buffered()) p = c.receive();  // pipelined
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(window_s));
  while (p == Connection::Progress::kWaiting && Clock::now() < until && !pool.others_ready()) {
    if (wait_fd(c.fd, POLLIN, slice_s)) p = c.receive();
  }
  return p;
}
}  // namespace

BoundedServer::After BoundedServer::serve(Connection& c, ConnectionPool& pool) {
  // A client that sends its next request soon (within this time of its answer) is served by the
  // same thread, not handed back to the poller and on to another thread: the path of a busy
  // keep-alive client stays one wake-up per request. The thread waits in slices and stops as
  // soon as another connection waits for a thread.
  constexpr double kFollowS = 0.02, kFollowSliceS = 0.002;
  current_stream = &c.stream;
  After after = After::kWait;
  for (;;) {
    bool closed = false;
    const bool last = c.served + 1 >= keep_alive_max_count_ || stopping();
    bool ok = process_request(c.stream, last, closed, nullptr);
    ++c.served;
    if (c.stream.timed_out()) {
      // Too slow: the rest of the request is not read, so the connection cannot go on.
      if (on_slow_) on_slow_(c.stream);
      ok = false;
    }
    // httplib writes "Connection: close" where asked but serves the connection on: what follows
    // (an unread body) would be read as the next request, and wait for the read timeout.
    if (c.stream.held_closes()) closed = true;
    if (!c.stream.flush()) ok = false;
    if (on_sent_) on_sent_();
    c.begun = c.continued = false;
    c.scan.reset();
    if (!ok || closed || last) {
      after = After::kLinger;
      break;
    }
    c.stream.shrink();
    const Connection::Progress p = follow(c, pool, kFollowS, kFollowSliceS);
    if (p == Connection::Progress::kReady) continue;
    if (p == Connection::Progress::kClosed) after = After::kClose;
    break;
  }
  current_stream = nullptr;
  return after;
}

bool BoundedServer::widen_backlog() {
  const socket_t sock = svr_sock_;
  return sock != INVALID_SOCKET && ::listen(sock, SOMAXCONN) == 0;
}

}  // namespace serf::serve
