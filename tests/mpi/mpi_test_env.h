#pragma once
// The MPI environment of a test run under mpiexec, and the guard that keeps a failed rank 0 from
// leaving its nodes waiting.
#include <catch2/catch.hpp>
#include <memory>
#include <utility>

#include "mpi/runtime.h"

namespace serf::mpi::testing {

// One Environment for the whole test process (MPI is initialised once).
inline Environment& environment() {
  static std::unique_ptr<Environment> env = [] {
    auto e = Environment::Create();
    if (!e.ok()) FAIL(e.status().message());
    return std::move(e).value();
  }();
  return *env;
}

// Rank 0 holds one while it drives the nodes: a failed REQUIRE leaves the scope without `done`
// and tears the job down instead of leaving the nodes waiting for messages.
struct AbortOnFailure {
  bool done = false;
  AbortOnFailure() = default;
  AbortOnFailure(const AbortOnFailure&) = delete;
  AbortOnFailure& operator=(const AbortOnFailure&) = delete;
  ~AbortOnFailure() {
    if (!done) environment().abort(1);
  }
};

}  // namespace serf::mpi::testing
