#include "serve/kserve.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "serf/io/json_fields.h"
#include "serve/tensor_json.h"

namespace serf::serve {

namespace {

using nlohmann::json;

const char* type_name(const json& j) { return j.type_name(); }

// A JSON number as FP32: finite and in float range.
Status to_float(const json& j, const std::string& where, float* out) {
  if (!j.is_number()) {
    return InvalidArgument(where + ": expected a number, got " + std::string(type_name(j)));
  }
  const double v = j.get<double>();
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) {
    return InvalidArgument(where + ": " + j.dump() + " is not a finite FP32 value");
  }
  *out = static_cast<float>(v);
  return Status::Ok();
}

// Row-major values of `data`, either flat or nested exactly as `shape`.
Status flatten(const json& data, const std::vector<int64_t>& shape, size_t dim,
               const std::string& where, std::vector<float>* out) {
  if (dim == shape.size()) {
    float v = 0;
    SERF_RETURN_IF_ERROR(to_float(data, where, &v));
    out->push_back(v);
    return Status::Ok();
  }
  if (!data.is_array()) {
    return InvalidArgument(where + ": expected an array of " + std::to_string(shape[dim]) +
                           " (shape " + shape_text(shape) + "), got " + type_name(data));
  }
  if (static_cast<int64_t>(data.size()) != shape[dim]) {
    return InvalidArgument(where + ": " + std::to_string(data.size()) + " values where shape " +
                           shape_text(shape) + " needs " + std::to_string(shape[dim]));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    SERF_RETURN_IF_ERROR(
        flatten(data[i], shape, dim + 1, where + "[" + std::to_string(i) + "]", out));
  }
  return Status::Ok();
}

Status check_count(size_t values, const std::vector<int64_t>& shape, int64_t elements,
                   const std::string& where) {
  if (elements >= 0 && static_cast<int64_t>(values) != elements) {
    return InvalidArgument(where + ": " + std::to_string(values) + " values, but shape " +
                           shape_text(shape) + " holds " + std::to_string(elements));
  }
  return Status::Ok();
}

Status decode_json_data(const json& data, const std::vector<int64_t>& shape, int64_t elements,
                        const std::string& where, std::vector<float>* out) {
  if (!data.is_array()) {
    return InvalidArgument(where + ": expected an array, got " + std::string(type_name(data)));
  }
  out->reserve(static_cast<size_t>(std::max<int64_t>(elements, 0)));
  if (!data.empty() && data[0].is_array()) return flatten(data, shape, 0, where, out);
  SERF_RETURN_IF_ERROR(check_count(data.size(), shape, elements, where));
  for (size_t i = 0; i < data.size(); ++i) {
    float v = 0;
    SERF_RETURN_IF_ERROR(to_float(data[i], where + "[" + std::to_string(i) + "]", &v));
    out->push_back(v);
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> read_shape(const json& tensor, const std::string& where) {
  auto it = tensor.find("shape");
  if (it == tensor.end() || !it->is_array()) {
    return InvalidArgument(where + ".shape: required, an array of dimensions");
  }
  std::vector<int64_t> shape;
  for (const json& d : *it) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return InvalidArgument(where + ".shape: " + it->dump() + " must hold non-negative integers");
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

StatusOr<std::string> read_string(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return InvalidArgument(where + "." + key + ": required, a string");
  }
  return it->get<std::string>();
}

const json& parameters_of(const json& obj, const std::string& where, Status* st) {
  static const json kEmpty = json::object();
  auto it = obj.find("parameters");
  if (it == obj.end()) return kEmpty;
  if (!it->is_object()) *st = InvalidArgument(where + ".parameters: expected an object");
  return *it;
}

// The input tensor's values: JSON "data" (already read into `fast` when the text was spliced,
// tensor_json.h) or `binary_data_size` bytes taken from `binary`.
Status read_input(const ModelInfo& model, const json& tensor, size_t body_bytes,
                  std::string_view* binary, bool has_binary, std::vector<float>* fast,
                  std::vector<float>* out) {
  const std::string where = "inputs[0]";
  if (!tensor.is_object()) return InvalidArgument(where + ": expected an object");
  SERF_ASSIGN_OR_RETURN(std::string name, read_string(tensor, "name", where));
  SERF_ASSIGN_OR_RETURN(std::string datatype, read_string(tensor, "datatype", where));
  SERF_ASSIGN_OR_RETURN(std::vector<int64_t> shape, read_shape(tensor, where));
  SERF_RETURN_IF_ERROR(check_input(model, name, datatype, shape));
  // A model of any shape (emulated, no spec) takes the client's (a fixed shape was checked above):
  // its product must not overflow, nor be reserved before the values are counted. Every value
  // takes at least one byte of the body, so a shape of more values than bytes cannot be filled.
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (model.input.elements() < 0 && d != 0 && elements > static_cast<int64_t>(body_bytes) / d) {
      return InvalidArgument(where + ".shape: " + shape_text(shape) + " holds more values than " +
                             "the " + std::to_string(body_bytes) + "-byte body can carry");
    }
    elements *= d;
  }
  Status st;
  const json& params = parameters_of(tensor, where, &st);
  SERF_RETURN_IF_ERROR(st);
  auto size_it = params.find("binary_data_size");
  const bool has_data = tensor.contains("data");
  if (size_it == params.end()) {
    if (!has_data) return InvalidArgument(where + ": give \"data\" or binary_data_size");
    if (fast) {
      SERF_RETURN_IF_ERROR(check_count(fast->size(), shape, elements, where + ".data"));
      *out = std::move(*fast);
      return Status::Ok();
    }
    return decode_json_data(tensor["data"], shape, elements, where + ".data", out);
  }
  if (has_data) return InvalidArgument(where + ": both \"data\" and binary_data_size given");
  if (!has_binary) {
    return InvalidArgument(where +
                           ": binary_data_size given but no Inference-Header-Content-Length "
                           "header says where the JSON ends");
  }
  if (!size_it->is_number_integer() || size_it->get<int64_t>() < 0) {
    return InvalidArgument(where + ".parameters.binary_data_size: " + size_it->dump() +
                           " is not a byte count");
  }
  const auto bytes = static_cast<uint64_t>(size_it->get<int64_t>());
  if (bytes != static_cast<uint64_t>(elements) * sizeof(float)) {
    return InvalidArgument(where + ".parameters.binary_data_size: " + std::to_string(bytes) +
                           " bytes, but " + std::to_string(elements) + " FP32 values of shape " +
                           shape_text(shape) + " take " + std::to_string(elements * 4));
  }
  if (bytes > binary->size()) {
    return InvalidArgument(where + ".parameters.binary_data_size: " + std::to_string(bytes) +
                           " bytes, but the body holds " + std::to_string(binary->size()) +
                           " after the JSON header");
  }
  out->resize(static_cast<size_t>(elements));
  std::memcpy(out->data(), binary->data(), bytes);
  binary->remove_prefix(bytes);
  if (!all_finite(*out)) return InvalidArgument(where + ": the binary data holds NaN or infinity");
  return Status::Ok();
}

Status read_outputs(const ModelInfo& model, const json& doc, const json& params, InferCall* call) {
  auto flag = params.find("binary_data_output");
  if (flag != params.end()) {
    if (!flag->is_boolean()) {
      return InvalidArgument("parameters.binary_data_output: expected true or false");
    }
    call->output.binary = flag->get<bool>();
  }
  auto it = doc.find("outputs");
  if (it == doc.end()) return Status::Ok();
  if (!it->is_array() || it->size() > 1) {
    return InvalidArgument("outputs: expected an array naming at most the one output \"" +
                           model.output.name + "\"");
  }
  for (const json& o : *it) {
    if (!o.is_object()) return InvalidArgument("outputs[0]: expected an object");
    SERF_ASSIGN_OR_RETURN(std::string name, read_string(o, "name", "outputs[0]"));
    Status st;
    const json& p = parameters_of(o, "outputs[0]", &st);
    SERF_RETURN_IF_ERROR(st);
    SERF_ASSIGN_OR_RETURN(RequestedOutput r, check_output(model, name, p));
    if (!p.contains("binary_data")) r.binary = call->output.binary;
    call->output = r;
  }
  return Status::Ok();
}

// FP32 values as a JSON array, each as the double it is, in the shortest text that reads back as
// that double (std::to_chars); a non-finite value as null, as nlohmann writes it. nlohmann's
// writer (grisu2 through a tree of doubles) was the front end's largest user-space cost after
// parsing (bench_frontend: 432 values per answer).
void append_float_array(const std::vector<float>& values, std::string* out) {
  out->reserve(out->size() + values.size() * 12 + 2);
  out->push_back('[');
  char buf[32];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out->push_back(',');
    const double v = values[i];
    if (!std::isfinite(v)) {
      out->append("null");
      continue;
    }
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  }
  out->push_back(']');
}

void append_bytes_element(const std::string& s, std::string* out) {
  const auto n = static_cast<uint32_t>(s.size());
  const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                       static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out->append(len, 4);
  out->append(s);
}

}  // namespace

