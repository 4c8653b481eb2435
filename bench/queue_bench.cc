// Queueing-core speed: predictions per second at c = 8 and c = 64, and `serf plan` end to end
// (whole process) on a synthetic 1024-node x 64-core profile: K in powers of two up to 1024,
// T = 1..64, i*T <= 64 (3,080 configurations), at 1000 load levels. Goal: under 100 ms on one core.
// With batches: the bulk-service model's predictions (c = 1 exact, c = 8 the chain) and
// plan_table --batch 32 on a synthetic 16-node x 16-core profile with b in 1, 2, 4, ..., 32.
// Usage: bench_queue [RUNS]   (prints medians; the profile and table go to a temporary folder)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "serf/core/batch_queue.h"
#include "serf/core/planner.h"
#include "serf/core/queue_model.h"
#include "serf/core/recalibration.h"
#include "serf/core/statistics.h"
#include "serf/io/profile_io.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

using serf::median;  // serf/core/statistics.h

// The batch cost model of scripts/make_batch_example_profile.py in spirit: a batch of n costs
// (1 + g (n - 1)) times one request (weights read once, arithmetic per request), g = 0.15.
double batch_factor(int n) { return 1.0 + 0.15 * (n - 1); }

// The cost model of scripts/make_example_profile.py on `nodes` x `cores`: every tuple (i, K, T)
// with i*T <= cores, K = 1, 2, 4... <= nodes, each batch size of `batches`. `thread_ms` is one
// request's time on one thread, `log_ms` the exchange cost per doubling of K.
serf::Profile synthetic_profile(const std::string& model, int nodes, int cores, double thread_ms,
                                double log_ms, const std::vector<int>& batches) {
  serf::Profile p;
  p.model = model;
  p.hardware = {nodes, cores};
  p.illustrative = true;
  p.note = "synthetic, for bench_queue";
  for (int k = 1; k <= nodes; k *= 2) {
    for (int t = 1; t <= cores; ++t) {
      for (int i = 1; i * t <= cores; ++i) {
        for (int b : batches) {
          const double threads = thread_ms * (0.1 + 0.9 / t);
          const double on_nodes =
              threads * (0.1 + 0.9 / k) + log_ms * std::log2(k) * (1 + 0.1 * (i - 1));
          const double interference = 1.0 + 0.06 * (i - 1) + 0.02 * (i - 1) * (t - 1);
          p.tuples.push_back(
              {{i, k, t, b}, on_nodes * interference * batch_factor(b), 0.02, 100, 0});
        }
      }
    }
  }
  p.reindex();
  return p;
}

// 1024 nodes x 64 cores, batch 1.
serf::Profile synthetic_profile() {
  return synthetic_profile("synthetic-1024x64", 1024, 64, 2400.0, 50.0, {1});
}

// 16 nodes x 16 cores, K = 1, 2, 4, 8, 16, T = 1..16, i*T <= 16, b = 1, 2, 4, 8, 16, 32.
serf::Profile synthetic_batched_profile() {
  return synthetic_profile("synthetic-16x16-batched", 16, 16, 40.0, 1.0, {1, 2, 4, 8, 16, 32});
}

// Predictions per second of predict(k), k = 0..n-1: the median of 5 runs. The answers are summed
// into *sink (printed), so the calls are not optimised away.
template <typename Predict>
double predictions_per_s(int n, Predict predict, double* sink) {
  std::vector<double> per_s;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = Clock::now();
    for (int k = 0; k < n; ++k) *sink += predict(k);
    per_s.push_back(n / seconds_since(t0));
  }
  return median(per_s);
}

// Single predictions of configuration c (interference-aware) over a sweep of loads.
void bench_predict(int c) {
  std::vector<double> mean_ms;
  for (int i = 1; i <= c; ++i) mean_ms.push_back(500.0 * (1.0 + 0.05 * (i - 1)));
  for (serf::QueueKind kind : {serf::QueueKind::kMdInterf, serf::QueueKind::kMdcExact}) {
    auto model = serf::QueueModel::Create(kind, mean_ms);
    const double top = model->max_rate_per_s(c);
    const int n = kind == serf::QueueKind::kMdcExact ? 20000 : 2000000;
    double sink = 0;
    const double per_s = predictions_per_s(
        n, [&](int k) { return model->predict(c, top * ((k % 999) + 0.5) / 1000.0).latency_ms; },
        &sink);
    std::printf("predict %-10s c=%-3d %12.3g predictions/s (median of 5; checksum %.6g)\n",
                serf::to_string(kind), c, per_s, sink);
  }
}

// Predictions of the bulk-service model of (c, K, T, b) over a sweep of loads.
void bench_batch_predict(int c, int b, int n) {
  std::vector<serf::ServiceLevel> levels;
  for (int i = 1; i <= c; ++i) {
    for (int k = 1; k <= b; ++k)
      levels.push_back({10.0 * (1.0 + 0.05 * (i - 1)) * batch_factor(k), 0.02});
  }
  auto table = serf::ServiceTable::Create(c, b, levels);
  auto model = serf::BatchQueueModel::Create(serf::QueueKind::kMdInterf, *table);
  const double top = model->max_rate_per_s();
  double sink = 0;
  const double per_s = predictions_per_s(
      n, [&](int k) { return model->predict(top * ((k % 99) + 0.5) / 100.0).latency_ms; }, &sink);
  std::printf(
      "predict batch md-interf c=%-3d b=%-3d %10.3g predictions/s (median of 5; checksum %.6g)\n",
      c, b, per_s, sink);
}

