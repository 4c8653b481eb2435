#pragma once
// The connection layer under the HTTP front end: cpp-httplib parses and routes, this decides how
// long a client may take and how many are served at once. httplib's own socket reads time out
// per read only, so a client that trickles its headers a byte at a time would hold a thread for
// ever; here each request must arrive whole within a deadline (else the front end answers 408).
// A connection waits for its request in one poller thread (epoll), not in a serving thread:
// only a whole request (RequestScan) takes a thread, so clients that send slowly, or keep idle
// connections open, hold a socket and a buffer each, never the threads the others need.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "serve/request_scan.h"

namespace serf::serve {

// Waits until `fd` is ready for `events` or `timeout_s` passed (EINTR resumes the wait).
bool wait_fd(int fd, short events, double timeout_s);
// How long a connection the server closes after an answer may still send before it is closed.
// Why not close() alone: close() with unread data in the socket, or data arriving after it, makes
// the kernel answer with a TCP reset, which can discard an answer the client has not read yet (a
// client still sending a body the server refused, or pipelining past the last request). So the
// poller ends our side (FIN after the answer), reads and drops what the client still sends until
// it closes or this time passes, then closes (ConnectionPool::linger and refuse).
constexpr double kLingerS = 2.0;

// A socket stream whose reads share one deadline per request.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, double read_timeout_s, double write_timeout_s)
      : fd_(fd), read_timeout_s_(read_timeout_s), write_timeout_s_(write_timeout_s) {}
  // A new request begins: it must be read whole within the read timeout from now.
  void start_request();
  // Whether a read of the current request waited past its deadline (the client sent too slowly),
  // and whether that was in its head (request line and headers) or its body.
  bool timed_out() const { return timed_out_; }
  bool in_head() const { return in_head_; }
  // The status of the final answer write() holds and has not sent (0: none), and its
  // replacement (an interim "100 Continue" before it stays).
  int held_status() const;
  void replace_held(const std::string& answer);
  // Whether the final answer held says "Connection: close" (the server closes after it: the
  // request's body, or what follows it, was not read).
  bool held_closes() const;
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }
  // Bytes already read from the socket and not yet taken (the next request's, when pipelined).
  bool buffered() const { return pos_ < end_; }
  std::string_view pending() const { return {buf_.data() + pos_, end_ - pos_}; }
  // Reads what the socket holds into the buffer without waiting: the bytes read, 0 at the end of
  // the stream, -1 on an error or when there is nothing (errno EAGAIN).
  ssize_t fill();
  // Whether the last fill() read less than the room it offered: the socket held nothing more
  // then, so a second recv() at once would find nothing (EAGAIN) and the caller may wait instead
  // (one system call less per segment: a request's head and body often come as two).
  bool drained() const { return drained_; }
  // The buffer back to its small size once a large request is taken (an idle connection keeps
  // no body's worth of memory).
  void shrink();
  // "100 Continue" was sent for the current request already: httplib's own is not sent again.
  void continue_sent() { continue_sent_ = true; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  // Sends what write() held back; false when the client did not take it in time.
  bool flush();
  // The first header line of the current request that is not a field line (RFC 9112 section 5:
  // a token, a colon, a value), e.g. a line without a colon, or whitespace before the colon or
  // at the line's start (obsolete line folding); empty when every line was one. cpp-httplib 0.11
  // drops such a line and serves the request; the RFC asks for 400 and a closed connection.
  const std::string& bad_header_line() const { return bad_header_; }
  // Whether the client closed (or reset) the connection: the socket reads end-of-file or fails.
  // Any thread may ask while the connection's thread waits for an answer (it reads nothing then).
  // A client that only half-closes (shutdown SHUT_WR) after its request counts as gone too.
  bool peer_closed() const;
  // The stream of the connection this thread serves (for httplib's handlers); null elsewhere.
  static const DeadlineStream* current();
  // The connection's two addresses, asked of the kernel once (httplib asks for both with every
  // request: two system calls each time, for values that never change on a connection).
  struct Address {
    bool known = false;
    std::string ip;
    int port = 0;
  };

 private:
  // Follows the bytes httplib takes (the head, one byte at a time) up to the empty line.
  void scan_head(const char* ptr, size_t n);
  int fd_;
  double read_timeout_s_, write_timeout_s_;
  std::chrono::steady_clock::time_point deadline_;
  // cpp-httplib reads header lines one byte at a time: without a buffer each byte cost a poll and
  // a recv (two system calls), the front end's largest cost in the VM (bench_frontend).
  // It grows to hold a whole request while the connection waits for it in the poller.
  static constexpr size_t kBufferBytes = 16384;
  std::vector<char> buf_ = std::vector<char>(kBufferBytes);
  size_t pos_ = 0, end_ = 0;
  bool drained_ = false;
  bool continue_sent_ = false;
  mutable Address remote_, local_;
  // httplib writes an answer's headers and its body in two calls: held here and sent in one
  // send() when the answer is complete (or before the next read), not two sends (two segments,
  // two wake-ups of the client) each after a poll.
  std::string out_;
  bool send_all(const char* ptr, size_t size);
  mutable bool timed_out_ = false;  // set by is_readable()
  size_t final_answer_at() const;   // where in out_ the final answer starts
  // The request head as it is read: in it, the current line (its first bytes), whether that line
  // holds a colon (or whitespace before it), the lines seen, the first bad line.
  bool in_head_ = false;
  std::string line_;
  bool line_colon_ = false, line_bad_ = false;
  int lines_ = 0;
  std::string bad_header_;
};

