#include "engine/activation_exchange.h"

#include <cstring>

namespace serf::engine {

Status LocalExchange::all_gather(float* full, const GatherLayout& layout) { return Status::Ok(); }

class InProcessExchange::Member final : public ActivationExchange {
 public:
  Member(InProcessExchange& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int ranks() const override { return group_.ranks(); }

  Status all_gather(float* full, const GatherLayout& layout) override {
    if (static_cast<int>(layout.counts.size()) != ranks()) {
      return Internal("all_gather layout has " + std::to_string(layout.counts.size()) +
                      " ranks, exchange has " + std::to_string(ranks()));
    }
    group_.posted_[rank_] = full;
    group_.barrier();  // every rank's slice is written and its buffer posted
    for (int r = 0; r < ranks(); ++r) {
      if (r == rank_) continue;
      std::memcpy(full + layout.offsets[r], group_.posted_[r] + layout.offsets[r],
                  sizeof(float) * static_cast<size_t>(layout.counts[r]));
    }
    group_.barrier();  // nobody reuses its buffer before the others have read it
    return Status::Ok();
  }

 private:
  InProcessExchange& group_;
  int rank_;
};

InProcessExchange::InProcessExchange(int ranks) : posted_(ranks, nullptr) {
  for (int r = 0; r < ranks; ++r) members_.push_back(std::make_unique<Member>(*this, r));
}

InProcessExchange::~InProcessExchange() = default;

ActivationExchange& InProcessExchange::member(int rank) { return *members_.at(rank); }

void InProcessExchange::barrier() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t gen = generation_;
  if (++waiting_ == ranks()) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen; });
}

}  // namespace serf::engine
