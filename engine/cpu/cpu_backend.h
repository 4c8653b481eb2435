#pragma once
// The CPU backend: every layer a oneDNN primitive (f32, any batch), OpenMP threads per request.
// Public header names no oneDNN type.

#include <memory>

#include "engine/backend.h"
#include "engine/layer_steps.h"
#include "model/model_spec.h"

namespace serf::engine {

std::unique_ptr<Backend> make_cpu_backend();

namespace cpu {
// Threads for one step of a request with T = `threads` (docs/engine.md, "Threads per layer"): a
// step too small to give every thread about 10 us of work runs on fewer threads, at least one.
// Work is the larger of the step's multiply-adds and the floats it reads and writes (this rank's
// part of the batch). The backend creates, and runs, the step's primitives with this count.
int step_threads(const LayerStep& step, const model::LayerInfo& info, int batch, int threads);
}  // namespace cpu

}  // namespace serf::engine