// plan_table over (c, K, T, b) with the analytic batch model alone (--tail-method model).
void bench_batch_plan(int runs) {
  const serf::Profile profile = synthetic_batched_profile();
  const size_t configs_1 = serf::enumerate_configurations(profile, 16, 1).size();
  const size_t configs = serf::enumerate_configurations(profile, 16, 32).size();
  std::vector<double> levels;
  for (int k = 1; k <= 100; ++k) levels.push_back(100.0 * k);  // up to the b = 32 capacity
  for (int max_batch : {1, 32}) {
    serf::PlanOptions options;
    options.max_batch = max_batch;
    std::vector<double> t;
    size_t unstable = 0, batched = 0;
    for (int run = 0; run < runs; ++run) {
      const auto t0 = Clock::now();
      auto table = serf::plan_table(profile, levels, options);
      t.push_back(seconds_since(t0));
      unstable = batched = 0;
      for (const auto& e : table->entries) {
        unstable += e.stable ? 0 : 1;
        batched += e.stable && e.config.batch > 1 ? 1 : 0;
      }
    }
    std::printf(
        "plan_table --batch %-2d in process: %zu configurations x %zu levels: median %.1f ms (%d "
        "runs; %zu levels overloaded, %zu batched)\n",
        max_batch, max_batch == 1 ? configs_1 : configs, levels.size(), 1000 * median(t), runs,
        unstable, batched);
  }
}

struct ProcessTime {
  double wall_s, cpu_s;
};

// Runs a command to completion: wall time, and CPU time (user + system) of the child.
ProcessTime run_process(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto t0 = Clock::now();
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  const double s = seconds_since(t0);
  const double cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                     1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_queue: %s failed (status %d)\n", args[0].c_str(), status);
    std::exit(1);
  }
  return {s, cpu};
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  bench_predict(8);
  bench_predict(64);
  bench_batch_predict(1, 8, 20000);
  bench_batch_predict(1, 32, 5000);
  bench_batch_predict(8, 8, 5000);
  bench_batch_predict(8, 32, 2000);
  bench_batch_plan(std::min(runs, 3));

  char dir_template[] = "/tmp/serf_bench_queue_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  const std::string profile_path = std::string(dir) + "/synthetic_1024x64.json";
  const std::string table_path = std::string(dir) + "/table.json";
  const serf::Profile profile = synthetic_profile();
  if (!serf::io::save_profile(profile, profile_path).ok()) return 1;
  const std::string rates = "6:6000:6";  // 1000 load levels, up to the cluster's capacity
  const size_t configs = serf::enumerate_configurations(profile, 1024).size();

  // In process: the planner alone.
  std::vector<double> levels;
  for (int k = 1; k <= 1000; ++k) levels.push_back(6.0 * k);
  std::vector<double> in_process;
  size_t unstable = 0;
  for (int run = 0; run < runs; ++run) {
    const auto t0 = Clock::now();
    auto table = serf::plan_table(profile, levels, 0, serf::QueueKind::kMdInterf, false);
    in_process.push_back(seconds_since(t0));
    unstable = 0;
    for (const auto& e : table->entries) unstable += e.stable ? 0 : 1;
  }
  std::printf(
      "plan_table in process: %zu configurations x %zu levels: median %.1f ms (%d runs; "
      "%zu levels overloaded)\n",
      configs, levels.size(), 1000 * median(in_process), runs, unstable);

  // Online recalibration: one observed tuple per K drifted 8% slow; the profile updated and the
  // table re-planned over the same 1000 levels.
  std::vector<serf::TupleObservation> seen;
  for (int k = 1; k <= 1024; k *= 2) {
    seen.push_back({{1, k, 8}, 1.08 * profile.find({1, k, 8})->mean_ms});
  }
  std::vector<double> replan;
  for (int run = 0; run < runs; ++run) {
    const auto t0 = Clock::now();
    auto updated = serf::recalibrate(profile, seen);
    auto table = serf::plan_table(updated->profile, levels, 0, serf::QueueKind::kMdInterf, false);
    replan.push_back(seconds_since(t0));
    if (!table.ok()) return 1;
  }
  std::printf(
      "recalibrate (%zu observations, %zu tuples) + re-plan %zu levels: median %.1f ms (%d runs)\n",
      seen.size(), profile.tuples.size(), levels.size(), 1000 * median(replan), runs);

  // Whole process, as an operator runs it.
  std::vector<double> whole, cpu;
  for (int run = 0; run < runs; ++run) {
    const ProcessTime t = run_process(
        {SERF_BINARY, "plan", "--profile", profile_path, "--rates", rates, "--out", table_path});
    whole.push_back(t.wall_s);
    cpu.push_back(t.cpu_s);
  }
  std::printf(
      "serf plan whole process (%zu tuples, %zu configurations x 1000 levels): wall median "
      "%.1f ms (min %.1f, max %.1f), CPU median %.1f ms, over %d runs (goal < 100 ms)\n",
      profile.tuples.size(), configs, 1000 * median(whole),
      1000 * *std::min_element(whole.begin(), whole.end()),
      1000 * *std::max_element(whole.begin(), whole.end()), 1000 * median(cpu), runs);
  std::remove(profile_path.c_str());
  std::remove(table_path.c_str());
  std::remove((std::string(dir) + "/table.csv").c_str());
  rmdir(dir);
  return 0;
}
