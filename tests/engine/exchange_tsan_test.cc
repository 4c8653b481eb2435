// The in-process activation exchange under ThreadSanitizer (CTest test_exchange_tsan, label tsan).
//
// `serf infer --inter-sim K` runs a request's K partitions as K threads of one process that
// all-gather through InProcessExchange; a node runs c slots, each a thread that owns its
// Executable (mpi/node.cc). This test does both at once: c slots x K ranks, one thread per (rank,
// slot), slot s of every rank sharing exchange group s. Built with -fsanitize=thread from the
// exchange sources and a test Executable that does plain, unsynchronised work (no oneDNN, no
// OpenMP: uninstrumented libgomp makes TSan report OpenMP's own fork/join). A race in the
// exchange's barrier or copies makes TSan report and the process exit non-zero (halt_on_error).
// The node's own threads are covered by test_node_tsan (tests/mpi/node_tsan_test.cc).
// Catch2 is not thread-safe: threads count problems in atomics and the main thread checks them.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "engine/activation_exchange.h"
#include "engine/backend.h"

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
  // Waits until `slots` run at once (true), or gives up after 30 s (false). The overlap TSan needs
  // is made, not hoped for: a 2 ms sleep alone left it to the scheduler, which on a loaded machine
  // may run a rank's slots one after the other. The bound is a hang guard, not a speed test.
  bool meet(int slots) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (most.load() < slots) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::yield();
    }
    return true;
  }
};

// One slot of one rank: writes its slice of its scratch without any lock, sleeps so that requests
// overlap, all-gathers the slices, then writes output[i] = 2 * input[i] + 1 from the scratch.
class TestSlot final : public Executable {
 public:
  TestSlot(Partition partition, Occupancy& occupancy, int slots)
      : partition_(partition), occupancy_(occupancy), slots_(slots), scratch_(kElements) {}

  Status run(const float* input, float* output, ActivationExchange& exchange,
             LayerTimings* timings) override {
    occupancy_.enter();
    // The first request of each slot stays until the rank's other slots are inside too.
    if (first_ && !occupancy_.meet(slots_)) {
      occupancy_.leave();
      return Internal("the rank's slots never ran at once within 30 s");
    }
    first_ = false;
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
  int slots_;
  bool first_ = true;
  std::vector<float> scratch_;
};

std::vector<float> input_for(int slot, int request) {
  std::vector<float> in(kElements);
  for (int i = 0; i < kElements; ++i) in[i] = static_cast<float>(slot * 1000 + request + i);
  return in;
}

bool answer_ok(const std::vector<float>& in, const std::vector<float>& out) {
  for (int i = 0; i < kElements; ++i) {
    if (out[i] != 2.0f * in[i] + 1.0f) return false;
  }
  return true;
}

TEST_CASE("c slots x K ranks: in-process all-gathers per slot, one thread per slot",
          "[engine][tsan]") {
  for (const int ranks : {2, 3}) {
    INFO("K = " << ranks);
    const int slots = 2, per_slot = 15;
    std::vector<std::unique_ptr<Occupancy>> occupancy;
    std::vector<std::unique_ptr<InProcessExchange>> groups;
    std::vector<std::unique_ptr<TestSlot>> executables;  // [rank * slots + slot]
    for (int r = 0; r < ranks; ++r) occupancy.push_back(std::make_unique<Occupancy>());
    for (int s = 0; s < slots; ++s) groups.push_back(std::make_unique<InProcessExchange>(ranks));
    for (int t = 0; t < ranks * slots; ++t) {
      executables.push_back(
          std::make_unique<TestSlot>(Partition{t / slots, ranks}, *occupancy[t / slots], slots));
    }
    std::atomic<int> failed{0}, wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < ranks * slots; ++t) {
      threads.emplace_back([&, t] {
        const int r = t / slots, s = t % slots;
        std::vector<float> out(kElements);
        for (int q = 0; q < per_slot; ++q) {
          // Every rank of slot s computes the same request, as the ranks of a unit do.
          const std::vector<float> in = input_for(s, q);
          if (!executables[t]->run(in.data(), out.data(), groups[s]->member(r), nullptr).ok())
            ++failed;
          if (!answer_ok(in, out)) ++wrong;
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(failed == 0);
    CHECK(wrong == 0);
    for (const auto& o : occupancy) {
      CHECK(o->most == slots);  // a rank's c slots ran at once
      CHECK(o->now == 0);
    }
  }
}

}  // namespace
}  // namespace serf::engine
