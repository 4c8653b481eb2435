#include "serve/load/kserve_http.h"

#include <httplib.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/weights.h"
#include "serf/core/statistics.h"

namespace serf::serve::load {

namespace {

using nlohmann::json;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// The {"error": ...} of a KServe answer, or its first 200 bytes.
std::string error_of(const httplib::Result& r) {
  const json j = json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"];
  return "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 200);
}

}  // namespace

StatusOr<ServedModel> served_model_from_metadata(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, false);
  const std::string bad = "the server's model metadata ";
  if (!j.is_object() || !j.contains("inputs") || !j["inputs"].is_array() || j["inputs"].empty() ||
      !j.contains("outputs") || !j["outputs"].is_array() || j["outputs"].empty()) {
    return InvalidArgument(bad + "lacks inputs or outputs: " + json_text.substr(0, 200));
  }
  ServedModel m;
  m.name = j.value("name", "");
  m.platform = j.value("platform", "");
  const json& in = j["inputs"][0];
  const json& out = j["outputs"][0];
  if (!in.is_object() || !in.contains("name") || !in.contains("shape") || !in["shape"].is_array() ||
      !out.is_object() || !out.contains("name")) {
    return InvalidArgument(bad + "has no input name and shape: " + json_text.substr(0, 200));
  }
  m.input = in["name"].get<std::string>();
  m.input_datatype = in.value("datatype", "FP32");
  if (m.input_datatype != "FP32") {
    return InvalidArgument(bad + "names input datatype " + m.input_datatype +
                           "; serf load sends FP32 only");
  }
  for (const json& d : in["shape"]) {
    if (!d.is_number_integer()) return InvalidArgument(bad + "has a non-integer input dimension");
    const int64_t v = d.get<int64_t>();
    m.input_shape.push_back(v < 0 ? 1 : v);  // a variable dimension: 1
  }
  m.output = out["name"].get<std::string>();
  return m;
}

StatusOr<ServedModel> http_model_metadata(const Endpoint& to, const std::string& url,
                                          const std::string& model, double ready_wait_s) {
  httplib::Client client(to.host, to.port);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(10, 0);
  const std::string path = "/v2/models/" + model;
  httplib::Result meta = client.Get(path.c_str());
  if (!meta) {
    return InvalidArgument("--url " + url + ": cannot reach the server (" +
                           httplib::to_string(meta.error()) +
                           "); is `serf serve --http` running there?");
  }
  if (meta->status != 200) {
    return InvalidArgument("--model " + model + ": the server at " + url +
                           " answers: " + error_of(meta));
  }
  SERF_ASSIGN_OR_RETURN(ServedModel m, served_model_from_metadata(meta->body));
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(ready_wait_s));
  for (;;) {
    httplib::Result ready = client.Get((path + "/ready").c_str());
    if (ready && ready->status == 200) return m;
    if (std::chrono::steady_clock::now() >= until) {
      return InvalidArgument(
          "--model " + model + ": not ready at " + url + " within " + format_g(ready_wait_s) +
          " s (" +
          (ready ? "HTTP " + std::to_string(ready->status) : httplib::to_string(ready.error())) +
          ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

StatusOr<std::vector<float>> load_input(const ServedModel& model, const std::string& path,
                                        uint64_t seed) {
  const std::vector<int64_t>& s = model.input_shape;
  model::Shape shape;
  if (s.size() == 4 && s[0] == 1) {
    shape = {static_cast<int>(s[1]), static_cast<int>(s[2]), static_cast<int>(s[3])};
  } else if (s.size() == 2 && s[0] == 1) {
    shape = {static_cast<int>(s[1]), 1, 1};
  } else {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    if (!path.empty()) {
      return InvalidArgument("--input " + path + ": the served model's input has shape " +
                             shape_text(s) + "; a safetensors input needs [1,C,H,W] or [1,C]");
    }
    shape = {static_cast<int>(n), 1, 1};
  }
  if (path.empty()) return model::seeded_input(shape, seed);
  auto input = model::load_input_safetensors(path, shape);
  if (!input.ok()) return input.status().with_context("--input");
  return input;
}

std::string infer_body(const ServedModel& model, const std::vector<float>& input, bool binary,
                       std::optional<size_t>* header_length) {
  json tensor = {{"name", model.input}, {"shape", model.input_shape}, {"datatype", "FP32"}};
  if (!binary) {
    tensor["data"] = input;
    header_length->reset();
    return json{{"inputs", json::array({tensor})}}.dump();
  }
  tensor["parameters"] = {{"binary_data_size", input.size() * sizeof(float)}};
  const json header = {
      {"inputs", json::array({tensor})},
      {"outputs",
       json::array({{{"name", model.output}, {"parameters", {{"binary_data", true}}}}})}};
  std::string body = header.dump();
  *header_length = body.size();
  const size_t at = body.size();
  body.resize(at + input.size() * sizeof(float));
  std::memcpy(body.data() + at, input.data(), input.size() * sizeof(float));
  return body;
}

}  // namespace serf::serve::load
