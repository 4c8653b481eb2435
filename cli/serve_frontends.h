#pragma once
// `serf serve --http ADDR [--grpc ADDR]`: the KServe v2 front ends on rank 0, their flags, the
// served model's description and the metrics, around a running controller.

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "cli/runtime_launch.h"
#include "serf/core/planner.h"
#include "serve/controller.h"
#include "serve/metrics.h"

namespace serf::cli {

struct FrontendFlags {
  std::string http;         // HOST:PORT, empty: no HTTP front end
  std::string grpc;         // HOST:PORT, empty: no gRPC front end
  int max_queue = -1;       // per unit; -1: 64 with a front end, no bound for generated load alone
  double max_body_mb = 64;  // larger HTTP bodies / gRPC messages are refused (413)
  int http_connections = 1024;  // open at once
  int http_threads = 64;        // serving whole requests
  double grpc_max_connection_age_s = 60;
  double read_timeout_s = 10;  // a whole request must arrive within this
  std::string profile;         // optional: tuple profile for the predicted latency
  double metrics_window_s = 30;
  bool any() const { return !http.empty() || !grpc.empty(); }
};

void add_frontend_flags(CLI::App* sub, FrontendFlags* flags);
// Checks the flags' values (one line naming the flag on error).
Status check_frontend_flags(const FrontendFlags& flags);

class ServeFrontends;

// Everything that serves clients while the controller runs; stops them when destroyed.
class ServeFrontends {
 public:
  // Builds the model description, the metrics (wired to `controller`'s answers) and starts the
  // front ends `flags` name; prints where they listen.
  static StatusOr<std::unique_ptr<ServeFrontends>> Start(
      const FrontendFlags& flags, const RuntimeFlags& runtime, RuntimeSession& session,
      serve::Controller& controller, std::shared_ptr<const ConfigurationTable> table);
  ~ServeFrontends();
  // Stops accepting and joins the front ends' threads; every request they handed over has
  // been answered (the controller drained).
  void stop();
  serve::ServeMetrics* metrics() const;

  struct State;

 private:
  explicit ServeFrontends(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace serf::cli
