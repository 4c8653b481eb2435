#pragma once
// Internal to engine/cuda: intra-node parallelism T on a GPU as a share of its SMs.
//
// Mapping: at backend creation the GPU's SMs are split once (cuDevSmResourceSplitByCount) into
// F equal "SM units" of the smallest partition the architecture allows (8 SMs on compute
// capability 9.0, so F = 16 units of 8 SMs on an H100 SXM or H200 with 132 SMs; the 4 SMs left
// over are not handed out). F plays the role of the paper's cores per node: a slot prepared with
// T units gets a CUDA green context over T units (T * 8 SMs), c slots of T units fit side by side
// when c * T <= F. Slots take consecutive units round-robin; once every unit is handed out the next
// slots share SMs with earlier ones (as c * T > F oversubscribes cores on a CPU). T >= F, or a
// driver without green contexts (the entry points come from the driver at run time; CUDA >= 12.4
// drivers have them), gives a plain stream on the whole GPU; note() says which case holds.
// SERF_CUDA_GREEN_CONTEXTS=off in the environment forces plain streams (for diagnosis).

#include <cuda.h>
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/cuda/cuda_util.h"
#include "serf/core/status.h"

namespace serf::engine::cuda {

class SmPartitioner;

// One slot's stream (and the green context it lives in, when there is one).
class SlotStream {
 public:
  SlotStream() = default;
  ~SlotStream();
  SlotStream(SlotStream&& o) noexcept;
  SlotStream& operator=(SlotStream&& o) noexcept;
  SlotStream(const SlotStream&) = delete;
  cudaStream_t get() const { return stream_; }
  int sms() const { return sms_; }
  bool green() const { return green_ != nullptr; }

 private:
  friend class SmPartitioner;
  void release();
  std::shared_ptr<const SmPartitioner> owner_;
  cudaStream_t stream_ = nullptr;
  CUgreenCtx green_ = nullptr;
  int sms_ = 0;
};

class SmPartitioner : public std::enable_shared_from_this<SmPartitioner> {
 public:
  // Never fails for want of green contexts (it records why and falls back to plain streams);
  // errors are CUDA failures on the device itself.
  static StatusOr<std::shared_ptr<SmPartitioner>> create(int device);

  bool green_contexts() const { return !groups_.empty(); }
  int units() const { return units_; }  // F
  int sms_per_unit() const { return sms_per_unit_; }
  int sm_count() const { return sm_count_; }
  const std::string& note() const { return note_; }  // one line: the mapping in force, or why not

  // A non-blocking stream with `units` SM units (see the mapping above).
  StatusOr<SlotStream> stream_for(int units) const;

 private:
  friend class SlotStream;
  struct Driver {
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDeviceGetDevResource) get_resource = nullptr;
    decltype(&cuDevSmResourceSplitByCount) split = nullptr;
    decltype(&cuDevResourceGenerateDesc) generate_desc = nullptr;
    decltype(&cuGreenCtxCreate) ctx_create = nullptr;
    decltype(&cuGreenCtxDestroy) ctx_destroy = nullptr;
    decltype(&cuGreenCtxStreamCreate) stream_create = nullptr;
  };
  Status load_driver(std::string* why);
  Status split_device(std::string* why);

  int device_ = 0;
  CUdevice cu_device_ = 0;
  Driver driver_;
  std::vector<CUdevResource> groups_;  // F units from one split; empty: no green contexts
  int units_ = 1;
  int sms_per_unit_ = 0;
  int sm_count_ = 0;
  std::string note_;
  mutable std::mutex mutex_;
  mutable int next_unit_ = 0;  // round-robin cursor over groups_
};

}  // namespace serf::engine::cuda
