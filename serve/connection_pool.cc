// The HTTP front end's connections between requests: one poller thread (epoll) reads what each
// client sends until its request is whole, then hands it to a serving thread
// (serve/http_connection.h).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "serve/http_connection.h"

namespace serf::serve {

namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_rejecting = false;

// How often the poller looks for connections past their times (and for a stop).
constexpr int kTickMs = 50;

Clock::time_point after_s(double s) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Reads and drops what the client sent; true once it closed (or failed).
bool drained(int fd) {
  char sink[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

}  // namespace

Connection::Progress Connection::receive() {
  using State = RequestScan::State;
  bool ended = false;    // the client closed, or the socket failed
  bool drained = false;  // this call's last read emptied the socket
  for (;;) {
    if (!begun && stream.buffered()) {
      begun = true;  // the request's first byte: its deadline starts
      stream.start_request();
    }
    if (begun && scan.scan(stream.pending()) != State::kIncomplete) return Progress::kReady;
    if (ended) break;
    // The socket held no more at this call's last read: wait for the rest (the caller polls)
    // rather than ask again at once for nothing.
    if (drained) break;
    const ssize_t n = stream.fill();
    drained = stream.drained();
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      ended = true;
    } else if (n < 0) {
      break;  // nothing more for now
    }
  }
  // A client that closed after part of a request gets httplib's answer to what it sent.
  if (ended) return begun ? Progress::kReady : Progress::kClosed;
  if (begun && !continued && scan.expects_continue()) {
    // The client waits for this before it sends the body (httplib's own is then not sent).
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)::send(fd, kContinue, sizeof(kContinue) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    stream.continue_sent();
    continued = true;
  }
  return Progress::kWaiting;
}

ConnectionPool::ConnectionPool(BoundedServer& server, const ConnectionLimits& limits)
    : server_(server), limits_(limits) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (epoll_fd_ < 0 || wake_fd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    std::perror("serf: the HTTP front end's poller (epoll, eventfd)");
    std::abort();  // no file descriptors left at start: nothing could be served
  }
  threads_.emplace_back([this] { poll_loop(); });
  for (int i = 0; i < limits_.threads; ++i) threads_.emplace_back([this] { work(); });
}

ConnectionPool::~ConnectionPool() {
  shutdown();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

bool ConnectionPool::rejecting_connection() { return t_rejecting; }

bool ConnectionPool::others_ready() { return ready_count_.load(std::memory_order_relaxed) > 0; }

void ConnectionPool::enqueue(std::function<void()> fn) {
  // BoundedServer::process_and_close_socket, on the accept thread: adopt() or, over the cap, a
  // 503 written at once and refuse(); neither waits on the client.
  t_rejecting = open_.load() >= limits_.connections;
  fn();
  t_rejecting = false;
}

void ConnectionPool::adopt(int fd) {
  ++open_;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // small answers leave at once
  auto* c = new Connection(fd, limits_);
  c->idle_until = after_s(limits_.keep_alive_s);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    arriving_.push_back(c);
  }
  const uint64_t one_event = 1;
  (void)::write(wake_fd_, &one_event, sizeof(one_event));
}

void ConnectionPool::refuse(int fd) {
  ::shutdown(fd, SHUT_WR);  // the 503, then our end
  if (drained(fd) || refused_.load() >= kRefusedLingering) {
    ::close(fd);  // the client closed already (or too many linger: what it sends later is reset)
    return;
  }
  ++refused_;
  auto* c = new Connection(fd, limits_);
  c->refused = c->closing = true;
  c->closing_until = after_s(kLingerS);
  wait_in_poller(c);
}

void ConnectionPool::wait_in_poller(Connection* c) {
  if (!c->begun) c->idle_until = after_s(limits_.keep_alive_s);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    arriving_.push_back(c);
  }
  const uint64_t one_event = 1;
  (void)::write(wake_fd_, &one_event, sizeof(one_event));
}

void ConnectionPool::ready(Connection* c) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back(c);
    ++ready_count_;
  }
  cv_.notify_one();
}

void ConnectionPool::close_now(Connection* c) {
  ::close(c->fd);  // leaves the epoll set with it
  if (c->refused) {
    --refused_;
  } else {
    --open_;
  }
  delete c;
}

void ConnectionPool::linger(Connection* c) {
  ::shutdown(c->fd, SHUT_WR);  // the answer, then our end
  if (drained(c->fd)) return close_now(c);
  c->closing = true;
  c->closing_until = after_s(kLingerS);
  wait_in_poller(c);
}

void ConnectionPool::arm(Connection* c) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.ptr = c;
  if (::epoll_ctl(epoll_fd_, c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
    c->registered = true;
    return;
  }
  remove(c);
  close_now(c);
}

void ConnectionPool::remove(Connection* c) {
  waiting_[c->slot] = waiting_.back();
  waiting_[c->slot]->slot = c->slot;
  waiting_.pop_back();
}

void ConnectionPool::expire(Clock::time_point now, bool stopping) {
  for (size_t i = waiting_.size(); i-- > 0;) {
    Connection* c = waiting_[i];
    if (c->closing) {
      if (now < c->closing_until) continue;
      remove(c);
      close_now(c);
    } else if (c->begun) {
      if (now < c->stream.deadline()) continue;
      // Past its read deadline: a serving thread answers 408 (or httplib's own 4xx).
      remove(c);
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
      c->registered = false;
      ready(c);
    } else if (stopping || now >= c->idle_until) {
      // Silent: a connection that sent nothing at all (not one idle after its requests).
      if (!stopping && c->served == 0) server_.silent();
      remove(c);
      close_now(c);
    }
  }
}

void ConnectionPool::poll_loop() {
  epoll_event events[64];
  auto next_tick = Clock::now();
  for (;;) {
    std::deque<Connection*> arrived;
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      arrived.swap(arriving_);
      stop = stopping_;
    }
    for (Connection* c : arrived) {
      c->slot = waiting_.size();
      waiting_.push_back(c);
      arm(c);
    }
    const auto now = Clock::now();
    const bool stopping = stop || server_.stopping();
    if (now >= next_tick || stopping) {
      expire(now, stopping);
      next_tick = now + std::chrono::milliseconds(kTickMs);
    }
    if (stop && open_.load() == 0 && refused_.load() == 0) break;
    const int n = ::epoll_wait(epoll_fd_, events, 64, kTickMs);
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      if (c == nullptr) {
        uint64_t count = 0;
        (void)::read(wake_fd_, &count, sizeof(count));
        continue;
      }
      if (c->closing) {
        if (drained(c->fd)) {
          remove(c);
          close_now(c);
        } else {
          arm(c);
        }
        continue;
      }
      switch (c->receive()) {
        case Connection::Progress::kWaiting:
          arm(c);
          break;
        case Connection::Progress::kReady:
          remove(c);
          ready(c);
          break;
        case Connection::Progress::kClosed:
          remove(c);
          close_now(c);
          break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  poller_done_ = true;
  cv_.notify_all();
}

void ConnectionPool::work() {
  for (;;) {
    Connection* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !ready_.empty() || poller_done_; });
      if (ready_.empty()) return;
      c = ready_.front();
      ready_.pop_front();
      --ready_count_;
    }
    switch (server_.serve(*c, *this)) {
      case BoundedServer::After::kWait:
        wait_in_poller(c);
        break;
      case BoundedServer::After::kLinger:
        linger(c);
        break;
      case BoundedServer::After::kClose:
        close_now(c);
        break;
    }
  }
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  const uint64_t one_event = 1;
  (void)::write(wake_fd_, &one_event, sizeof(one_event));
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace serf::serve
