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
               std::shared_ptr<std::atomic<int>> served, bool counts)
      : inner_(std::move(inner)),
        plan_(std::move(plan)),
        served_(std::move(served)),
        counts_(counts) {}

  Status serve(const RunAction& action, const std::vector<float>& input, SlotOutput* out) override {
    if (counts_ && ++*served_ > plan_.after) {
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
  bool counts_;  // its configuration is plan_.from_configuration or later
};

}  // namespace

SlotWorkerFactory with_injected_fault(SlotWorkerFactory factory, const FaultPlan& plan, int rank) {
  if (plan.rank != rank || (plan.mode != FaultMode::kHang && plan.mode != FaultMode::kExit))
    return factory;
  auto served = std::make_shared<std::atomic<int>>(0);
  // The node builds a configuration's slots one after another, slot 0 first (make_slots).
  auto configurations = std::make_shared<std::atomic<int>>(0);
  return [factory = std::move(factory), plan, served,
          configurations](const SlotContext& ctx) -> StatusOr<std::unique_ptr<SlotWorker>> {
    if (ctx.slot == 0) ++*configurations;
    SERF_ASSIGN_OR_RETURN(std::unique_ptr<SlotWorker> inner, factory(ctx));
    const bool counts = *configurations >= plan.from_configuration;
    return std::unique_ptr<SlotWorker>(new FaultyWorker(std::move(inner), plan, served, counts));
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
