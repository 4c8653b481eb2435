#include "serve/service.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace serf::serve {

namespace {

// Where a front end's thread waits for the answer to its request: one per thread, reused. A
// promise cost two allocations per request (its shared state, and the callback holding it, too
// large for std::function's local buffer); this costs none: the callback holds a pointer.
struct AnswerSlot {
  std::mutex mutex;
  std::condition_variable ready_cv;
  bool ready = false;
  InferAnswer answer;
};

// Slots outlive the threads that use them: a thread's goes back here when it ends, for a later
// thread, and none is freed. So the controller notifies after unlocking (a notify under the lock
// wakes the waiter only to block it on the mutex, a second wake-up on the controller's thread)
// without the slot ending under it when the waiter returns and its thread ends first.
class SlotPool {
 public:
  AnswerSlot* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return &slots_.emplace_back();
    AnswerSlot* slot = free_.back();
    free_.pop_back();
    return slot;
  }
  void give(AnswerSlot* slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot);
  }

 private:
  std::mutex mutex_;
  std::deque<AnswerSlot> slots_;  // stable addresses
  std::vector<AnswerSlot*> free_;
};

SlotPool& slot_pool() {
  static auto* pool = new SlotPool;  // never destroyed: threads may end after static destructors
  return *pool;
}

struct ThreadSlot {
  AnswerSlot* slot = slot_pool().take();
  ~ThreadSlot() { slot_pool().give(slot); }
};

thread_local ThreadSlot t_slot;

InferAnswer stopping_answer() {
  InferAnswer a;
  a.outcome = Outcome::kRejected;
  a.reason = "the server is stopping: it finishes the requests it has and takes no new ones";
  return a;
}

}  // namespace

InferenceService::InferenceService(Controller& controller, ModelInfo model, ServeMetrics* metrics)
    : controller_(controller), model_(std::move(model)), metrics_(metrics) {}

Status InferenceService::check_model(const std::string& name, const std::string& version) const {
  if (name != model_.name) {
    return InvalidArgument("unknown model \"" + name + "\": this server serves \"" + model_.name +
                           "\"");
  }
  if (!version.empty() && version != model_.version) {
    return InvalidArgument("unknown version \"" + version + "\" of model \"" + name +
                           "\": it has version \"" + model_.version + "\"");
  }
  return Status::Ok();
}

InferAnswer InferenceService::infer(std::vector<float> input, SteadyTime arrival, double timeout_us,
                                    std::function<bool()> cancelled) {
  AnswerSlot* slot = t_slot.slot;
  {
    std::lock_guard<std::mutex> lock(slot->mutex);
    slot->ready = false;
  }
  submit(
      std::move(input), arrival, timeout_us,
      [slot](InferAnswer&& a) {
        {
          std::lock_guard<std::mutex> lock(slot->mutex);
          slot->answer = std::move(a);
          slot->ready = true;
        }
        slot->ready_cv.notify_one();
      },
      std::move(cancelled));
  std::unique_lock<std::mutex> lock(slot->mutex);
  slot->ready_cv.wait(lock, [slot] { return slot->ready; });
  return std::move(slot->answer);
}

void InferenceService::submit(std::vector<float> input, SteadyTime arrival, double timeout_us,
                              Completion done, std::function<bool()> cancelled) {
  InferRequest r;
  r.input = std::make_shared<const std::vector<float>>(std::move(input));
  r.arrival = arrival;
  r.cancelled = std::move(cancelled);
  // A gRPC deadline centuries away would overflow the clock's nanoseconds: no deadline.
  if (timeout_us > 0 && timeout_us <= kMaxTimeoutUs) {
    r.deadline = arrival + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double, std::micro>(timeout_us));
  }
  r.done = [this, done = std::move(done)](InferAnswer&& a) {
    finish(&a);
    done(std::move(a));
  };
  // The inbox moves the request only when it takes it: when refused, `r.done` is still ours.
  // NOLINTNEXTLINE(bugprone-use-after-move): push moves `r` only when it takes it (above)
  if (!controller_.inbox().push(std::move(r))) r.done(stopping_answer());
}

void InferenceService::count_ended(SteadyTime arrival, std::string reason) {
  InferRequest r;
  r.arrival = arrival;
  r.ended = std::move(reason);
  (void)controller_.inbox().push(std::move(r));  // refused: the inbox counts it (stopping)
}

void InferenceService::finish(InferAnswer* a) const {
  if (a->outcome != Outcome::kAnswered || model_.emulated) {
    if (model_.emulated) a->output.clear();
    return;
  }
  // Real nodes send the output tensor followed by their per-layer times.
  const auto want = static_cast<size_t>(model_.output.elements());
  if (a->output.size() < want) {
    a->outcome = Outcome::kFailed;
    a->reason = "the unit leader returned " + std::to_string(a->output.size()) +
                " values, the model's output has " + std::to_string(want);
    a->output.clear();
    return;
  }
  a->output.resize(want);
}

}  // namespace serf::serve
