// The Executor's c slots under ThreadSanitizer (CTest test_executor_tsan, label tsan).
//
// Built with -fsanitize=thread from the executor and exchange sources and a test backend that does
// plain, unsynchronised work in each slot (no oneDNN, no OpenMP: uninstrumented libgomp makes TSan
// report OpenMP's own fork/join). If the Executor ever let two callers into one slot, or its own
// bookkeeping raced, TSan reports it and the process exits non-zero (TSAN_OPTIONS exitcode).
// Catch2 is not thread-safe: callers count problems in atomics and the main thread checks them.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/activation_exchange.h"
#include "engine/executor.h"

namespace serf::engine {
namespace {

constexpr int kElements = 256;

// Counts the slots running at once, and the most ever seen.
struct Occupancy {
  std::atomic<int> now{0}, most{0};
  void enter() {
    const int n = ++now;
    int seen = most.load();
    while (n > seen && !most.compare_exchange_weak(seen, n)) {
    }
  }
  void leave() { --now; }
};

// One slot: writes its scratch without any lock (a second caller in the same slot is a data race
// TSan sees), sleeps so that requests overlap, all-gathers its slice when K > 1, then writes
// output[i] = 2 * input[i] + 1 from the scratch.
class TestSlot final : public Executable {
 public:
  TestSlot(Partition partition, Occupancy& occupancy)
      : partition_(partition), occupancy_(occupancy), scratch_(kElements) {}

  Status run(const float* input, float* output, ActivationExchange& exchange,
             LayerTimings* timings) override {
    occupancy_.enter();
    const GatherLayout layout = gather_layout(kElements, 1, partition_.ranks);
    const int begin = layout.offsets[partition_.rank];
    const int end = begin + layout.counts[partition_.rank];
    for (int i = begin; i < end; ++i) scratch_[i] = 2.0f * input[i] + 1.0f;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    Status status = exchange.all_gather(scratch_.data(), layout);
    std::copy(scratch_.begin(), scratch_.end(), output);
    if (timings != nullptr) timings->compute_ms.assign(1, 2.0);
    occupancy_.leave();
    return status;
  }
  Partition partition() const override { return partition_; }
  int threads() const override { return 1; }

 private:
  Partition partition_;
  Occupancy& occupancy_;
  std::vector<float> scratch_;
};

class TestModel final : public PreparedModel {
 public:
  explicit TestModel(Partition partition) : partition_(partition) {}
  StatusOr<std::unique_ptr<Executable>> new_slot() override {
    return std::unique_ptr<Executable>(new TestSlot(partition_, occupancy));
  }
  const model::ModelPlan& plan() const override { return plan_; }
  Partition partition() const override { return partition_; }
  int threads() const override { return 1; }
  int64_t resident_weight_bytes() const override { return 0; }

  Occupancy occupancy;

 private:
  Partition partition_;
  model::ModelPlan plan_;
};

std::vector<float> input_for(int caller, int request) {
  std::vector<float> in(kElements);
  for (int i = 0; i < kElements; ++i) in[i] = static_cast<float>(caller * 1000 + request + i);
  return in;
}

bool answer_ok(const std::vector<float>& in, const std::vector<float>& out) {
  for (int i = 0; i < kElements; ++i) {
    if (out[i] != 2.0f * in[i] + 1.0f) return false;
  }
  return true;
}

struct CallerCounts {
  int failed = 0;  // calls that returned an error
  int wrong = 0;   // answers that are not the request's
};

// `callers` threads at once; caller t sends `per_caller` requests input_for(input_key(t), q)
// through call(t, in, out) and checks each answer.
template <typename Key, typename Call>
CallerCounts run_callers(int callers, int per_caller, Key input_key, Call call) {
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> out(kElements);
      for (int q = 0; q < per_caller; ++q) {
        const std::vector<float> in = input_for(input_key(t), q);
        if (!call(t, in, out).ok()) ++failed;
        if (!answer_ok(in, out)) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {failed.load(), wrong.load()};
}

TEST_CASE("c slots: more callers than slots, run() from many threads", "[engine][tsan]") {
  const int slots = 3, callers = 6, per_caller = 20;
  auto model = std::make_shared<TestModel>(Partition{0, 1});
  auto executor = Executor::create(model, slots);
  REQUIRE(executor.ok());
  const CallerCounts n = run_callers(
      callers, per_caller, [](int t) { return t; },
      [&](int, const std::vector<float>& in, std::vector<float>& out) {
        LocalExchange local;
        LayerTimings timings;
        return (*executor)->run(in.data(), out.data(), local, &timings);
      });
  CHECK(n.failed == 0);
  CHECK(n.wrong == 0);
  CHECK(model->occupancy.most == slots);  // all c slots ran at once, never more
  CHECK(model->occupancy.now == 0);
}

TEST_CASE("c slots: run_on_slot from several threads per slot", "[engine][tsan]") {
  const int slots = 2, callers = 6, per_caller = 15;
  auto model = std::make_shared<TestModel>(Partition{0, 1});
  auto executor = Executor::create(model, slots);
  REQUIRE(executor.ok());
  const CallerCounts n = run_callers(
      callers, per_caller, [](int t) { return t; },
      [&](int t, const std::vector<float>& in, std::vector<float>& out) {
        LocalExchange local;
        return (*executor)->run_on_slot(t % slots, in.data(), out.data(), local, nullptr);
      });
  CHECK(n.failed == 0);
  CHECK(n.wrong == 0);
  CHECK(model->occupancy.most == slots);
}

// K = 2 ranks, each its own Executor of c slots; slot s of both ranks shares exchange group s
// (what the MPI runtime does with one communicator per slot). One caller thread per (rank, slot).
TEST_CASE("c slots x K ranks: in-process all-gathers per slot", "[engine][tsan]") {
  const int slots = 2, ranks = 2, per_caller = 15;
  std::vector<std::shared_ptr<TestModel>> models;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int r = 0; r < ranks; ++r) {
    models.push_back(std::make_shared<TestModel>(Partition{r, ranks}));
    auto executor = Executor::create(models.back(), slots);
    REQUIRE(executor.ok());
    executors.push_back(std::move(*executor));
  }
  std::vector<std::unique_ptr<InProcessExchange>> groups;
  for (int s = 0; s < slots; ++s) groups.push_back(std::make_unique<InProcessExchange>(ranks));
  // Caller t is (rank t / slots, slot t % slots); both ranks of slot s send the same request.
  const CallerCounts n = run_callers(
      ranks * slots, per_caller, [&](int t) { return t % slots; },
      [&](int t, const std::vector<float>& in, std::vector<float>& out) {
        const int r = t / slots, s = t % slots;
        return executors[r]->run_on_slot(s, in.data(), out.data(), groups[s]->member(r), nullptr);
      });
  CHECK(n.failed == 0);
  CHECK(n.wrong == 0);
  for (const auto& m : models) CHECK(m->occupancy.most == slots);
}

}  // namespace
}  // namespace serf::engine
