// Real nodes: engine Executables whose layers all-gather over the slot's MPI communicator.
#include "mpi/engine_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "engine/backend.h"
#include "model/weights.h"

namespace serf::mpi {

namespace {

// Inside a request the exchange polls with short sleeps: a layer's all-gather is on the critical
// path (a busy-wait would be faster still, but steals the core of a node sharing the machine).
const WaitPolicy kExchangeWait{0, nullptr, 20e-6};

// The kB of a "Name:   123 kB" line of a /proc file (meminfo, self/status); -1 when absent.
long long proc_kb(const char* path, const std::string& name) {
  std::ifstream in(path);
  std::string line;
  const std::string head = name + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, head.size(), head) == 0) return std::atoll(line.c_str() + head.size());
  }
  return -1;
}

class MpiExchange final : public engine::ActivationExchange {
 public:
  explicit MpiExchange(const Communicator* comm)
      : comm_(comm), rank_(comm->rank()), ranks_(comm->size()) {}
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  Status all_gather(float* full, const engine::GatherLayout& layout) override {
    if (ranks_ == 1) return Status::Ok();
    return comm_->all_gather_in_place(full, layout.counts, layout.offsets, kExchangeWait);
  }

 private:
  const Communicator* comm_;
  int rank_;
  int ranks_;
};

// The leader returns the output and its per-layer times (a declared section of the result), so
// `serf infer --inter K` prints what the single-process one prints. A batch of n rows runs on the
// Executable prepared for exactly n rows (docs/runtime.md: a batch of n < b is not padded to b,
// as the queue model and the emulation assume).
class EngineWorker final : public SlotWorker {
 public:
  EngineWorker(std::vector<std::unique_ptr<engine::Executable>> exes, const Communicator* comm,
               size_t input_elements, size_t output_elements, size_t layers)
      : exes_(std::move(exes)),
        exchange_(comm),
        input_elements_(input_elements),
        output_elements_(output_elements) {
    timings_.resize(layers);
  }
  Status serve(const RunAction& action, const std::vector<float>& input, SlotOutput* out) override {
    if (action.emulated_ms > 0) return InvalidArgument("a computing node got an emulated request");
    const int rows = action.rows;
    if (rows < 1 || static_cast<size_t>(rows) > exes_.size()) {
      return InvalidArgument("a batch of " + std::to_string(rows) +
                             " requests; this configuration runs 1.." +
                             std::to_string(exes_.size()));
    }
    if (input.size() != static_cast<size_t>(rows) * input_elements_) {
      return InvalidArgument("a batch of " + std::to_string(rows) + " requests carries " +
                             std::to_string(input.size()) + " input values; expected " +
                             std::to_string(static_cast<size_t>(rows) * input_elements_));
    }
    const size_t layers = timings_.compute_ms.size();
    out->values.resize(static_cast<size_t>(rows) * output_elements_);
    timings_.resize(layers);  // the engine adds exchange times up within a request: start at zero
    SERF_RETURN_IF_ERROR(exes_[static_cast<size_t>(rows - 1)]->run(input.data(), out->values.data(),
                                                                   exchange_, &timings_));
    out->layers.resize(layers);
    for (size_t i = 0; i < layers; ++i) {
      out->layers[i].compute_ms = static_cast<float>(timings_.compute_ms[i]);
      out->layers[i].exchange_ms = static_cast<float>(timings_.exchange_ms[i]);
      out->layers[i].fused = timings_.fused[i] ? 1 : 0;
    }
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<engine::Executable>> exes_;  // [n - 1]: a batch of n rows
  MpiExchange exchange_;
  size_t input_elements_;
  size_t output_elements_;
  engine::LayerTimings timings_;
};

class CpuEngineSlots final : public EngineSlots {
 public:
  CpuEngineSlots(std::unique_ptr<engine::Backend> backend, model::ModelPlan plan,
                 model::Weights weights)
      : backend_(std::move(backend)), plan_(std::move(plan)), weights_(std::move(weights)) {}

