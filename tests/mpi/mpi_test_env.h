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

// The emulated nodes' profile of the runtime tests: 4 nodes x 2 cores, K in {1, 2, 4} and every
// (i, T) with i*T <= 2; `mean_ms(i, K, T)` is each tuple's service time, `scv` its SCV.
template <typename MeanMs>
Profile emulated_test_profile(MeanMs mean_ms, double scv) {
  Profile p;
  p.model = "emulated";
  p.hardware = {4, 2};
  for (int k : {1, 2, 4}) {
    for (int t = 1; t <= 2; ++t) {
      for (int i = 1; i * t <= 2; ++i)
        p.tuples.push_back({{i, k, t}, mean_ms(i, k, t), scv, 10, 0});
    }
  }
  p.reindex();
  return p;
}

}  // namespace serf::mpi::testing
