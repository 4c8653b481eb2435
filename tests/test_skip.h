#pragma once
// SERF_SKIP(why): a Catch2 v2 test case that cannot run on this machine (no AVX-512, no GPU) says
// so and returns. Every Catch2 test runs with -w NoAssertions (serf_add_test), so such a case
// fails; keep skippable cases under their own tag and CTest entry (serf_add_test_run with
// SKIPPABLE), whose "SKIPPED (" line CTest then reports as a skip, not a pass.
#include <catch2/catch.hpp>

#define SERF_SKIP(why)               \
  do {                               \
    WARN("SKIPPED (" << why << ")"); \
    return;                          \
  } while (false)
