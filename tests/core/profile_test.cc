// serf/core/profile.h: configurations and tuples, the batch service table, tuple lookup. Reading
// and writing profiles: tests/io/profile_io_test.cc.
#include "serf/core/profile.h"

#include <catch2/catch.hpp>

#include "serf/core/service_level.h"

TEST_CASE("to_string shows b only when b > 1", "[core]") {
  CHECK(serf::to_string(serf::Configuration{2, 1, 4}) == "(c=2, K=1, T=4)");
  CHECK(serf::to_string(serf::Configuration{2, 1, 4, 8}) == "(c=2, K=1, T=4, b=8)");
  CHECK(serf::to_string(serf::ParallelismTuple{3, 2, 1}) == "(i=3, K=2, T=1)");
  CHECK(serf::to_string(serf::ParallelismTuple{3, 2, 1, 16}) == "(i=3, K=2, T=1, b=16)");
  CHECK_FALSE(serf::Configuration{2, 1, 4, 8} == serf::Configuration{2, 1, 4});
}

TEST_CASE("a batch of n < b is served by linear interpolation between profiled sizes", "[core]") {
  serf::Profile p;
  p.hardware = {1, 8};
  // i = 1: batches 1, 2 and 8 profiled; i = 2: batches 1 and 8.
  p.tuples = {{{1, 1, 1, 1}, 10.0, 0.04, 5},
              {{1, 1, 1, 2}, 12.0, 0.0, 5},
              {{1, 1, 1, 8}, 30.0, 0.01, 5},
              {{2, 1, 1, 1}, 11.0, 0.0, 5},
              {{2, 1, 1, 8}, 32.0, 0.0, 5}};
  p.reindex();
  auto t = serf::service_table(p, {2, 1, 1, 8});
  REQUIRE(t.ok());
  CHECK(t->service() == 2);
  CHECK(t->batch() == 8);
  CHECK(t->at(1, 1).mean_ms == 10.0);
  CHECK(t->at(1, 1).scv == 0.04);
  CHECK(t->at(1, 2).mean_ms == 12.0);
  // n = 5 lies halfway between 2 (12 ms, sd 0) and 8 (30 ms, sd 3 ms).
  CHECK(t->at(1, 5).mean_ms == Approx(21.0));
  CHECK(t->at(1, 5).scv == Approx((1.5 / 21.0) * (1.5 / 21.0)));
  CHECK(t->at(2, 4).mean_ms == Approx(11.0 + 3.0 * 3.0));
  CHECK(t->at(2, 8).mean_ms == 32.0);
  CHECK(t->full_batches()[1].mean_ms == 32.0);
  CHECK(t->single_requests()[1].mean_ms == 11.0);
  // b = 1 needs only the paper's tuples; a missing endpoint is named.
  CHECK(serf::service_table(p, {2, 1, 1, 1}).ok());
  auto missing = serf::service_table(p, {2, 1, 1, 2});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("(i=2, K=1, T=1, b=2)"));
  CHECK_FALSE(serf::service_table(p, {1, 1, 1, 0}).ok());
}

TEST_CASE("tuples_for names the missing tuple", "[core]") {
  serf::Profile p;
  p.hardware = {4, 8};
  p.tuples = {{{1, 1, 1}, 10.0, 0.01, 5}, {{2, 1, 1}, 12.5, 0.02, 5}};
  p.reindex();
  CHECK(p.tuples_for({2, 1, 1}).ok());
  auto missing = p.tuples_for({3, 1, 1});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("(i=3, K=1, T=1)"));
}
