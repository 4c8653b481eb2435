#include "mpi/fault_injection.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

namespace serf::mpi {

namespace {

class FaultyWorker final : public SlotWorker {
 public:
  FaultyWorker(std::unique_ptr<SlotWorker> inner, FaultPlan plan,
               std::shared_ptr<std::atomic<int>> served)
      : inner_(std::move(inner)), plan_(plan), served_(std::move(served)) {}

  Status serve(const RunAction& action, const std::vector<float>& input, SlotOutput* out) override {
    if (++*served_ > plan_.after) {
      if (plan_.mode == FaultMode::kHang) {
        for (;;) std::raise(SIGSTOP);  // every thread stops, the watcher's pings included
      }
      if (plan_.mode == FaultMode::kExit) std::_Exit(3);
    }
    return inner_->serve(action, input, out);
  }

 private:
  std::unique_ptr<SlotWorker> inner_;
  FaultPlan plan_;
  std::shared_ptr<std::atomic<int>> served_;  // shared by the rank's slots
};

}  // namespace

SlotWorkerFactory with_injected_fault(SlotWorkerFactory factory, const FaultPlan& plan, int rank) {
  if (plan.rank != rank || (plan.mode != FaultMode::kHang && plan.mode != FaultMode::kExit))
    return factory;
  auto served = std::make_shared<std::atomic<int>>(0);
  return [factory = std::move(factory), plan,
          served](const SlotContext& ctx) -> StatusOr<std::unique_ptr<SlotWorker>> {
    SERF_ASSIGN_OR_RETURN(std::unique_ptr<SlotWorker> inner, factory(ctx));
    return std::unique_ptr<SlotWorker>(new FaultyWorker(std::move(inner), plan, served));
  };
}

namespace {
std::string g_stop_phase;  // set once, before any thread of the runtime starts
}  // namespace

void arm_phase_fault(const FaultPlan& plan, int rank) {
  if (plan.rank == rank && plan.mode == FaultMode::kHangAtStart) g_stop_phase = plan.phase;
}

void at_phase(const char* phase) {
  if (g_stop_phase.empty() || g_stop_phase != phase) return;
  for (;;) std::raise(SIGSTOP);  // every thread stops, the watcher's pings included
}

}  // namespace serf::mpi
