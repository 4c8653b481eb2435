#include "serf/core/sizing.h"

#include <algorithm>
#include <boost/math/tools/roots.hpp>
#include <boost/math/tools/toms748_solve.hpp>
#include <climits>
#include <cmath>
#include <cstdio>
#include <limits>

#include "serf/core/statistics.h"

namespace serf {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double score_at(const ConfigurationFamily& fam, int c, double lambda, const Objective& objective,
                Prediction* out = nullptr) {
  const Prediction p = fam.predict(c, lambda);
  if (out != nullptr) *out = p;
  if (!p.stable) return kInf;
  return objective.score_ms(fam, c, lambda, p);
}

Status check_slo(double slo_ms) {
  if (!std::isfinite(slo_ms) || slo_ms <= 0) {
    return InvalidArgument("the SLO must be finite and > 0 ms (got " + format_sig4(slo_ms) + ")");
  }
  return Status::Ok();
}

// The best configuration (lowest score, canonical order on ties) on `nodes` nodes at cluster rate
// `rate`; with `slo_ms` finite, only configurations that meet it count.
SizingResult best_on(const std::vector<ConfigurationFamily>& families, int nodes, double rate,
                     double slo_ms, const Objective& objective) {
  SizingResult best;
  best.rate_per_s = rate;
  best.nodes = nodes;
  for (const ConfigurationFamily& fam : families) {
    const int units = units_for(nodes, fam.inter);
    if (units < 1) continue;
    const double lambda = rate / units;
    for (int c = 1; c <= fam.max_service; ++c) {
      Prediction p;
      const double s = score_at(fam, c, lambda, objective, &p);
      if (s <= slo_ms) best.offer(s, fam.config(c), units, lambda, p);
    }
  }
  return best;
}

// Unit capacities of every configuration, indexed like the families: caps[f][c - 1].
std::vector<std::vector<double>> all_unit_capacities(
    const std::vector<ConfigurationFamily>& families, double slo_ms, const Objective& objective) {
  std::vector<std::vector<double>> caps(families.size());
  for (size_t f = 0; f < families.size(); ++f) {
    for (int c = 1; c <= families[f].max_service; ++c) {
      caps[f].push_back(unit_capacity_per_s(families[f], c, slo_ms, objective));
    }
  }
  return caps;
}

SizingResult size_one(const std::vector<ConfigurationFamily>& families,
                      const std::vector<std::vector<double>>& caps, double rate, double slo_ms,
                      int max_nodes, const Objective& objective) {
  // Per configuration the fewest units: latency grows with the unit rate, so ceil(rate / capacity).
  long long fewest = LLONG_MAX;
  for (size_t f = 0; f < families.size(); ++f) {
    const ConfigurationFamily& fam = families[f];
    for (int c = 1; c <= fam.max_service; ++c) {
      const double cap = caps[f][static_cast<size_t>(c - 1)];
      if (!(cap > 0)) continue;
      const double u_real = std::ceil(rate / cap);
      if (u_real * fam.inter > max_nodes) continue;
      long long u = std::max(1LL, static_cast<long long>(u_real));
      // Guard the boundary against rounding: the chosen unit count must really meet the SLO.
      while (u * fam.inter <= max_nodes && score_at(fam, c, rate / u, objective) > slo_ms) ++u;
      if (u * fam.inter <= max_nodes) fewest = std::min(fewest, u * fam.inter);
    }
  }
  if (fewest != LLONG_MAX) {
    SizingResult r = best_on(families, static_cast<int>(fewest), rate, slo_ms, objective);
    r.feasible = r.stable;
    r.slo_ms = slo_ms;
    return r;
  }
  SizingResult r = best_on(families, max_nodes, rate, kInf, objective);
  r.feasible = false;
  r.slo_ms = slo_ms;
  return r;
}

Status check_sizing_args(double slo_ms, int max_nodes) {
  SERF_RETURN_IF_ERROR(check_slo(slo_ms));
  if (max_nodes < 1) {
    return InvalidArgument("max nodes must be >= 1 (got " + std::to_string(max_nodes) + ")");
  }
  return Status::Ok();
}

}  // namespace

