#include "engine/simulated_unit.h"

namespace serf::engine {

StatusOr<std::unique_ptr<SimulatedUnit>> SimulatedUnit::create(Backend& backend,
                                                               const model::ModelPlan& plan,
                                                               const model::Weights& weights,
                                                               int ranks, int threads, int batch) {
  SERF_RETURN_IF_ERROR(validate_partition(plan, Partition{0, ranks}));
  std::unique_ptr<SimulatedUnit> unit(new SimulatedUnit());
  for (int r = 0; r < ranks; ++r) {
    SERF_ASSIGN_OR_RETURN(auto prepared,
                          backend.prepare(plan, weights, Partition{r, ranks}, threads, batch));
    SERF_ASSIGN_OR_RETURN(auto slot, prepared->new_slot());
    unit->models_.push_back(std::move(prepared));
    unit->slots_.push_back(std::move(slot));
  }
  unit->exchange_ = std::make_unique<InProcessExchange>(ranks);
  unit->outputs_.resize(ranks);
  unit->worker_status_.resize(ranks);
  for (int r = 1; r < ranks; ++r) {
    unit->outputs_[r].resize(static_cast<size_t>(plan.output().elements() * batch));
    unit->workers_.emplace_back(&SimulatedUnit::worker, unit.get(), r);
  }
  return unit;
}

SimulatedUnit::~SimulatedUnit() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void SimulatedUnit::worker(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const float* input = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      input = input_;
    }
    Status status =
        slots_[rank]->run(input, outputs_[rank].data(), exchange_->member(rank), nullptr);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      worker_status_[rank] = std::move(status);
      --pending_;
    }
    cv_.notify_all();
  }
}

Status SimulatedUnit::run(const float* input, float* output, LayerTimings* timings) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    input_ = input;
    pending_ = ranks() - 1;
    ++generation_;
  }
  cv_.notify_all();
  Status status = slots_[0]->run(input, output, exchange_->member(0), timings);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return pending_ == 0; });
  if (!status.ok()) return status;
  for (int r = 1; r < ranks(); ++r) {
    if (!worker_status_[r].ok()) return worker_status_[r];
  }
  return Status::Ok();
}

}  // namespace serf::engine