  std::string model_name() const override { return plan_.spec.name; }
  int max_inter() const override { return engine::max_ranks(plan_); }
  int64_t output_floats() const override { return plan_.output().elements(); }
  std::string backend_name() const override { return backend_->name(); }
  std::vector<std::string> layer_names() const override {
    std::vector<std::string> out;
    for (const auto& l : plan_.spec.layers) out.push_back(l.name);
    return out;
  }
  std::vector<std::string> layer_types() const override {
    std::vector<std::string> out;
    for (const auto& l : plan_.spec.layers) out.push_back(model::to_string(l.kind));
    return out;
  }
  StatusOr<std::vector<float>> input(const std::string& path, uint64_t seed,
                                     int rows) const override {
    if (!path.empty()) return model::load_input_safetensors(path, plan_.spec.input, rows);
    return model::seeded_inputs(plan_.spec.input, seed, rows);
  }

  SlotWorkerFactory factory() override {
    return [this](const SlotContext& ctx) -> StatusOr<std::unique_ptr<SlotWorker>> {
      const Key key{ctx.comm->rank(), ctx.config.inter, ctx.config.intra,
                    std::max(ctx.config.batch, 1)};
      std::lock_guard<std::mutex> lock(mutex_);
      SERF_ASSIGN_OR_RETURN(const Sizes* sizes, sizes_for(key, ctx.preparation));
      std::vector<std::unique_ptr<engine::Executable>> exes;
      for (const auto& prepared : *sizes) {
        SERF_ASSIGN_OR_RETURN(std::unique_ptr<engine::Executable> exe, prepared->new_slot());
        exes.push_back(std::move(exe));
      }
      return std::unique_ptr<SlotWorker>(new EngineWorker(
          std::move(exes), ctx.comm, static_cast<size_t>(plan_.spec.input.elements()),
          static_cast<size_t>(plan_.output().elements()), plan_.layers.size()));
    };
  }

  std::string prepare_ahead(const std::vector<Configuration>& configs, int node, int nodes,
                            double budget_bytes) override {
    std::set<Key> keys;
    for (const Configuration& c : configs) {
      const int inter = std::max(c.inter, 1);
      if (node / inter >= nodes / inter) continue;  // in no unit of this configuration
      keys.insert(Key{node % inter, inter, c.intra, std::max(c.batch, 1)});
    }
    const auto start = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    size_t held = 0, sizes = 0;
    std::string stopped;
    for (const Key& key : keys) {
      stopped = ahead_memory_refusal(key, budget_bytes);
      if (!stopped.empty()) break;
      auto prepared = prepare_sizes(key);
      if (!prepared.ok()) {
        stopped = prepared.status().message();
        break;
      }
      sizes += prepared->size();
      held_[key] = std::move(prepared).value();
      seen_.insert(key);
      ++held;
    }
    const double took_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char text[200];
    std::snprintf(text, sizeof(text),
                  "prepared ahead %zu of %zu (K, T, b) (%zu batch sizes) in %.2f s, VmRSS %.0f MiB",
                  held, keys.size(), sizes, took_s, proc_kb("/proc/self/status", "VmRSS") / 1024.0);
    std::string line = text;
    if (!stopped.empty()) {
      line += "; the rest at their first switch: " + stopped;
      std::fprintf(stderr, "serf: rank %d: %s\n", node + 1, line.c_str());  // whole, untruncated
    }
    return line;
  }

 private:
  using Key = std::tuple<int, int, int, int>;                         // (rank in the unit, K, T, b)
  using Sizes = std::vector<std::shared_ptr<engine::PreparedModel>>;  // [n - 1]: batches of n

  // Sizes 1..b of `key`: a slot may take any n <= b waiting requests. They share every weight
  // tensor whose kernel layout is the same at each size (engine/backend.h
  // resident_weight_bytes), so they usually hold about one copy of this rank's slices. Before
  // each size: the loaded weights, what the backend holds so far and one more whole copy (should
  // every tensor want a new layout) must fit.
  StatusOr<Sizes> prepare_sizes(const Key& key) {
    const auto [rank, inter, intra, b] = key;
    const double one_copy = static_cast<double>(plan_.parameters) * sizeof(float);
    Sizes sizes;
    for (int n = 1; n <= b; ++n) {
      const double held = static_cast<double>(backend_->resident_weight_bytes());
      const int copies = 2 + static_cast<int>(std::ceil(held / std::max(one_copy, 1.0)));
      SERF_RETURN_IF_ERROR(model::check_weights_fit_memory(plan_, copies));
      SERF_ASSIGN_OR_RETURN(auto prepared,
                            backend_->prepare(plan_, weights_, {rank, inter}, intra, n));
      sizes.push_back(std::move(prepared));
    }
    return sizes;
  }

