#include "profiler/profile_report.h"

#include <cstdio>
#include <iomanip>
#include <iostream>

namespace serf::profiler {

void print_tuple_table(const Profile& profile, bool passes, double total_s) {
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "tuple                 mean_ms  node_ms      scv  samples   wall_s"
            << (passes ? "  passes kept" : "") << "\n";
  for (const TupleStats& t : profile.tuples) {
    std::cout << std::left << std::setw(20) << to_string(t.tuple) << std::right << std::setw(10)
              << t.mean_ms << std::setw(9) << t.node_ms << std::setw(9) << t.scv << std::setw(9)
              << t.samples << std::setw(9) << t.wall_s;
    if (t.passes > 1) std::cout << std::setw(8) << t.passes_kept << "/" << t.passes;
    std::cout << "\n";
  }
  std::cout << "total wall time: " << total_s << " s for " << profile.tuples.size() << " tuples\n";
}

void print_refresh_table(const Profile& old, const Profile& measured, const Profile& fresh,
                         const RefreshSummary& summary) {
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "tuple                  old_ms    new_ms    ratio  samples\n";
  for (const TupleStats& m : measured.tuples) {
    const double before = old.find(m.tuple)->mean_ms;
    std::cout << std::left << std::setw(20) << to_string(m.tuple) << std::right << std::setw(10)
              << before << std::setw(10) << m.mean_ms << std::setw(9) << m.mean_ms / before
              << std::setw(9) << m.samples << "\n";
  }
  std::cout << "re-measured " << summary.remeasured << " of " << fresh.tuples.size()
            << " tuples; the other " << fresh.tuples.size() - summary.remeasured
            << " kept, scaled by their neighbours' drift (" << summary.scaled
            << " moved; mean factor " << std::setprecision(4) << summary.drift << ")\n";
}

void print_best_per_rate(const ExhaustiveReport& report) {
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "rate/s   best configuration      mean_latency_ms\n";
  for (const ExhaustiveRow& b : report.best_per_rate()) {
    std::cout << std::left << std::setw(9) << b.rate_per_s << std::setw(24) << to_string(b.config)
              << std::right << b.mean_latency_ms << "\n";
  }
}

void print_verdicts(const ExhaustiveReport& report, const PrecisionTarget& target) {
  std::printf(
      "precision target: 95%% CI half-width <= %g%% of the mean, >= %g s, >= %d requests "
      "after the MSER-5 warm-up cut, p%g bounded\n",
      100 * target.precision, target.min_duration_s, target.min_requests, target.percentile);
  std::printf("configuration          rate/s  requests  warm-up  ci95   duration_s  verdict\n");
  int valid = 0;
  for (const ExhaustiveRow& r : report.rows) {
    const PointVerdict& v = r.verdict;
    valid += v.valid ? 1 : 0;
    std::printf("%-20s %9.3f %9zu %8zu %5.1f%% %11.1f  %s%s\n", to_string(r.config).c_str(),
                r.rate_per_s, v.measured, v.warmup, v.ci95_rel >= 0 ? 100 * v.ci95_rel : 0.0,
                v.duration_s, v.valid ? "" : "INVALID: ", v.reason_text().c_str());
  }
  std::printf("%d of %zu points VALID\n", valid, report.rows.size());
  std::fflush(stdout);
}

}  // namespace serf::profiler
