// Real nodes: engine Executables whose layers all-gather over the slot's MPI communicator.
#include "mpi/engine_worker.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "engine/backend.h"
#include "model/weights.h"

namespace serf::mpi {

namespace {

// Inside a request the exchange polls with short sleeps: a layer's all-gather is on the critical
// path (a busy-wait would be faster still, but steals the core of a node sharing the machine).
const WaitPolicy kExchangeWait{0, nullptr, 20e-6};

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
      const int b = std::max(ctx.config.batch, 1);
      const auto key = std::make_tuple(ctx.comm->rank(), ctx.config.inter, ctx.config.intra, b);
      std::lock_guard<std::mutex> lock(mutex_);
      // Every slot of this node shares one PreparedModel per batch size; a new (K, T, b)
      // re-prepares from the weights every node holds: no weights move between ranks. A slot may
      // take any n <= b waiting requests, so sizes 1..b are all prepared. They share every
      // weight tensor whose kernel layout is the same at each size (engine/backend.h
      // resident_weight_bytes), so they usually hold about one copy of this rank's slices. Before
      // each size n > 1: the loaded weights, what the backend holds so far and one more whole
      // copy (should every tensor want a new layout at n) must fit.
      if (prepared_.empty() || key != prepared_key_) {
        prepared_.clear();
        const double one_copy = static_cast<double>(plan_.parameters) * sizeof(float);
        for (int n = 1; n <= b; ++n) {
          if (n > 1) {
            const double held = static_cast<double>(backend_->resident_weight_bytes());
            const int copies = 2 + static_cast<int>(std::ceil(held / std::max(one_copy, 1.0)));
            SERF_RETURN_IF_ERROR(model::check_weights_fit_memory(plan_, copies));
          }
          SERF_ASSIGN_OR_RETURN(
              auto prepared,
              backend_->prepare(plan_, weights_, {ctx.comm->rank(), ctx.config.inter},
                                ctx.config.intra, n));
          prepared_.push_back(std::move(prepared));
        }
        prepared_key_ = key;
      }
      std::vector<std::unique_ptr<engine::Executable>> exes;
      for (const auto& prepared : prepared_) {
        SERF_ASSIGN_OR_RETURN(std::unique_ptr<engine::Executable> exe, prepared->new_slot());
        exes.push_back(std::move(exe));
      }
      return std::unique_ptr<SlotWorker>(new EngineWorker(
          std::move(exes), ctx.comm, static_cast<size_t>(plan_.spec.input.elements()),
          static_cast<size_t>(plan_.output().elements()), plan_.layers.size()));
    };
  }

 private:
  std::unique_ptr<engine::Backend> backend_;
  model::ModelPlan plan_;
  model::Weights weights_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<engine::PreparedModel>> prepared_;  // [n - 1]: batches of n
  std::tuple<int, int, int, int> prepared_key_{-1, -1, -1, -1};
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
