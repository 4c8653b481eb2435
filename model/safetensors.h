#pragma once
// The safetensors file format, F32 only: 8-byte little-endian header length N, N bytes of JSON
// {"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__":
// {...}}, then the raw little-endian data (offsets relative to the end of the header).
// Weights::load_safetensors checks a file against a plan; these read and write any tensors.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/weights.h"

namespace serf::model {

using TensorShapes = std::map<std::string, std::vector<int64_t>>;

// Reads every tensor; errors name the file and the tensor (wrong dtype, offsets out of range,
// a size that does not match the shape, a truncated file). `check`, when given, sees every
// tensor's shape after the header is parsed and before any data is read, so a file of the wrong
// model fails in microseconds, not after reading hundreds of MB.
StatusOr<std::map<std::string, Tensor>> read_safetensors(
    const std::string& path, const std::function<Status(const TensorShapes&)>& check = nullptr);
// Writes the tensors (the header padded to 8 bytes, data in name order), atomically: a temporary
// file beside `path`, then rename.
Status write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace serf::model
