#pragma once
// The fast path for a KServe v2 JSON request's tensor values. Building an nlohmann tree for a
// "data" array of hundreds of numbers (a node per number, then a conversion each) was the largest
// part of parsing a JSON request (bench_frontend): here the one input's flat "data" array is
// found in the text and its numbers read with std::from_chars, and nlohmann parses only the small
// rest. Anything unusual (nested data, a non-number, a value out of FP32 range, malformed text)
// finds nothing, and the caller parses the whole text as before, with the same error messages.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace serf::serve {

struct SplicedInputData {
  std::string json;           // the request with inputs[0].data's array replaced by null
  std::vector<float> values;  // that array's numbers, each a finite FP32 value
};

// inputs[0].data of the request `text` when it is a flat array of JSON numbers in FP32 range.
std::optional<SplicedInputData> take_input_data(std::string_view text);

}  // namespace serf::serve
