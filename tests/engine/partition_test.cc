#include "engine/partition.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <numeric>
#include <thread>

#include "engine/activation_exchange.h"

using namespace serf::engine;

TEST_CASE("slices are near-equal, contiguous and cover every channel", "[engine]") {
  for (int n : {1, 7, 10, 64, 4096}) {
    for (int k = 1; k <= std::min(n, 5); ++k) {
      int next = 0;
      for (int r = 0; r < k; ++r) {
        const Slice s = slice_of(n, k, r);
        CHECK(s.offset == next);
        CHECK((s.count == n / k || s.count == n / k + 1));
        next += s.count;
      }
      CHECK(next == n);
    }
  }
  CHECK(slice_of(10, 4, 0).count == 3);
  CHECK(slice_of(10, 4, 1).count == 3);
  CHECK(slice_of(10, 4, 2).count == 2);
  CHECK(slice_of(10, 4, 3).offset == 8);
}

TEST_CASE("gather layouts count floats per rank", "[engine]") {
  const GatherLayout g = gather_layout(10, 6, 3);  // 10 channels of 2x3 over 3 ranks: 4,3,3
  CHECK(g.counts == std::vector<int>{24, 18, 18});
  CHECK(g.offsets == std::vector<int>{0, 24, 42});
  CHECK(g.total == 60);
}

TEST_CASE("the in-process exchange assembles the slices in rank order", "[engine]") {
  for (int k = 1; k <= 4; ++k) {
    const GatherLayout g = gather_layout(11, 3, k);
    InProcessExchange group(k);
    std::vector<std::vector<float>> full(k, std::vector<float>(g.total, -1.0f));
    std::atomic<int> wrong{0};  // Catch2 assertions are not thread-safe: count, check after join
    std::vector<std::thread> threads;
    for (int r = 0; r < k; ++r) {
      threads.emplace_back([&, r] {
        for (int round = 0; round < 3; ++round) {  // the exchange is reusable
          for (int i = 0; i < g.counts[r]; ++i)
            full[r][g.offsets[r] + i] = float(g.offsets[r] + i + round);
          if (!group.member(r).all_gather(full[r].data(), g).ok()) ++wrong;
          for (int64_t i = 0; i < g.total; ++i) {
            if (full[r][i] != float(i + round)) ++wrong;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(wrong == 0);
  }
}