bool all_finite(const std::vector<float>& values) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: infinity or NaN
  uint32_t bad = 0;
  for (const float v : values) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return bad == 0;
}

Status check_input(const ModelInfo& model, const std::string& name, const std::string& datatype,
                   const std::vector<int64_t>& shape) {
  if (name != model.input.name) {
    return InvalidArgument("unknown input \"" + name + "\": model " + model.name +
                           " has one input, \"" + model.input.name + "\"");
  }
  if (datatype != model.input.datatype) {
    return InvalidArgument("input \"" + name + "\": datatype " + datatype + ", the model takes " +
                           model.input.datatype);
  }
  if (model.input.elements() < 0) return Status::Ok();  // any shape
  if (shape != model.input.shape) {
    return InvalidArgument("input \"" + name + "\": shape " + shape_text(shape) +
                           ", the model takes " + shape_text(model.input.shape));
  }
  return Status::Ok();
}

StatusOr<RequestedOutput> check_output(const ModelInfo& model, const std::string& name,
                                       const json& parameters) {
  if (name != model.output.name) {
    return InvalidArgument("unknown output \"" + name + "\": model " + model.name +
                           " has one output, \"" + model.output.name + "\"");
  }
  RequestedOutput r;
  auto binary = parameters.find("binary_data");
  if (binary != parameters.end()) {
    if (!binary->is_boolean()) {
      return InvalidArgument("output \"" + name + "\": binary_data must be true or false");
    }
    r.binary = binary->get<bool>();
  }
  auto k = parameters.find("classification");
  if (k != parameters.end()) {
    const int64_t limit = model.emulated ? 0 : model.output.elements();
    if (!k->is_number_integer() || k->get<int64_t>() < 1 || k->get<int64_t>() > limit) {
      return InvalidArgument("output \"" + name + "\": classification " + k->dump() +
                             " must be an integer in [1, " + std::to_string(limit) + "]" +
                             (model.emulated ? " (emulated nodes return no output)" : ""));
    }
    r.classification = static_cast<int>(k->get<int64_t>());
  }
  return r;
}

