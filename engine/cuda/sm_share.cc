#include "engine/cuda/sm_share.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace serf::engine::cuda {
namespace {

std::string cu_error(CUresult r) { return "CUresult " + std::to_string(static_cast<int>(r)); }

// The driver entry point `symbol` as of the toolkit we compiled with (the CUdevResource ABI is
// versioned, so older versions of these functions expect another struct layout).
template <typename Fn>
bool load_symbol(const char* symbol, Fn* fn, std::string* why) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &p, CUDA_VERSION, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    *why = std::string("the driver has no ") + symbol + " (green contexts need a driver for CUDA " +
           std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) +
           "+)";
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

}  // namespace

SlotStream::SlotStream(SlotStream&& o) noexcept
    : owner_(std::move(o.owner_)),
      stream_(std::exchange(o.stream_, nullptr)),
      green_(std::exchange(o.green_, nullptr)),
      sms_(o.sms_) {}

SlotStream& SlotStream::operator=(SlotStream&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = std::move(o.owner_);
    stream_ = std::exchange(o.stream_, nullptr);
    green_ = std::exchange(o.green_, nullptr);
    sms_ = o.sms_;
  }
  return *this;
}

SlotStream::~SlotStream() { release(); }

void SlotStream::release() {
  // The stream first: a green context does not destroy the streams created in it.
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (green_ != nullptr && owner_) owner_->driver_.ctx_destroy(green_);
  stream_ = nullptr;
  green_ = nullptr;
}

Status SmPartitioner::load_driver(std::string* why) {
  Driver& d = driver_;
  const bool ok = load_symbol("cuDeviceGet", &d.device_get, why) &&
                  load_symbol("cuDeviceGetDevResource", &d.get_resource, why) &&
                  load_symbol("cuDevSmResourceSplitByCount", &d.split, why) &&
                  load_symbol("cuDevResourceGenerateDesc", &d.generate_desc, why) &&
                  load_symbol("cuGreenCtxCreate", &d.ctx_create, why) &&
                  load_symbol("cuGreenCtxDestroy", &d.ctx_destroy, why) &&
                  load_symbol("cuGreenCtxStreamCreate", &d.stream_create, why);
  return ok ? Status::Ok() : Unavailable(*why);
}

Status SmPartitioner::split_device(std::string* why) {
  CUresult r = driver_.device_get(&cu_device_, device_);
  if (r != CUDA_SUCCESS) return Unavailable(*why = "cuDeviceGet: " + cu_error(r));
  CUdevResource all{};
  r = driver_.get_resource(cu_device_, &all, CU_DEV_RESOURCE_TYPE_SM);
  if (r != CUDA_SUCCESS) return Unavailable(*why = "cuDeviceGetDevResource: " + cu_error(r));
  // The smallest group the architecture allows, a multiple of the co-scheduling alignment.
  const unsigned align = std::max(1u, all.sm.smCoscheduledAlignment);
  unsigned unit = std::max({1u, all.sm.minSmPartitionSize, align});
  unit = (unit + align - 1) / align * align;
  unsigned groups = 0;
  r = driver_.split(nullptr, &groups, &all, nullptr, 0, unit);
  if (r != CUDA_SUCCESS || groups < 2) {
    return Unavailable(
        *why = "cuDevSmResourceSplitByCount (" + std::to_string(unit) + " SMs): " +
               (r != CUDA_SUCCESS ? cu_error(r) : std::to_string(groups) + " group(s)"));
  }
  std::vector<CUdevResource> result(groups);
  CUdevResource remaining{};
  r = driver_.split(result.data(), &groups, &all, &remaining, 0, unit);
  if (r != CUDA_SUCCESS) return Unavailable(*why = "cuDevSmResourceSplitByCount: " + cu_error(r));
  result.resize(groups);
  groups_ = std::move(result);
  units_ = static_cast<int>(groups);
  sms_per_unit_ = static_cast<int>(groups_[0].sm.smCount);
  return Status::Ok();
}

StatusOr<std::shared_ptr<SmPartitioner>> SmPartitioner::create(int device) {
  auto p = std::make_shared<SmPartitioner>();
  p->device_ = device;
  SERF_CUDA(cudaDeviceGetAttribute(&p->sm_count_, cudaDevAttrMultiProcessorCount, device));
  std::string why;
  // An escape hatch for a driver whose green contexts misbehave: plain streams, said in note().
  const char* env = std::getenv("SERF_CUDA_GREEN_CONTEXTS");
  const bool disabled = env != nullptr && std::strcmp(env, "off") == 0;
  if (disabled) why = "disabled by SERF_CUDA_GREEN_CONTEXTS=off";
  if (!disabled && p->load_driver(&why).ok() && p->split_device(&why).ok()) {
    p->note_ = "green contexts: " + std::to_string(p->units_) + " SM units of " +
               std::to_string(p->sms_per_unit_) + " SMs (of " + std::to_string(p->sm_count_) +
               "); a slot with T units runs on T * " + std::to_string(p->sms_per_unit_) + " SMs";
  } else {
    p->groups_.clear();
    p->units_ = 1;
    p->sms_per_unit_ = p->sm_count_;
    p->note_ = "no green contexts (" + why + "): every slot is a plain stream on all " +
               std::to_string(p->sm_count_) + " SMs, T is ignored";
  }
  return p;
}

StatusOr<SlotStream> SmPartitioner::stream_for(int units) const {
  SlotStream s;
  s.owner_ = shared_from_this();
  if (groups_.empty() || units >= units_) {
    SERF_CUDA(cudaSetDevice(device_));
    SERF_CUDA(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
    s.sms_ = sm_count_;
    return s;
  }
  int first = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (next_unit_ + units > units_) next_unit_ = 0;  // consecutive units of the one split
    first = next_unit_;
    next_unit_ = (next_unit_ + units) % units_;
  }
  std::vector<CUdevResource> share(groups_.begin() + first, groups_.begin() + first + units);
  CUdevResourceDesc desc = nullptr;
  CUresult r = driver_.generate_desc(&desc, share.data(), static_cast<unsigned>(share.size()));
  if (r != CUDA_SUCCESS) return Internal("cuDevResourceGenerateDesc: " + cu_error(r));
  r = driver_.ctx_create(&s.green_, desc, cu_device_, CU_GREEN_CTX_DEFAULT_STREAM);
  if (r != CUDA_SUCCESS) return Internal("cuGreenCtxCreate: " + cu_error(r));
  CUstream stream = nullptr;
  r = driver_.stream_create(&stream, s.green_, CU_STREAM_NON_BLOCKING, 0);
  if (r != CUDA_SUCCESS) return Internal("cuGreenCtxStreamCreate: " + cu_error(r));
  s.stream_ = stream;  // a CUstream is a cudaStream_t: runtime, cuDNN and cuBLAS take it
  s.sms_ = units * sms_per_unit_;
  return s;
}

}  // namespace serf::engine::cuda