double unit_capacity_per_s(const ConfigurationFamily& family, int c, double slo_ms,
                           const Objective& objective) {
  const double top = family.max_rate_per_s(c);
  // Excess over the SLO, kept finite for the root finder.
  auto excess = [&](double lambda) {
    const double s = score_at(family, c, lambda, objective);
    return std::isfinite(s) ? s - slo_ms : 1e300;
  };
  const double lo = top * 1e-12;
  const double f_lo = excess(lo);
  if (f_lo > 0) return 0.0;
  const double hi = top * (1.0 - 1e-9);
  const double f_hi = excess(hi);
  if (f_hi <= 0) return hi;
  double a = lo, b = hi;
  const double tolerance = std::max(objective.rate_tolerance(), 1e-13);
  try {
    std::uintmax_t iterations = 200;
    // eps_tolerance(44): |x - y| <= 2^-43 min(|x|, |y|), the closed forms' precision as before.
    boost::math::tools::eps_tolerance<double> bits(44);  // its operator() is not const
    auto close_enough = [&](double x, double y) {
      return bits(x, y) || std::abs(y - x) <= tolerance * std::min(std::abs(x), std::abs(y));
    };
    const auto bracket =
        boost::math::tools::toms748_solve(excess, lo, hi, f_lo, f_hi, close_enough, iterations);
    a = bracket.first;
    b = bracket.second;
  } catch (const std::exception&) {
    // Leave [lo, hi] to the bisection below.
  }
  // The answer must meet the SLO: keep the left end where the excess is <= 0, tightening by
  // bisection where the root finder stopped early or its left end rounds the wrong way.
  if (excess(a) > 0) a = lo;
  for (int it = 0; it < 200 && (b - a) > tolerance * b; ++it) {
    const double m = 0.5 * (a + b);
    (excess(m) <= 0 ? a : b) = m;
  }
  return a;
}

StatusOr<SizingResult> size_for_slo(const Profile& profile, double rate_per_s, double slo_ms,
                                    int max_nodes, const SizingOptions& options) {
  SERF_ASSIGN_OR_RETURN(auto rows,
                        size_for_rates(profile, {rate_per_s}, slo_ms, max_nodes, options));
  const SizingResult& r = rows.front();
  if (r.feasible) return r;
  std::string msg = "no configuration meets the SLO of " + format_sig4(slo_ms) + " ms at " +
                    format_sig4(rate_per_s) + " requests/s with up to " +
                    std::to_string(max_nodes) + " nodes; ";
  if (r.stable) {
    msg += "the best reachable is " + format_sig4(r.score_ms) + " ms with " + to_string(r.config) +
           " on " + std::to_string(max_nodes) + " nodes";
  } else {
    msg +=
        "no configuration is even stable at that rate on " + std::to_string(max_nodes) + " nodes";
  }
  return Infeasible(msg);
}

StatusOr<std::vector<SizingResult>> size_for_rates(const Profile& profile,
                                                   const std::vector<double>& rates_per_s,
                                                   double slo_ms, int max_nodes,
                                                   const SizingOptions& options) {
  SERF_RETURN_IF_ERROR(validate_rates(rates_per_s, "rates"));
  SERF_RETURN_IF_ERROR(check_sizing_args(slo_ms, max_nodes));
  const Objective& objective = options.objective ? *options.objective : mean_latency_objective();
  SERF_ASSIGN_OR_RETURN(auto families,
                        build_families(profile, max_nodes, options.queue, options.max_batch));
  const auto caps = all_unit_capacities(families, slo_ms, objective);
  std::vector<SizingResult> rows;
  rows.reserve(rates_per_s.size());
  for (double rate : rates_per_s) {
    rows.push_back(size_one(families, caps, rate, slo_ms, max_nodes, objective));
  }
  return rows;
}

StatusOr<CapacityResult> capacity(const Profile& profile, double slo_ms, int nodes,
                                  const SizingOptions& options) {
  SERF_RETURN_IF_ERROR(check_slo(slo_ms));
  SERF_ASSIGN_OR_RETURN(nodes, resolve_nodes(profile, nodes));
  const Objective& objective = options.objective ? *options.objective : mean_latency_objective();
  SERF_ASSIGN_OR_RETURN(auto families,
                        build_families(profile, nodes, options.queue, options.max_batch));
  CapacityResult best;
  best.slo_ms = slo_ms;
  best.nodes = nodes;
  const ConfigurationFamily* best_family = nullptr;
  double fastest_ms = kInf;
  Configuration fastest;
  for (const ConfigurationFamily& fam : families) {
    const int units = units_for(nodes, fam.inter);
    for (int c = 1; c <= fam.max_service; ++c) {
      if (fam.min_latency_ms(c) < fastest_ms) {
        fastest_ms = fam.min_latency_ms(c);
        fastest = fam.config(c);
      }
      const double cap = unit_capacity_per_s(fam, c, slo_ms, objective);
      const double cluster = cap * units;
      if (cap > 0 && (cluster > best.rate_per_s ||
                      (cluster == best.rate_per_s && tie_break_less(fam.config(c), best.config)))) {
        best.rate_per_s = cluster;
        best.config = fam.config(c);
        best.units = units;
        best.unit_rate_per_s = cap;
        best_family = &fam;
      }
    }
  }
  if (best_family == nullptr) {
    return Infeasible("no configuration meets the SLO of " + format_sig4(slo_ms) + " ms on " +
                      std::to_string(nodes) +
                      " nodes even at vanishing load; the fastest service "
                      "time is " +
                      format_sig4(fastest_ms) + " ms with " + to_string(fastest));
  }
  best.score_ms = score_at(*best_family, best.config.service, best.unit_rate_per_s, objective,
                           &best.prediction);
  return best;
}

}  // namespace serf
