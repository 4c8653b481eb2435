#pragma once
// The connection layer under the HTTP front end: cpp-httplib parses and routes, this decides how
// long a client may take and how many are served at once. httplib's own socket reads time out
// per read only, so a client that trickles its headers a byte at a time would hold a thread for
// ever; here each request must arrive whole within a deadline (else the front end answers 408).

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace serf::serve {

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

 private:
  // Follows the bytes httplib takes (the head, one byte at a time) up to the empty line.
  void scan_head(const char* ptr, size_t n);
  int fd_;
  double read_timeout_s_, write_timeout_s_;
  std::chrono::steady_clock::time_point deadline_;
  // cpp-httplib reads header lines one byte at a time: without a buffer each byte cost a poll and
  // a recv (two system calls), the front end's largest cost in the VM (bench_frontend).
  char buf_[16384];
  size_t pos_ = 0, end_ = 0;
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

// httplib's task queue: `workers` threads serve one connection each; a connection that finds
// them all busy is handed to a thread that answers 503 and closes it (handlers see
// rejecting_connection() true there).
class ConnectionPool : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(int workers);
  ~ConnectionPool() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  static bool rejecting_connection();

 private:
  void work(bool rejecter);
  int workers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_, overflow_;
  int busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

struct ConnectionLimits {
  int connections = 64;
  double read_timeout_s = 10;
  double write_timeout_s = 10;
  double keep_alive_s = 5;
};

// httplib's server with the connection loop above; `on_reject` is called for each connection
// answered 503 for lack of a thread.
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

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits for the next request on a keep-alive connection; false: idle too long or stopping.
  bool wait_for_request(int fd) const;
  void reject(int fd) const;
  ConnectionLimits limits_;
  std::function<void()> on_reject_;
  std::function<void()> on_sent_;
  std::function<void(DeadlineStream&)> on_slow_;
  std::function<void()> on_silent_;
};

}  // namespace serf::serve