  // The rule of prepare_ahead: a (K, T, b) is held ahead only while the memory it may take is at
  // least kAheadHeadroom times what it may add, this rank's slice of the weights once per batch
  // size (every size in its own layout, the worst case): the other node ranks of the machine
  // prepare at the same time. The memory it may take: the machine's available memory
  // (MemAvailable) and, with a budget (`budget_bytes` > 0), the budget less the weights this
  // rank's backend holds already. Empty when it fits, else why not.
  std::string ahead_memory_refusal(const Key& key, double budget_bytes) const {
    constexpr double kAheadHeadroom = 2;
    const int inter = std::get<1>(key), intra = std::get<2>(key), b = std::get<3>(key);
    const double may_add = static_cast<double>(plan_.weight_bytes) / inter * b;
    const long long available_kb = proc_kb("/proc/meminfo", "MemAvailable");
    char text[200];
    char what[80];
    std::snprintf(what, sizeof(what), "%.0f x %.1f MiB (K = %d, T = %d, b = %d may add)",
                  kAheadHeadroom, may_add / (1 << 20), inter, intra, b);
    if (available_kb >= 0 && available_kb * 1024.0 < kAheadHeadroom * may_add) {
      std::snprintf(text, sizeof(text), "MemAvailable %.0f MiB < %s", available_kb / 1024.0, what);
      return text;
    }
    if (budget_bytes <= 0) return "";
    const double held = static_cast<double>(backend_->resident_weight_bytes());
    if (budget_bytes - held >= kAheadHeadroom * may_add) return "";
    std::snprintf(text, sizeof(text), "--ahead-memory-mb %g less %.1f MiB held = %.1f MiB < %s",
                  budget_bytes / (1 << 20), held / (1 << 20), (budget_bytes - held) / (1 << 20),
                  what);
    return text;
  }

  // The sizes of `key`: held ahead, the running ones, else prepared now (the last prepared
  // dropped first, as before prepare_ahead existed). `*done` is raised to what it took.
  StatusOr<const Sizes*> sizes_for(const Key& key, Preparation* done) {
    Preparation took = Preparation::kHeld;
    const Sizes* sizes = &prepared_;
    if (auto held = held_.find(key); held != held_.end()) {
      sizes = &held->second;
    } else if (prepared_.empty() || key != prepared_key_) {
      prepared_.clear();
      took = seen_.count(key) > 0 ? Preparation::kWarm : Preparation::kCold;
      SERF_ASSIGN_OR_RETURN(prepared_, prepare_sizes(key));
      prepared_key_ = key;
      seen_.insert(key);
    }
    if (done != nullptr && *done < took) *done = took;
    return sizes;
  }

  std::unique_ptr<engine::Backend> backend_;
  model::ModelPlan plan_;
  model::Weights weights_;
  std::mutex mutex_;
  // Every slot of this node shares one PreparedModel per batch size; a new (K, T, b)
  // re-prepares from the weights every node holds: no weights move between ranks.
  std::map<Key, Sizes> held_;  // prepared ahead (prepare_ahead), kept for the run
  Sizes prepared_;             // the last one prepared at a switch
  Key prepared_key_{-1, -1, -1, -1};
  std::set<Key> seen_;  // every (K, T, b) prepared in this run: preparing it again is warm
};

}  // namespace

StatusOr<std::unique_ptr<EngineSlots>> EngineSlots::Create(const std::string& model_path,
                                                           const std::string& backend,
                                                           const std::string& weights_path,
                                                           uint64_t seed) {
  SERF_ASSIGN_OR_RETURN(auto b, engine::make_backend(backend));
  SERF_ASSIGN_OR_RETURN(model::ModelPlan plan, model::load_model(model_path));
  SERF_RETURN_IF_ERROR(model::check_weights_fit_memory(plan, 2));
  model::Weights weights;
  if (weights_path.empty()) {
    weights = model::Weights::seeded(plan, seed);
  } else {
    SERF_ASSIGN_OR_RETURN(weights, model::Weights::load_safetensors(weights_path, plan));
  }
  return std::unique_ptr<EngineSlots>(
      new CpuEngineSlots(std::move(b), std::move(plan), std::move(weights)));
}

}  // namespace serf::mpi
