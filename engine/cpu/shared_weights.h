#pragma once
// SharedWeights: the packed weight tensors of every model one CPU backend prepared, shared across
// them. A node serving batches prepares the engine once per batch size 1..b (mpi/engine_worker.cc);
// most of the weights look the same in all of them (gemm_f32's panels do not depend on b, and
// oneDNN usually picks the same weights layout for a convolution at N = n as at N = 1), so each
// (weights object, tensor, slice, layout) is packed once and held by every model that uses it.
// A tensor is packed again only when a kernel really wants another layout; `layouts_beyond_first`
// counts those. Entries are weak: the bytes go when the last model holding them goes. Keyed by the
// tensor's address in its Weights object, like PreparedCache (backend.h: do not change or replace
// a Weights object while models prepared from it are held). Thread-safe.

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/aligned_floats.h"
#include "model/weights.h"

namespace serf::engine::cpu {

class SharedWeights {
 public:
  // What a packed tensor is: rows from `offset` on of `tensor`, as `plain` describes them (the
  // slice's dims), stored in `layout` (`kernel` names a layout no memory::desc describes, e.g.
  // "gemm_panels"; empty for a oneDNN layout).
  struct Key {
    const model::Tensor* tensor = nullptr;
    int64_t offset = 0;
    dnnl::memory::desc plain;
    dnnl::memory::desc layout;
    std::string kernel;
  };

  // The held tensor for `key`, or `floats` zeroed floats that `fill` packs (then remembered).
  // `*reused` tells which. Throws what AlignedFloats throws (std::bad_alloc).
  std::shared_ptr<const AlignedFloats> get_or_pack(const Key& key, int64_t floats,
                                                   const std::function<void(float*)>& fill,
                                                   bool* reused) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry>& layouts = entries_[{key.tensor, key.offset}];
    for (const Entry& e : layouts) {
      if (!same(e.plain, key.plain) || !same(e.layout, key.layout) || e.kernel != key.kernel)
        continue;
      if (auto held = e.data.lock()) {
        *reused = true;
        return held;
      }
    }
    auto packed = std::make_shared<AlignedFloats>(floats);
    fill(packed->data());
    *reused = false;
    // Drop dead entries of this slice so the list stays as long as the live layouts.
    layouts.erase(std::remove_if(layouts.begin(), layouts.end(),
                                 [](const Entry& e) { return e.data.expired(); }),
                  layouts.end());
    layouts.push_back({key.plain, key.layout, key.kernel, packed});
    return packed;
  }

  // Bytes of all live packed tensors, each once (what the backend's models hold together).
  int64_t resident_bytes() const {
    int64_t bytes = 0;
    for_each_live([&](const AlignedFloats& a, size_t) {
      bytes += a.size() * static_cast<int64_t>(sizeof(float));
    });
    return bytes;
  }

  // Live packed tensors that are a second (third, ...) layout of the same slice.
  int layouts_beyond_first() const {
    int extra = 0;
    for_each_live([&](const AlignedFloats&, size_t index) { extra += index > 0 ? 1 : 0; });
    return extra;
  }

 private:
  // oneDNN does not call two empty descs equal.
  static bool same(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
    return (a.data.ndims == 0 && b.data.ndims == 0) || a == b;
  }
  struct Entry {
    dnnl::memory::desc plain, layout;
    std::string kernel;
    std::weak_ptr<AlignedFloats> data;
  };
  // f(tensor, its index among its slice's live layouts).
  void for_each_live(const std::function<void(const AlignedFloats&, size_t)>& f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [slice, layouts] : entries_) {
      size_t live = 0;
      for (const Entry& e : layouts) {
        if (auto held = e.data.lock()) f(*held, live++);
      }
    }
  }

  mutable std::mutex mutex_;
  std::map<std::pair<const model::Tensor*, int64_t>, std::vector<Entry>> entries_;
};

}  // namespace serf::engine::cpu