StatusOr<double> timeout_parameter(const json& parameters) {
  auto it = parameters.find("timeout");
  if (it == parameters.end()) return 0.0;
  if (!it->is_number() || !(it->get<double>() >= 0) || !(it->get<double>() <= kMaxTimeoutUs)) {
    return InvalidArgument("parameters.timeout: " + it->dump() +
                           " must be a number of microseconds in [0, 1e+15] (0: none)");
  }
  return it->get<double>();
}

StatusOr<InferCall> parse_infer_request(const ModelInfo& model, std::string_view body,
                                        std::optional<size_t> header_length) {
  std::string_view header = body, binary;
  if (header_length) {
    if (*header_length > body.size()) {
      return InvalidArgument("Inference-Header-Content-Length " + std::to_string(*header_length) +
                             " is more than the body's " + std::to_string(body.size()) + " bytes");
    }
    header = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  // The fast path parses the input's numbers itself and nlohmann the rest; if nlohmann then
  // refuses the rest, the whole text is parsed again so that the error is the usual one.
  std::optional<SplicedInputData> fast = take_input_data(header);
  json doc;
  if (fast) {
    try {
      doc = json::parse(fast->json, io::refuse_duplicate_keys());
    } catch (...) {
      fast.reset();
    }
  }
  if (!fast) {
    try {
      doc = json::parse(header.begin(), header.end(), io::refuse_duplicate_keys());
    } catch (const io::DuplicateJsonKey& d) {
      return InvalidArgument("key " + d.path + " appears twice in one object; give each key once");
    } catch (const json::parse_error& e) {
      std::string hint;
      if (!header_length && e.byte < body.size()) {
        hint =
            " (a body of JSON followed by binary tensors needs the "
            "Inference-Header-Content-Length header)";
      }
      return InvalidArgument(std::string("malformed JSON: ") + e.what() + hint);
    } catch (const json::exception& e) {
      // A number out of double's range (1e400): nlohmann's out_of_range, not a parse_error.
      return InvalidArgument(std::string("a value the request cannot hold: ") + e.what() +
                             " (FP32 values are finite, at most 3.4e38 in magnitude)");
    }
  }
  if (!doc.is_object()) return InvalidArgument("the request must be a JSON object");
  InferCall call;
  if (doc.contains("id")) {
    if (!doc["id"].is_string()) return InvalidArgument("id: expected a string");
    call.id = doc["id"].get<std::string>();
  }
  Status st;
  const json& params = parameters_of(doc, "request", &st);
  SERF_RETURN_IF_ERROR(st);
  SERF_ASSIGN_OR_RETURN(call.timeout_us, timeout_parameter(params));
  auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !inputs->is_array() || inputs->size() != 1) {
    return InvalidArgument("inputs: expected an array with the one input \"" + model.input.name +
                           "\"");
  }
  SERF_RETURN_IF_ERROR(read_input(model, (*inputs)[0], body.size(), &binary,
                                  header_length.has_value(), fast ? &fast->values : nullptr,
                                  &call.input));
  if (!binary.empty()) {
    return InvalidArgument("the body holds " + std::to_string(binary.size()) +
                           " bytes after the JSON header and the binary inputs it names");
  }
  SERF_RETURN_IF_ERROR(read_outputs(model, doc, params, &call));
  return call;
}

