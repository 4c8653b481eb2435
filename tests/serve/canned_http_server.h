#pragma once
// A minimal HTTP/1.1 server for the load client's tests and benchmark: one thread, epoll, and the
// same canned answer to every request (after an optional delay), so what is measured is the client.
// It can also drop a keep-alive connection after some answers (as a server whose keep-alive timer
// ran out) or never answer.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <queue>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace serf::testing {

class CannedHttpServer {
 public:
  struct Options {
    int status = 200;
    std::string body = R"({"model_name":"m","outputs":[]})";
    double delay_s = 0;   // answer this long after the request arrived
    int close_after = 0;  // > 0: close each connection after this many answers
    bool silent = false;  // read requests, never answer
  };

  explicit CannedHttpServer(Options o) : o_(std::move(o)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    // Port 0 on the loopback cannot be taken; a failure here is the machine's, said at once.
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      throw std::runtime_error(std::string("canned server: bind: ") + std::strerror(errno));
    }
    ::listen(listen_fd_, 1024);
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    const std::string status_text = o_.status == 200 ? "OK" : "Error";
    answer_ =
        "HTTP/1.1 " + std::to_string(o_.status) + " " + status_text +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(o_.body.size()) +
        "\r\n\r\n" + o_.body;
    epoll_fd_ = epoll_create1(0);
    add(listen_fd_);
    thread_ = std::thread([this] { loop(); });
  }
  ~CannedHttpServer() {
    stop_ = true;
    thread_.join();
    for (auto& [fd, c] : conns_) ::close(fd);
    ::close(listen_fd_);
    ::close(epoll_fd_);
  }
  int port() const { return port_; }
  uint64_t requests() const { return requests_.load(); }
  uint64_t connections() const { return accepted_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn {
    std::string in;
    int answered = 0;
  };
  struct Due {
    Clock::time_point at;
    int fd;
    bool operator>(const Due& o) const { return at > o.at; }
  };

  void add(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  void close_fd(int fd) {
    ::close(fd);
    conns_.erase(fd);
  }
  void answer(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;  // closed by the client meanwhile
    (void)::send(fd, answer_.data(), answer_.size(), MSG_NOSIGNAL);
    if (o_.close_after > 0 && ++it->second.answered >= o_.close_after) close_fd(fd);
  }
  // Complete requests at the front of `c.in` (headers and Content-Length body).
  int take_requests(Conn& c) {
    int n = 0;
    for (;;) {
      const size_t end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) return n;
      size_t length = 0;
      const size_t at = c.in.find("Content-Length: ");
      if (at != std::string::npos && at < end) length = std::stoul(c.in.substr(at + 16));
      if (c.in.size() < end + 4 + length) return n;
      c.in.erase(0, end + 4 + length);
      ++n;
    }
  }
  void loop() {
    epoll_event events[64];
    while (!stop_) {
      int wait_ms = 20;
      if (!due_.empty()) {
        const double left =
            std::chrono::duration<double, std::milli>(due_.top().at - Clock::now()).count();
        wait_ms = std::max(0, std::min(20, static_cast<int>(left)));
      }
      const int n = epoll_wait(epoll_fd_, events, 64, wait_ms);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd_) {
          for (int c; (c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
            const int one = 1;
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            conns_[c] = Conn{};
            add(c);
            ++accepted_;
          }
          continue;
        }
        char buf[65536];
        const ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
        if (got <= 0) {
          close_fd(fd);
          continue;
        }
        Conn& c = conns_[fd];
        c.in.append(buf, static_cast<size_t>(got));
        const int k = take_requests(c);
        requests_ += static_cast<uint64_t>(k);
        for (int j = 0; j < k && !o_.silent; ++j) {
          if (o_.delay_s > 0) {
            due_.push({Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(o_.delay_s)),
                       fd});
          } else {
            answer(fd);
          }
        }
      }
      while (!due_.empty() && due_.top().at <= Clock::now()) {
        answer(due_.top().fd);
        due_.pop();
      }
    }
  }

  Options o_;
  int listen_fd_ = -1, epoll_fd_ = -1, port_ = 0;
  std::string answer_;
  std::map<int, Conn> conns_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0}, accepted_{0};
  std::thread thread_;
};

}  // namespace serf::testing
