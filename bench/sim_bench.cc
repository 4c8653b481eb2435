// bench_sim: simulated requests per second of serf::sim::simulate on one core (goal: >= 2 million).
// Prints the median of 5 runs per case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "serf/core/statistics.h"
#include "serf/sim/simulator.h"

namespace {

struct Case {
  const char* name;
  int c;
  int units;
  serf::sim::ServiceSemantics semantics;
  serf::ArrivalKind arrivals;
  double scv;
  double rho;
};

}  // namespace

int main() {
  using serf::sim::ServiceSemantics;
  const Case cases[] = {
      {"M/M/1            start", 1, 1, ServiceSemantics::kStart, serf::ArrivalKind::kPoisson, 1,
       0.8},
      {"c=8 interf gamma start", 8, 1, ServiceSemantics::kStart, serf::ArrivalKind::kPoisson, 0.3,
       0.8},
      {"c=8 interf gamma shared", 8, 1, ServiceSemantics::kShared, serf::ArrivalKind::kPoisson, 0.3,
       0.8},
      {"c=64 det start", 64, 1, ServiceSemantics::kStart, serf::ArrivalKind::kPoisson, 0, 0.9},
      {"c=64 det shared", 64, 1, ServiceSemantics::kShared, serf::ArrivalKind::kPoisson, 0, 0.9},
      {"16 units c=4 bursty start", 4, 16, ServiceSemantics::kStart, serf::ArrivalKind::kGamma, 0.3,
       0.8},
  };
  const int64_t requests = 4000000;
  std::printf("bench_sim: %lld requests per run, median of 5 runs, one core\n",
              static_cast<long long>(requests));
  for (const Case& k : cases) {
    serf::sim::SimulationOptions o;
    for (int i = 1; i <= k.c; ++i) o.levels.push_back({10.0 * (1.0 + 0.05 * (i - 1)), k.scv});
    o.units = k.units;
    o.semantics = k.semantics;
    o.arrival_kind = k.arrivals;
    o.arrival_scv = k.arrivals == serf::ArrivalKind::kGamma ? 4.0 : 1.0;
    o.rate_per_s = k.rho * k.c * 1000.0 / o.levels.back().mean_ms * k.units;
    o.requests = requests;
    std::vector<double> rates;
    double latency = 0;
    for (int rep = 0; rep < 5; ++rep) {
      o.seed = 1 + rep;
      const auto t0 = std::chrono::steady_clock::now();
      auto r = serf::sim::simulate(o);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) {
        std::printf("%s: %s\n", k.name, r.status().message().c_str());
        return 1;
      }
      latency = r->latency_ms;
      rates.push_back(static_cast<double>(requests) / s);
    }
    std::sort(rates.begin(), rates.end());
    std::printf("%-28s rho %.2f  %6.2f M requests/s (min %.2f, max %.2f)  mean latency %.3f ms\n",
                k.name, k.rho, serf::median(rates) / 1e6, rates.front() / 1e6, rates.back() / 1e6,
                latency);
  }
  return 0;
}
