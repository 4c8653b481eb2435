#pragma once
// AlignedFloats: zeroed float storage for the CPU backend's weights and activations (and the
// benchmarks' STREAM triad, so that it streams from the same kind of memory).
//
// Small buffers are 64-byte aligned (a cache line, an AVX-512 vector). Buffers of 2 MiB or more
// are mapped 2 MiB aligned, rounded up to whole 2 MiB, and advised MADV_HUGEPAGE before the first
// touch: with transparent huge pages in "madvise" mode (Debian's default) they then sit on 2 MiB
// pages, so streaming hundreds of MB of fully connected weights walks 512x fewer pages (TLB
// misses). Where THP is "never" the advice is ignored and they stay on 4 KiB pages.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace serf::engine {

class AlignedFloats {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  AlignedFloats() = default;
  // Throws std::bad_alloc when the memory is not there.
  explicit AlignedFloats(int64_t n) : n_(n) {
    const size_t want = static_cast<size_t>(n > 0 ? n : 1) * sizeof(float);
    if (want < kHugePage) {
      bytes_ = (want + 63) / 64 * 64;
      p_ = static_cast<float*>(std::aligned_alloc(64, bytes_));
      if (p_ == nullptr) throw std::bad_alloc();
    } else {
      bytes_ = (want + kHugePage - 1) / kHugePage * kHugePage;
      // Map one huge page more than needed and unmap the unaligned head and the tail.
      const size_t span = bytes_ + kHugePage;
      void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) throw std::bad_alloc();
      // The aligned start by pointer arithmetic on the mapping (no integer turned into a pointer).
      char* const start = static_cast<char*>(raw);
      const size_t head = (kHugePage - reinterpret_cast<uintptr_t>(raw) % kHugePage) % kHugePage;
      char* const aligned = start + head;
      if (head > 0) munmap(start, head);
      const size_t tail = span - head - bytes_;
      if (tail > 0) munmap(aligned + bytes_, tail);
      p_ = reinterpret_cast<float*>(aligned);
      mapped_ = true;
      madvise(p_, bytes_, MADV_HUGEPAGE);  // a hint: failure leaves 4 KiB pages
    }
    std::memset(p_, 0, bytes_);  // first touch: the pages are populated here, not per request
  }
  ~AlignedFloats() { release(); }
  AlignedFloats(AlignedFloats&& o) noexcept { *this = std::move(o); }
  AlignedFloats& operator=(AlignedFloats&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
      mapped_ = std::exchange(o.mapped_, false);
    }
    return *this;
  }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;

  float* data() const { return p_; }
  int64_t size() const { return n_; }

 private:
  void release() {
    if (p_ == nullptr) return;
    if (mapped_)
      munmap(p_, bytes_);
    else
      std::free(p_);
    p_ = nullptr;
  }

  float* p_ = nullptr;
  int64_t n_ = 0;
  size_t bytes_ = 0;
  bool mapped_ = false;
};

}  // namespace serf::engine
