#include "engine/executor.h"

#include <string>

namespace serf::engine {

StatusOr<std::unique_ptr<Executor>> Executor::create(std::shared_ptr<PreparedModel> model,
                                                     int slots) {
  if (slots < 1) {
    return InvalidArgument("service parallelism c = " + std::to_string(slots) +
                           " must be at least 1");
  }
  std::vector<std::unique_ptr<Executable>> executables;
  for (int s = 0; s < slots; ++s) {
    SERF_ASSIGN_OR_RETURN(auto slot, model->new_slot());
    executables.push_back(std::move(slot));
  }
  return std::unique_ptr<Executor>(new Executor(std::move(model), std::move(executables)));
}

Executor::Executor(std::shared_ptr<PreparedModel> model,
                   std::vector<std::unique_ptr<Executable>> slots)
    : model_(std::move(model)), slots_(std::move(slots)), busy_(slots_.size(), 0) {}

int Executor::acquire_any() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    for (size_t s = 0; s < busy_.size(); ++s) {
      if (!busy_[s]) {
        busy_[s] = 1;
        return static_cast<int>(s);
      }
    }
    cv_.wait(lock);
  }
}

void Executor::acquire(int slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !busy_[slot]; });
  busy_[slot] = 1;
}

void Executor::release(int slot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_[slot] = 0;
  }
  cv_.notify_all();
}

Status Executor::run(const float* input, float* output, ActivationExchange& exchange,
                     LayerTimings* timings) {
  const int slot = acquire_any();
  Status status = slots_[slot]->run(input, output, exchange, timings);
  release(slot);
  return status;
}

Status Executor::run_on_slot(int slot, const float* input, float* output,
                             ActivationExchange& exchange, LayerTimings* timings) {
  if (slot < 0 || slot >= slots()) {
    return InvalidArgument("slot " + std::to_string(slot) + " out of range 0.." +
                           std::to_string(slots() - 1));
  }
  acquire(slot);
  Status status = slots_[slot]->run(input, output, exchange, timings);
  release(slot);
  return status;
}

}  // namespace serf::engine
