#pragma once
// --arrivals and --arrival-scv of the commands that generate load (`serf serve`, `serf profile
// --exhaustive`): declared and checked in one place, so both read and fail alike.

#include <CLI/CLI.hpp>
#include <string>

#include "serf/core/arrivals.h"
#include "serf/core/status.h"

namespace serf::cli {

struct ArrivalFlags {
  std::string kind = "poisson";
  double scv = 1.0;

  // `when` prefixes both help texts, e.g. "with --exhaustive: " (or "").
  void add(CLI::App* sub, const std::string& when) {
    sub->add_option("--arrivals", kind,
                    when +
                        "arrival process: poisson, gamma (bursty, see --arrival-scv) or "
                        "deterministic");
    sub->add_option("--arrival-scv", scv,
                    when +
                        "squared coefficient of variation of the gaps (1 for poisson; any > 0 "
                        "for gamma)");
  }

  // The arrival kind, with the SCV checked against it (Poisson needs 1): call before any node
  // starts, so a bad flag costs nothing.
  StatusOr<ArrivalKind> check() const {
    auto parsed = parse_arrival_kind(kind);
    if (!parsed.ok()) return parsed.status().with_context("--arrivals");
    auto process = ArrivalProcess::Create(*parsed, 1.0, scv);
    if (!process.ok()) return process.status().with_context("--arrival-scv");
    return *parsed;
  }
};

}  // namespace serf::cli
