#include "serve/load/http_channel.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include "serf/core/statistics.h"

namespace serf::serve::load {

namespace {

constexpr uint32_t kTimerTag = UINT32_MAX;

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

}  // namespace

class HttpChannel::Impl {
 public:
  explicit Impl(HttpChannelOptions o) : o_(std::move(o)) {}
  ~Impl();
  Status init();
  void send(uint64_t id) {
    waiting_.push_back({id, false});
    pump();
  }
  void poll(Clock::time_point until, const CompletionFn& done);
  size_t in_flight() const { return waiting_.size() + active_; }
  size_t waiting() const { return waiting_.size(); }
  size_t connections() const { return open_; }

 private:
  enum class State { kClosed, kConnecting, kIdle, kBusy };
  struct Conn {
    int fd = -1;
    State state = State::kClosed;
    uint64_t id = 0;
    bool retried = false;  // the request was sent again after a reused connection dropped it
    size_t written = 0;
    Clock::time_point sent, deadline;
    std::string in;  // bytes read and not parsed yet
    int served = 0;  // responses read on this connection
  };
  struct Waiting {
    uint64_t id;
    bool retried;
  };

  void pump();
  bool open(size_t c, Waiting w);
  void start(size_t c);
  void write_some(size_t c);
  void on_event(size_t c, uint32_t events);
  void read_some(size_t c, bool to_eof);
  void finish(size_t c, int status, std::string_view body, std::string_view error);
  void fail(size_t c, const std::string& error);
  void close_conn(size_t c);
  void arm_timer(Clock::time_point at);
  void emit(Completion c) {
    if (done_ != nullptr) {
      (*done_)(c);
    } else {
      // Ended outside poll() (a connection refused at once): delivered by the next poll.
      late_.push_back({c.id, c.status, c.sent, c.done, std::string(c.error)});
    }
  }

  HttpChannelOptions o_;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  int epoll_fd_ = -1, timer_fd_ = -1;
  Clock::time_point armed_ = Clock::time_point::max();
  std::vector<Conn> conns_;
  std::vector<size_t> idle_;  // most recently used last (reused first: it is least likely closed)
  std::deque<Waiting> waiting_;
  size_t active_ = 0;  // connecting or busy
  size_t open_ = 0;
  const CompletionFn* done_ = nullptr;
  struct Late {
    uint64_t id;
    int status;
    Clock::time_point sent, done;
    std::string error;
  };
  std::vector<Late> late_;
};

HttpChannel::Impl::~Impl() {
  for (Conn& c : conns_) {
    if (c.fd >= 0) ::close(c.fd);
  }
  if (timer_fd_ >= 0) ::close(timer_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

Status HttpChannel::Impl::init() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(o_.endpoint.port);
  const int rc = getaddrinfo(o_.endpoint.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidArgument("--url: cannot resolve host \"" + o_.endpoint.host +
                           "\": " + gai_strerror(rc));
  }
  std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
  addr_len_ = res->ai_addrlen;
  freeaddrinfo(res);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd_ < 0 || timer_fd_ < 0) return Internal(errno_text("epoll/timerfd", errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kTimerTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev) != 0) {
    return Internal(errno_text("epoll_ctl", errno));
  }
  conns_.resize(static_cast<size_t>(std::max(o_.max_connections, 1)));
  return Status::Ok();
}

void HttpChannel::Impl::pump() {
  while (!waiting_.empty()) {
    size_t c = conns_.size();
    while (!idle_.empty() && c == conns_.size()) {
      c = idle_.back();
      idle_.pop_back();
      if (conns_[c].state != State::kIdle) c = conns_.size();
    }
    if (c < conns_.size()) {
      const Waiting w = waiting_.front();
      waiting_.pop_front();
      conns_[c].id = w.id;
      conns_[c].retried = w.retried;
      start(c);
      continue;
    }
    if (open_ >= conns_.size()) return;  // every connection busy: the request waits
    for (c = 0; conns_[c].state != State::kClosed; ++c) {
    }
    const Waiting w = waiting_.front();
    waiting_.pop_front();
    open(c, w);
  }
}

// Starts connecting; the request goes out when the connection is writable.
bool HttpChannel::Impl::open(size_t c, Waiting w) {
  Conn& k = conns_[c];
  k = Conn{};
  k.id = w.id;
  k.retried = w.retried;
  k.sent = Clock::now();
  k.deadline = k.sent + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(o_.timeout_s));
  k.fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (k.fd < 0) {
    const std::string e = errno_text("socket", errno);
    emit({w.id, kStatusError, k.sent, Clock::now(), {}, e});
    return false;
  }
  const int one = 1;
  setsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ++open_;
  ++active_;
  k.state = State::kConnecting;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u32 = static_cast<uint32_t>(c);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, k.fd, &ev);
  if (::connect(k.fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_) != 0 &&
      errno != EINPROGRESS) {
    fail(c, errno_text("connect to " + o_.endpoint.text(), errno));
    return false;
  }
  return true;
}

