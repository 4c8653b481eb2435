// bench_cuda_streams: batch-1 latency of each model on the CUDA backend, alone and with 1, 2, 4, 8
// requests at once (one CUDA stream per service slot): the interference the queueing model's
// mu_i captures. Two ways to give n concurrent requests the GPU:
//   shared: every slot's stream may use every SM (T = F units, plain streams);
//   split:  slot s gets F / n SM units through a green context (T = F / n), when the driver has
//   them.
// Each of n caller threads runs its own slot closed-loop (next request when the last returns).
// Prints medians, p90, throughput and the ratio median(n) / median(1) per model and mode.
//
//   build/bin/bench_cuda_streams --models tiny,cifar10,imagenet1k --requests 200

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "model/weights.h"
#include "serf/core/statistics.h"

using namespace serf;
using namespace serf::engine;

namespace {

struct Row {
  double median_ms = 0, p90_ms = 0, per_s = 0;
};

// n callers, each on its own slot of `prepared`, `requests` timed requests each after 3 warm-ups.
StatusOr<Row> measure(PreparedModel& prepared, int n, int requests) {
  const model::ModelPlan& plan = prepared.plan();
  std::vector<std::unique_ptr<Executable>> slots;
  for (int s = 0; s < n; ++s) {
    SERF_ASSIGN_OR_RETURN(auto slot, prepared.new_slot());
    slots.push_back(std::move(slot));
  }
  std::vector<std::vector<double>> lat(static_cast<size_t>(n));
  std::vector<Status> status(static_cast<size_t>(n));
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::vector<std::thread> callers;
  callers.reserve(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) {
    callers.emplace_back([&, s] {
      const std::vector<float> input =
          model::seeded_input(plan.spec.input, 1 + static_cast<uint64_t>(s));
      std::vector<float> out(static_cast<size_t>(plan.output().elements()));
      LocalExchange local;
      for (int r = 0; r < requests + 3; ++r) {
        const auto a = clock::now();
        const Status st =
            slots[static_cast<size_t>(s)]->run(input.data(), out.data(), local, nullptr);
        if (!st.ok()) {
          status[static_cast<size_t>(s)] = st;
          return;
        }
        if (r >= 3)
          lat[static_cast<size_t>(s)].push_back(
              std::chrono::duration<double, std::milli>(clock::now() - a).count());
      }
    });
  }
  for (auto& c : callers) c.join();
  const double wall_s = std::chrono::duration<double>(clock::now() - t0).count();
  for (const Status& st : status) SERF_RETURN_IF_ERROR(st);
  std::vector<double> all;
  for (const auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  Row row;
  row.median_ms = quantile(all, 0.5);
  row.p90_ms = quantile(all, 0.9);
  row.per_s = static_cast<double>(all.size()) / wall_s;
  return row;
}

Status run(const std::string& models, const std::string& streams_csv, int requests,
           const std::string& root) {
  SERF_ASSIGN_OR_RETURN(CudaDeviceInfo info, cuda_device_info(0));
  std::printf("device %d: %s, %d SMs, %.1f GiB, sm_%d\n%s\n", info.device, info.name.c_str(),
              info.sm_count, static_cast<double>(info.memory_bytes) / (1 << 30),
              info.compute_capability, info.note.c_str());
  SERF_ASSIGN_OR_RETURN(auto backend, make_backend("cuda"));
  std::vector<int> streams;
  {
    std::stringstream ss(streams_csv);
    for (std::string item; std::getline(ss, item, ',');) {
      const int n = std::atoi(item.c_str());
      if (n < 1) return InvalidArgument("--streams: '" + item + "' is not a positive count");
      streams.push_back(n);
    }
  }
  std::printf("%-12s %-6s %7s %8s %10s %10s %10s %14s\n", "model", "mode", "streams", "T_units",
              "median_ms", "p90_ms", "req_per_s", "median/alone");
  std::stringstream ms(models);
  for (std::string name; std::getline(ms, name, ',');) {
    std::string spec = root;
    spec.append("/configs/models/").append(name).append(".json");
    SERF_ASSIGN_OR_RETURN(model::ModelPlan plan, model::load_model(spec));
    const model::Weights w = model::Weights::seeded(plan, 1);
    SERF_ASSIGN_OR_RETURN(auto whole, backend->prepare(plan, w, Partition{0, 1}, info.sm_units));
    double alone = 0.0;
    for (const char* mode : {"shared", "split"}) {
      const bool split = std::string(mode) == "split";
      if (split && !info.green_contexts) {
        std::printf("%-12s split  (no green contexts on this driver: skipped)\n", name.c_str());
        continue;
      }
      for (int n : streams) {
        std::shared_ptr<PreparedModel> prepared = whole;
        int units = info.sm_units;
        if (split) {
          units = std::max(1, info.sm_units / n);
          SERF_ASSIGN_OR_RETURN(prepared, backend->prepare(plan, w, Partition{0, 1}, units));
        }
        SERF_ASSIGN_OR_RETURN(Row row, measure(*prepared, n, requests));
        if (!split && n == streams.front()) alone = row.median_ms;
        std::printf("%-12s %-6s %7d %8d %10.3f %10.3f %10.1f %14.2f\n", name.c_str(), mode, n,
                    units, row.median_ms, row.p90_ms, row.per_s,
                    alone > 0 ? row.median_ms / alone : 0.0);
        std::fflush(stdout);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Batch-1 latency on the CUDA backend with 1..n concurrent streams"};
  std::string models = "tiny,cifar10,imagenet1k,imagenet22k";
  std::string streams = "1,2,4,8";
  int requests = 100;
  std::string root = SERF_SOURCE_DIR;
  app.add_option("--models", models,
                 "Shipped models to run (comma-separated names under configs/models)");
  app.add_option("--streams", streams,
                 "Concurrent streams (slots) to measure (comma-separated counts)");
  app.add_option("--requests", requests, "Timed requests per stream, after 3 warm-ups (count)");
  app.add_option("--root", root, "Repository root holding configs/models (path)");
  CLI11_PARSE(app, argc, argv);
  if (requests < 1) {
    std::fprintf(stderr, "bench_cuda_streams: error: --requests %d: must be at least 1\n",
                 requests);
    return 2;
  }
  const Status s = run(models, streams, requests, root);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_cuda_streams: error: %s\n", s.message().c_str());
    return s.exit_code();
  }
  return 0;
}
