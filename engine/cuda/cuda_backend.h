#pragma once
// The CUDA backend: conv2d, pooling, relu, lrn and softmax with cuDNN, fully_connected with cuBLAS,
// bias (+ fused relu) with one CUDA kernel; float32, FP32 arithmetic (no TF32). A run() computes
// the b rows of a batch at once (cuDNN descriptors with N = b, one cuBLAS GEMM per
// fully_connected), stored as the CPU backend stores them (cuda_model.h).
// Service slots are CUDA streams (one per Executable, each with its own cuDNN and cuBLAS handle);
// intra-node parallelism T is a share of the SMs through CUDA green contexts (see sm_share.h for
// the mapping of T to SMs). Public header: names no CUDA type; make_backend("cuda") calls it.

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend.h"

namespace serf::engine {

// Unavailable (with the reason and "use --backend cpu") when the CUDA runtime finds no device.
StatusOr<std::unique_ptr<Backend>> make_cuda_backend(int device = 0);

struct CudaDeviceInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int device = 0;
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int compute_capability = 0;  // 90 for sm_90
  bool green_contexts = false;
  int sm_units = 1;  // F: the T a slot needs to get the whole GPU
  int sms_per_unit = 0;
  std::string note;  // one line: the T -> SM mapping in force, or why green contexts are off
};

// Loads the libraries the backend opens at run time (cuBLAS) without touching a device: Ok, or
// Unavailable naming the library. make_cuda_backend checks it too.
Status cuda_libraries_available();

// The device make_cuda_backend(device) would use; Unavailable without one.
StatusOr<CudaDeviceInfo> cuda_device_info(int device = 0);

}  // namespace serf::engine