void HttpChannel::Impl::start(size_t c) {
  Conn& k = conns_[c];
  k.state = State::kBusy;
  ++active_;
  k.written = 0;
  k.sent = Clock::now();
  k.deadline = k.sent + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(o_.timeout_s));
  write_some(c);
}

void HttpChannel::Impl::write_some(size_t c) {
  Conn& k = conns_[c];
  while (k.state == State::kBusy && k.written < o_.request.size()) {
    const ssize_t n =
        ::send(k.fd, o_.request.data() + k.written, o_.request.size() - k.written, MSG_NOSIGNAL);
    if (n > 0) {
      k.written += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // EPOLLOUT (edge-triggered) resumes
    } else {
      fail(c, errno_text("send", errno));
      return;
    }
  }
}

void HttpChannel::Impl::on_event(size_t c, uint32_t events) {
  Conn& k = conns_[c];
  if (k.state == State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(k.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail(c, errno_text("connect to " + o_.endpoint.text(), err));
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
    --active_;  // start() counts it again
    start(c);
  } else if ((events & EPOLLOUT) && k.state == State::kBusy) {
    write_some(c);
  }
  if (k.state != State::kClosed && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    read_some(c, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
  }
}

// Reads what arrived. With edge-triggered events a short read means the socket is empty (the
// next bytes raise a new edge), unless the peer hung up: then read on to the end.
void HttpChannel::Impl::read_some(size_t c, bool to_eof) {
  Conn& k = conns_[c];
  char buf[64 << 10];
  bool eof = false;
  int err = 0;
  for (;;) {
    const ssize_t n = ::recv(k.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      k.in.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof(buf) && !to_eof) break;
    } else if (n == 0) {
      eof = true;
      break;
    } else if (errno == EINTR) {
      continue;
    } else {
      if (errno != EAGAIN && errno != EWOULDBLOCK) err = errno;
      break;
    }
  }
  while (k.state == State::kBusy && !k.in.empty()) {
    HttpResponse r;
    size_t used = 0;
    std::string error;
    const ParseState s = parse_http_response(k.in, &r, &used, &error);
    if (s == ParseState::kNeedMore) break;
    if (s == ParseState::kBad)
      return fail(c, "bad response from " + o_.endpoint.text() + ": " + error);
    k.in.erase(0, used);
    ++k.served;
    finish(c, r.status, r.body, {});
    if (r.close) eof = true;
  }
  if (k.state == State::kIdle && !k.in.empty()) {
    eof = true;  // bytes nobody asked for: the connection is out of step
  }
  if (!eof && err == 0) return;
  if (k.state == State::kBusy) {
    // A reused connection closed by the server as the request left (its keep-alive ran out):
    // nothing of it was read, so it goes out again on another connection, once.
    if (k.in.empty() && k.served > 0 && !k.retried) {
      waiting_.push_front({k.id, true});
      --active_;
      close_conn(c);
      return;
    }
    return fail(c, err != 0 ? errno_text("recv", err)
                            : "the server closed the connection before answering");
  }
  if (k.state != State::kClosed) close_conn(c);
}

void HttpChannel::Impl::finish(size_t c, int status, std::string_view body,
                               std::string_view error) {
  Conn& k = conns_[c];
  --active_;
  k.state = State::kIdle;
  idle_.push_back(c);
  emit({k.id, status, k.sent, Clock::now(), body, error});
}

void HttpChannel::Impl::fail(size_t c, const std::string& error) {
  Conn& k = conns_[c];
  if (k.state == State::kBusy || k.state == State::kConnecting) {
    --active_;
    k.state = State::kIdle;  // close_conn below takes it out
    emit({k.id, kStatusError, k.sent, Clock::now(), {}, error});
  }
  close_conn(c);
}

void HttpChannel::Impl::close_conn(size_t c) {
  Conn& k = conns_[c];
  if (k.fd >= 0) {
    ::close(k.fd);  // also leaves the epoll set
    --open_;
  }
  k.fd = -1;
  k.state = State::kClosed;
  k.in.clear();
  idle_.erase(std::remove(idle_.begin(), idle_.end(), c), idle_.end());
}

void HttpChannel::Impl::arm_timer(Clock::time_point at) {
  if (at == armed_) return;
  armed_ = at;
  itimerspec spec{};
  if (at != Clock::time_point::max()) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch());
    spec.it_value.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns.count() % 1000000000);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  }
  // steady_clock is CLOCK_MONOTONIC on Linux: an absolute time of the same clock.
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void HttpChannel::Impl::poll(Clock::time_point until, const CompletionFn& done) {
  done_ = &done;
  for (const Late& l : late_) done({l.id, l.status, l.sent, l.done, {}, l.error});
  late_.clear();
  Clock::time_point wake = until;
  for (const Conn& k : conns_) {
    if (k.state == State::kBusy || k.state == State::kConnecting) wake = std::min(wake, k.deadline);
  }
  const Clock::time_point now = Clock::now();
  int timeout_ms = -1;
  if (wake <= now) {
    timeout_ms = 0;
  } else {
    arm_timer(wake);
  }
  epoll_event events[256];
  const int n = epoll_wait(epoll_fd_, events, 256, timeout_ms);
  for (int i = 0; i < n; ++i) {
    const uint32_t tag = events[i].data.u32;
    if (tag == kTimerTag) {
      uint64_t expirations = 0;
      (void)::read(timer_fd_, &expirations, sizeof(expirations));
      armed_ = Clock::time_point::max();
      continue;
    }
    if (conns_[tag].state != State::kClosed) on_event(tag, events[i].events);
  }
  const Clock::time_point after = Clock::now();
  for (size_t c = 0; c < conns_.size(); ++c) {
    Conn& k = conns_[c];
    if ((k.state == State::kBusy || k.state == State::kConnecting) && k.deadline <= after) {
      --active_;
      k.state = State::kIdle;
      emit({k.id,
            kStatusTimeout,
            k.sent,
            after,
            {},
            "no answer within " + format_g(o_.timeout_s) + " s (--timeout)"});
      close_conn(c);  // HTTP/1.1 cannot cancel one request: the connection goes
    }
  }
  pump();
  done_ = nullptr;
}

HttpChannel::HttpChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpChannel::~HttpChannel() = default;

StatusOr<std::unique_ptr<HttpChannel>> HttpChannel::Create(HttpChannelOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  SERF_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<HttpChannel>(new HttpChannel(std::move(impl)));
}

void HttpChannel::send(uint64_t id) { impl_->send(id); }
void HttpChannel::poll(Clock::time_point until, const CompletionFn& done) {
  impl_->poll(until, done);
}
size_t HttpChannel::in_flight() const { return impl_->in_flight(); }
size_t HttpChannel::waiting() const { return impl_->waiting(); }
size_t HttpChannel::connections() const { return impl_->connections(); }

}  // namespace serf::serve::load