std::vector<std::string> classification(const std::vector<float>& output, int k) {
  std::vector<int> order(output.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t top = std::min(static_cast<size_t>(std::max(k, 0)), order.size());
  std::partial_sort(
      order.begin(), order.begin() + static_cast<long>(top), order.end(), [&](int a, int b) {
        return output[static_cast<size_t>(a)] > output[static_cast<size_t>(b)] ||
               (output[static_cast<size_t>(a)] == output[static_cast<size_t>(b)] && a < b);
      });
  std::vector<std::string> out;
  for (size_t i = 0; i < top; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%f:%d", output[static_cast<size_t>(order[i])], order[i]);
    out.emplace_back(buf);
  }
  return out;
}

std::vector<int64_t> answer_shape(const ModelInfo& model, size_t output_elements) {
  if (model.emulated || model.output.elements() < 0) {
    return {1, static_cast<int64_t>(output_elements)};
  }
  return model.output.shape;
}

namespace {

std::string json_string(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The answer of a JSON FP32 output (no extension asked), written directly: the text nlohmann
// writes for the same document (keys in its sorted order, the same escapes), without building
// the tree, dumping it and splicing the values into the dump (a second copy of the whole body).
// bench_frontend: this answer is the HTTP path's most common and its values the largest part.
std::string plain_infer_response(const ModelInfo& model, const InferCall& call,
                                 const std::vector<float>& output) {
  std::string body;
  body.reserve(160 + output.size() * 24);
  body += '{';
  if (!call.id.empty()) body += R"("id":)" + json_string(call.id) + ',';
  body += R"("model_name":)" + json_string(model.name) + R"(,"model_version":)" +
          json_string(model.version) + R"(,"outputs":[{"data":)";
  append_float_array(output, &body);
  body += R"(,"datatype":"FP32","name":)" + json_string(model.output.name) + R"(,"shape":[)";
  const std::vector<int64_t> shape = answer_shape(model, output.size());
  for (size_t i = 0; i < shape.size(); ++i) body += (i ? "," : "") + std::to_string(shape[i]);
  body += "]}]";
  if (model.emulated) body += R"(,"parameters":{"emulated":true})";
  body += '}';
  return body;
}

}  // namespace

EncodedResponse encode_infer_response(const ModelInfo& model, const InferCall& call,
                                      const std::vector<float>& output) {
  if (call.output.classification <= 0 && !call.output.binary) {
    return {plain_infer_response(model, call, output), std::nullopt};
  }
  json out{{"name", model.output.name}};
  std::string raw;
  if (call.output.classification > 0) {
    std::vector<std::string> top = classification(output, call.output.classification);
    out["datatype"] = "BYTES";
    out["shape"] = {1, static_cast<int64_t>(top.size())};
    if (call.output.binary) {
      for (const std::string& s : top) append_bytes_element(s, &raw);
    } else {
      out["data"] = top;
    }
  } else {
    out["datatype"] = "FP32";
    out["shape"] = answer_shape(model, output.size());
    if (call.output.binary) {
      raw.assign(reinterpret_cast<const char*>(output.data()), output.size() * sizeof(float));
    }
  }
  if (call.output.binary) out["parameters"] = {{"binary_data_size", raw.size()}};
  json doc{{"model_name", model.name}, {"model_version", model.version}};
  if (!call.id.empty()) doc["id"] = call.id;
  if (model.emulated) doc["parameters"] = {{"emulated", true}};
  doc["outputs"] = json::array({out});
  EncodedResponse r;
  r.body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  if (call.output.binary) {
    r.header_length = r.body.size();
    r.body += raw;
  }
  return r;
}

json server_metadata() {
  return {{"name", "serf"},
          {"version", "0.1.0"},
          {"extensions", {"binary_tensor_data", "classification", "statistics"}}};
}

json model_metadata(const ModelInfo& model) {
  auto tensor = [](const TensorInfo& t) {
    return json{{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
  };
  return {{"name", model.name},
          {"versions", {model.version}},
          {"platform", model.platform},
          {"inputs", {tensor(model.input)}},
          {"outputs", {tensor(model.output)}}};
}

std::string error_body(const std::string& message) {
  // A message may quote bytes of a malformed request: never throw on invalid UTF-8.
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace serf::serve
