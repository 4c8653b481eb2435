#include "serf/core/status.h"

#include <catch2/catch.hpp>

namespace {

serf::StatusOr<int> half(int x) {
  if (x % 2 != 0) return serf::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

serf::Status quarter(int x, int* out) {
  SERF_ASSIGN_OR_RETURN(int h, half(x));
  SERF_ASSIGN_OR_RETURN(*out, half(h));
  return serf::Status::Ok();
}

}  // namespace

TEST_CASE("Status maps error kinds to exit codes", "[core]") {
  CHECK(serf::Status::Ok().exit_code() == 0);
  CHECK(serf::InvalidArgument("x").exit_code() == 2);
  CHECK(serf::NotFound("x").exit_code() == 2);
  CHECK(serf::Infeasible("x").exit_code() == 3);
  CHECK(serf::InvalidArgument("bad").with_context("f.json").message() == "f.json: bad");
}

TEST_CASE("SERF_ASSIGN_OR_RETURN propagates the first error", "[core]") {
  int out = 0;
  REQUIRE(quarter(12, &out).ok());
  CHECK(out == 3);
  serf::Status s = quarter(6, &out);
  CHECK(s.code() == serf::StatusCode::kInvalidArgument);
  CHECK(s.message() == "odd: 3");
}
