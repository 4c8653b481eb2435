#pragma once
// PreparedCache: Backend::prepare's cache (backend.h): while a PreparedModel is held, preparing
// the same (weights object, model, partition, threads,
// batch) again returns it, so another slot of the node or a
// switch back to a configuration still in use shares the weight slices instead of building them
// again. Keyed by the Weights object's address; entries are weak, so nothing is kept alive here.
// Thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "engine/backend.h"

namespace serf::engine {

template <typename Model>
class PreparedCache {
 public:
  // The held model for this configuration, or the one `create()` builds (then remembered).
  StatusOr<std::shared_ptr<PreparedModel>> get_or_create(
      const model::ModelPlan& plan, const model::Weights& weights, Partition partition, int threads,
      int batch, const std::function<StatusOr<std::shared_ptr<Model>>()>& create) {
    const Key key{&weights, plan.spec.name, plan.weight_bytes, partition.rank, partition.ranks,
                  threads,  batch};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      if (auto cached = it->second.lock()) return std::shared_ptr<PreparedModel>(std::move(cached));
    }
    SERF_ASSIGN_OR_RETURN(std::shared_ptr<Model> prepared, create());
    cache_[key] = prepared;
    return std::shared_ptr<PreparedModel>(std::move(prepared));
  }

  // Bytes of weights the live models hold (each its own copy: for backends that share nothing
  // across configurations).
  int64_t held_weight_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t bytes = 0;
    for (const auto& [key, model] : cache_) {
      if (auto held = model.lock()) bytes += held->resident_weight_bytes();
    }
    return bytes;
  }

 private:
  using Key = std::tuple<const model::Weights*, std::string, int64_t, int, int, int, int>;
  mutable std::mutex mutex_;
  std::map<Key, std::weak_ptr<Model>> cache_;
};

}  // namespace serf::engine
