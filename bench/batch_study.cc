// study_batch_vs_sim: the batch (bulk-service) queue model against the discrete-event simulator
// over c = 1..16, b = 1..32, utilization 0.05..0.95 and random batch/interference profiles; prints
// CSV on stdout. Driven by scripts/study_batch_vs_sim.py (plots, summary). Usage:
//   study_batch_vs_sim [--threads N] [--scale X]   (X scales the simulated requests; default 1;
//   0: the models only)
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serf/core/batch_queue.h"
#include "serf/core/service_level.h"
#include "serf/sim/simulator.h"

namespace {

// mean_ms(i, n) = 10 (1 + a (i-1)^p) (1 + g (n-1)), every level with SCV scv: g is what one more
// request costs a batch (g = 1: no gain from batching; small g: memory-bound layers, big gain).
struct BatchProfile {
  int id;
  double a, p, g, scv;
  serf::ServiceTable table(int c, int b) const {
    std::vector<serf::ServiceLevel> levels;
    for (int i = 1; i <= c; ++i) {
      for (int n = 1; n <= b; ++n) {
        levels.push_back({10.0 * (1.0 + a * std::pow(i - 1.0, p)) * (1.0 + g * (n - 1)), scv});
      }
    }
    return *serf::ServiceTable::Create(c, b, std::move(levels));
  }
};

std::vector<BatchProfile> make_profiles() {
  // 0: no interference, deterministic; 1: no interference, exponential (outside the DNN case).
  std::vector<BatchProfile> out = {{0, 0.0, 1.0, 0.15, 0.0}, {1, 0.0, 1.0, 0.15, 1.0}};
  std::mt19937_64 rng(2016);
  std::uniform_real_distribution<double> a(0.02, 0.5), p(0.5, 1.2), g(0.03, 1.0), scv(0.0, 0.3);
  for (int id = 2; id < 8; ++id) {
    const double ai = a(rng), pi = p(rng), gi = g(rng), si = scv(rng);
    out.push_back({id, ai, pi, gi, si});
  }
  return out;
}

struct Task {
  const BatchProfile* profile;
  int c, b;
  double rho;
  std::string row;
};

std::string run_task(const Task& t, double scale) {
  const serf::ServiceTable table = t.profile->table(t.c, t.b);
  const double lambda = t.rho * t.c * t.b * 1000.0 / table.at(t.c, t.b).mean_ms;
  serf::sim::SimulationOptions o;
  o.batching = table;
  o.rate_per_s = lambda;
  // Longer runs for bigger batches and near saturation, where the queue's memory is longer.
  o.requests = static_cast<int64_t>(
      scale * std::max(400000.0, 40000.0 * std::sqrt(static_cast<double>(t.b)) / (1.0 - t.rho)));
  o.seed = 1000003ULL * static_cast<uint64_t>(t.profile->id) + 1009ULL * t.c + 101ULL * t.b +
           static_cast<uint64_t>(t.rho * 1000);
  // --scale 0: the models only (simulated columns 0).
  const auto sim = scale > 0 ? serf::sim::simulate(o) : serf::sim::SimulationResult{};
  const auto model = serf::BatchQueueModel::Create(serf::QueueKind::kMgInterf, table);
  const auto paper = serf::BatchQueueModel::Create(serf::QueueKind::kMdInterf, table);
  if (!sim.ok() || !model.ok() || !paper.ok()) return "";
  const serf::BatchPrediction p = model->predict(lambda), d = paper->predict(lambda);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%d,%.4f,%.4f,%.4f,%.4f,%d,%d,%.2f,%.9g,%lld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,"
                "%.6g\n",
                t.profile->id, t.profile->a, t.profile->p, t.profile->g, t.profile->scv, t.c, t.b,
                t.rho, lambda / 1000.0, static_cast<long long>(sim->requests), sim->latency_ms,
                sim->latency_ci95_ms, sim->wait_ms, sim->wait_probability, p.latency_ms,
                p.service_ms, p.mean_batch, d.latency_ms);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double scale = 1.0;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (std::strcmp(argv[k], "--threads") == 0) threads = std::max(1, std::atoi(argv[k + 1]));
    if (std::strcmp(argv[k], "--scale") == 0) scale = std::atof(argv[k + 1]);
  }
  const auto profiles = make_profiles();
  std::vector<Task> tasks;
  for (const auto& p : profiles) {
    for (int c : {1, 2, 3, 4, 6, 8, 12, 16}) {
      for (int b : {1, 2, 4, 8, 16, 32}) {
        for (int r = 0; r < 10; ++r) tasks.push_back({&p, c, b, 0.05 + 0.1 * r, ""});
      }
    }
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int k = 0; k < threads; ++k) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < tasks.size(); i = next++)
        tasks[i].row = run_task(tasks[i], scale);
    });
  }
  for (auto& th : pool) th.join();
  std::printf(
      "profile,interference_a,interference_p,batch_g,scv,c,b,rho,lambda_per_ms,requests,"
      "sim_latency_ms,sim_ci95_ms,sim_wait_ms,sim_wait_probability,model_latency_ms,"
      "model_service_ms,model_mean_batch,md_interf_latency_ms\n");
  for (const Task& t : tasks) std::fputs(t.row.c_str(), stdout);
  return 0;
}
