#pragma once
// The CPU backend: every layer a oneDNN primitive (f32, batch 1), OpenMP threads per request.
// Public header names no oneDNN type.

#include <memory>

#include "engine/backend.h"

namespace serf::engine {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace serf::engine
