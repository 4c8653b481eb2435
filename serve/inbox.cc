#include "serve/inbox.h"

namespace serf::serve {

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAnswered:
      return "answered";
    case Outcome::kRejected:
      return "rejected";
    case Outcome::kTimedOut:
      return "timed_out";
    case Outcome::kFailed:
      return "failed";
  }
  return "failed";
}

bool RequestInbox::push(InferRequest&& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      ++refused_;
      return false;
    }
    waiting_.push_back(std::move(request));
  }
  cv_.notify_one();
  return true;
}

size_t RequestInbox::take_all(std::vector<InferRequest>* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t n = waiting_.size();
  for (auto& r : waiting_) out->push_back(std::move(r));
  waiting_.clear();
  return n;
}

void RequestInbox::wait(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout_s > 0) {
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                 [this] { return !waiting_.empty() || woken_; });
  }
  woken_ = false;
}

void RequestInbox::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  cv_.notify_one();
}

std::vector<InferRequest> RequestInbox::close() {
  std::vector<InferRequest> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    for (auto& r : waiting_) left.push_back(std::move(r));
    waiting_.clear();
  }
  cv_.notify_one();
  return left;
}

void RequestInbox::reopen() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = false;
}

bool RequestInbox::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

size_t RequestInbox::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_.size();
}

uint64_t RequestInbox::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

}  // namespace serf::serve