struct ConnectionLimits {
  int connections = 1024;  // open at once
  int threads = 64;        // serving whole requests (one waits for its answer on each)
  double read_timeout_s = 10;
  double write_timeout_s = 10;
  double keep_alive_s = 5;
  size_t max_body_bytes = 64u << 20;
};

// A client's connection and where its next request stands.
struct Connection {
  Connection(int fd, const ConnectionLimits& l)
      : fd(fd), stream(fd, l.read_timeout_s, l.write_timeout_s), scan(l.max_body_bytes) {}
  enum class Progress { kWaiting, kReady, kClosed };
  // Reads what the client sent: kReady when the request is whole (or can go no further: its
  // framing is refused, its deadline passed, its client closed after part of it), kClosed when
  // the client closed (or failed) between requests, else kWaiting. The first byte of a request
  // starts its deadline; a body awaited behind "Expect: 100-continue" is asked for here.
  Progress receive();
  int fd;
  DeadlineStream stream;
  RequestScan scan;
  std::chrono::steady_clock::time_point idle_until;  // closed then if no request has begun
  bool begun = false;       // a request's first byte is here: its read deadline runs
  bool continued = false;   // "100 Continue" sent for it
  bool registered = false;  // known to the poller's epoll set
  size_t slot = 0;          // its place in the poller's list
  size_t served = 0;        // requests answered on it
  bool refused = false;     // over the cap: answered 503, not counted among the open ones
  // Closed after an answer: the client may still send (a body not read); it is read and dropped
  // until the client closes or this time passes.
  bool closing = false;
  std::chrono::steady_clock::time_point closing_until;
};

class BoundedServer;

// httplib's task queue. The accept thread hands each connection to a poller thread (epoll) that
// reads what its client sends until a request is whole (or its deadline passes), then to one of
// `threads` serving threads; after the answer the connection goes back to the poller. A
// connection over `connections` open at once is answered 503 on the accept thread (a write that
// does not wait) and closed in the poller: refuse().
class ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(BoundedServer& server, const ConnectionLimits& limits);
  ~ConnectionPool() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  // The accept thread's new connection (BoundedServer::process_and_close_socket).
  void adopt(int fd);
  // Whether the accept thread is refusing the connection it hands over (over the cap).
  static bool rejecting_connection();
  // A connection answered 503 over the cap: its end is closed, what its client still sends is
  // read and dropped in the poller until it closes or kLingerS passes (no thread waits on it).
  // Past kRefusedLingering such connections at once, one is closed at once instead.
  void refuse(int fd);
  static constexpr int kRefusedLingering = 128;
  // Whether connections wait for a serving thread (a thread then takes the next at once).
  bool others_ready();

 private:
  void poll_loop();
  void work();
  void wait_in_poller(Connection* c);  // from a serving thread
  void ready(Connection* c);           // to a serving thread
  void close_now(Connection* c);
  void linger(Connection* c);  // closes gracefully, in the poller unless the client closed already
  void remove(Connection* c);  // from the poller's list
  // The poller's own: arm a connection, and hand over or close those past their times.
  void arm(Connection* c);
  void expire(std::chrono::steady_clock::time_point now, bool stopping);
  BoundedServer& server_;
  ConnectionLimits limits_;
  int epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<int> open_{0}, ready_count_{0}, refused_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Connection*> ready_, arriving_;
  bool stopping_ = false, poller_done_ = false;
  std::vector<Connection*> waiting_;  // the poller's own
  std::vector<std::thread> threads_;
};

// httplib's server with the connection loop above; `on_reject` is called for each connection
// answered 503 for lack of room.
class BoundedServer : public httplib::Server {
 public:
  BoundedServer(ConnectionLimits limits, std::function<void()> on_reject);
  // Call after binding. httplib listens with a backlog of 5: when the accept thread is slow (a
  // loaded machine) and more clients connect at once, the kernel answers with SYN cookies, and a
  // client segment that fails the cookie check is answered with a reset (ConnectionResetError in
  // a client that connected fine). The system's maximum (net.core.somaxconn) instead.
  bool widen_backlog();
  // Called on the connection's thread once each answer has been handed to the socket.
  void on_sent(std::function<void()> fn) { on_sent_ = std::move(fn); }
  // Called on the connection's thread for a request that did not arrive whole within the read
  // timeout (DeadlineStream::timed_out), with httplib's answer held: it may replace it. The
  // connection is closed after it.
  void on_slow_request(std::function<void(DeadlineStream&)> fn) { on_slow_ = std::move(fn); }
  // Called for a connection closed because it sent nothing within the keep-alive time.
  void on_silent(std::function<void()> fn) { on_silent_ = std::move(fn); }
  void silent() const {
    if (on_silent_) on_silent_();
  }
  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }
  // On a serving thread: answers the connection's whole request, and the next ones its client
  // sends at once. Then the connection waits in the poller for its next request (kWait), or is
  // closed: after an answer that closes it (kLinger: the client may still be sending), or as its
  // client closed (kClose).
  enum class After { kWait, kLinger, kClose };
  After serve(Connection& c, ConnectionPool& pool);

 private:
  bool process_and_close_socket(socket_t sock) override;
  void reject(int fd) const;
  ConnectionLimits limits_;
  ConnectionPool* pool_ = nullptr;
  std::function<void()> on_reject_;
  std::function<void()> on_sent_;
  std::function<void(DeadlineStream&)> on_slow_;
  std::function<void()> on_silent_;
};

}  // namespace serf::serve
