#pragma once
// Raw loopback sockets for the front-end tests that play a client byte by byte (http_test,
// grpc_test): connect, and read what the server sends until it closes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <string>

namespace serf::serve::testing {

// A socket connected to 127.0.0.1:`port`.
inline int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// Everything the server sends until it closes the connection (or `limit_s` passes); a reset
// ends it too, and sets *reset.
inline std::string read_all(int fd, double limit_s, bool* reset = nullptr) {
  timeval tv{0, 100000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno == ECONNRESET) {
      if (reset) *reset = true;
      break;
    }
  }
  return got;
}

}  // namespace serf::serve::testing
