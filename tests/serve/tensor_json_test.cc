// The fast path for a JSON request's tensor values (serve/tensor_json.h): the same values and
// the same errors as parsing the whole request with nlohmann.
#include "serve/tensor_json.h"

#include <catch2/catch.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/kserve.h"
#include "test_models.h"

using namespace serf;
using namespace serf::serve;
using serf::serve::testing::model_2x2;

namespace {

std::string request(const std::string& data, const std::string& before = "") {
  return "{" + before + R"("inputs": [ {"name": "input", "shape": [1, 2, 2], )" +
         R"("datatype": "FP32", "data" : )" + data + R"(} ], "outputs": [{"name": "output"}]})";
}

}  // namespace

TEST_CASE("the fast path reads a flat data array as nlohmann would", "[serve][kserve]") {
  const std::string numbers = "[0.1, -1e-7,3.4028234e38 , 5, -0, 1E+2, 0.30000001192092896]";
  auto d = take_input_data(request(numbers));
  REQUIRE(d);
  const nlohmann::json want = nlohmann::json::parse(numbers);
  REQUIRE(d->values.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE(d->values[i] == static_cast<float>(want[i].get<double>()));
  }
  REQUIRE(d->json == request("null"));
  // A "data" key inside a string, or in an earlier member, is not the input's.
  auto e = take_input_data(request("[1, 2, 3, 4]", R"("id": "\"data\": [9]", )"));
  REQUIRE(e);
  REQUIRE(e->values == std::vector<float>{1, 2, 3, 4});
  REQUIRE(e->json == request("null", R"("id": "\"data\": [9]", )"));
  auto f = take_input_data(request("[1, 2, 3, 4]", R"("parameters": {"data": [7], "x": [[1]]}, )"));
  REQUIRE(f);
  REQUIRE(f->values == std::vector<float>{1, 2, 3, 4});
  REQUIRE(take_input_data(request("[]"))->values.empty());
}

TEST_CASE("anything unusual is left to the whole parse", "[serve][kserve]") {
  for (const char* data : {"[[1, 2], [3, 4]]", "[1, \"2\", 3, 4]", "[1, null, 3, 4]", "[1e39]",
                           "[NaN]", "[01]", "[1.]", "[.5]", "[-]", "[+1]", "[1 2]", "[1,]", "[1, 2",
                           "null", "\"x\"", "[0x10]", "[1e]", "[inf]"}) {
    INFO(data);
    REQUIRE_FALSE(take_input_data(request(data)));
  }
  REQUIRE_FALSE(take_input_data("{\"inputs\": [{\"name\": \"input\"}]}"));
  REQUIRE_FALSE(take_input_data("{\"inputs\": {\"data\": [1]}}"));
  REQUIRE_FALSE(take_input_data("{\"inputs\": [{\"d\\u0061ta\": [1]}]}"));
  REQUIRE_FALSE(take_input_data("[1, 2]"));
  REQUIRE_FALSE(take_input_data("{\"inputs\": [{\"name\": \"inp"));
}

TEST_CASE("requests parsed on the fast path answer as before, errors included", "[serve][kserve]") {
  const ModelInfo m = model_2x2();
  auto ok = parse_infer_request(m, request("[1, 2.5, -3, 4e-3]"), {});
  REQUIRE(ok.ok());
  REQUIRE(ok->input == std::vector<float>{1, 2.5f, -3, 4e-3f});
  // The same request nested takes the whole parse: the same values.
  auto nested = parse_infer_request(m, request("[[[1, 2.5], [-3, 4e-3]]]"), {});
  REQUIRE(nested.ok());
  REQUIRE(nested->input == ok->input);
  auto count = parse_infer_request(m, request("[1, 2, 3]"), {});
  REQUIRE(count.status().message() == "inputs[0].data: 3 values, but shape [1, 2, 2] holds 4");
  auto twice = parse_infer_request(
      m, R"({"inputs": [{"name": "input", "data": [1, 2, 3, 4], "data": [1]}]})", {});
  REQUIRE(twice.status().message().find("appears twice in one object") != std::string::npos);
  // Malformed after the data: the error names the place in the text the client sent.
  const std::string broken = request("[1, 2, 3, 4]") + "}";
  auto bad = parse_infer_request(m, broken, {});
  std::string want;
  try {
    const auto doc = nlohmann::json::parse(broken);
    want = doc.dump();  // not reached
  } catch (const nlohmann::json::parse_error& e) {
    want = e.what();
  }
  REQUIRE_FALSE(want.empty());
  INFO(bad.status().message());
  REQUIRE(bad.status().message().rfind("malformed JSON: " + want, 0) == 0);
  auto both = parse_infer_request(m,
                                  "{\"inputs\": [{\"name\": \"input\", \"shape\": [1, 2, 2], "
                                  "\"datatype\": \"FP32\", \"parameters\": {\"binary_data_size\": "
                                  "16}, \"data\": [1, 2, 3, 4]}]}",
                                  {});
  REQUIRE(both.status().message().find("both \"data\" and binary_data_size") != std::string::npos);
}

TEST_CASE("a JSON answer's values read back as the outputs' exact values", "[serve][kserve]") {
  ModelInfo m = model_2x2();
  m.output.shape = {1, 9};
  InferCall call;
  call.id = R"("outputs":[{"data":null)";
  const std::vector<float> out = {0.1f,  1.0f,          -0.0f,
                                  1e-5f, 3.4028235e38f, 1e-45f,
                                  -2.5f, 1e20f,         std::numeric_limits<float>::quiet_NaN()};
  const EncodedResponse r = encode_infer_response(m, call, out);
  INFO(r.body);
  const nlohmann::json doc = nlohmann::json::parse(r.body);
  REQUIRE(doc["id"] == call.id);
  const nlohmann::json& o = doc["outputs"][0];
  REQUIRE(o["name"] == "output");
  REQUIRE(o["datatype"] == "FP32");
  REQUIRE(o["shape"] == nlohmann::json({1, 9}));
  REQUIRE(o["data"].size() == out.size());
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    REQUIRE(o["data"][i].get<double>() == static_cast<double>(out[i]));
  }
  REQUIRE(o["data"][8].is_null());  // as nlohmann writes NaN
  REQUIRE(r.body.find("\"data\":[0.10000000149011612,1,-0,9.999999747378752e-06,") !=
          std::string::npos);
}

TEST_CASE("all_finite finds a NaN or an infinity anywhere, and only those", "[serve][kserve]") {
  // The branch-free check (session 32) over inputs longer than a vector register, the bad value
  // at every place, against std::isfinite.
  const float specials[] = {
      std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  const float fine[] = {0.0f,          -0.0f,          1e-45f, -1e-45f, 1.17549435e-38f,
                        3.4028235e38f, -3.4028235e38f, 1.0f};
  for (size_t n : std::initializer_list<size_t>{1, 7, 8, 33, 150528}) {
    std::vector<float> v(n, 0.5f);
    for (size_t i = 0; i < n; ++i) v[i] = fine[i % 8];
    REQUIRE(all_finite(v));
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      for (float bad : specials) {
        std::vector<float> w = v;
        w[at] = bad;
        REQUIRE_FALSE(all_finite(w));
      }
    }
  }
  REQUIRE(all_finite({}));
}

TEST_CASE("a JSON answer written directly is the text nlohmann writes for it", "[serve][kserve]") {
  // Session 32 writes the plain FP32 answer without building nlohmann's tree (bench_frontend's
  // most common answer). Its framing must stay nlohmann's byte for byte (sorted keys, the same
  // escapes, invalid UTF-8 replaced) and its values the outputs' exact doubles.
  for (const bool emulated : {false, true}) {
    for (const std::string& id : {std::string(), std::string("a \"quoted\\ id\n\xc3\xa9\xff")}) {
      ModelInfo m = model_2x2();
      m.name = "m\"odel";
      m.output.shape = {1, 3};
      m.emulated = emulated;
      InferCall call;
      call.id = id;
      const std::vector<float> out =
          emulated ? std::vector<float>{} : std::vector<float>{0.1f, -2.5f, 1e20f};
      const std::string body = encode_infer_response(m, call, out).body;
      INFO(body);
      nlohmann::json data = nlohmann::json::array();
      for (float v : out) data.push_back(static_cast<double>(v));
      nlohmann::json o{{"name", m.output.name},
                       {"datatype", "FP32"},
                       {"shape", emulated ? std::vector<int64_t>{1, 0} : m.output.shape},
                       {"data", nullptr}};
      nlohmann::json doc{{"model_name", m.name}, {"model_version", m.version}};
      if (!id.empty()) doc["id"] = id;
      if (emulated) doc["parameters"] = {{"emulated", true}};
      doc["outputs"] = nlohmann::json::array({o});
      const std::string framing =
          doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      // The body with its values taken out is nlohmann's dump with "data": null.
      const size_t at = body.find("\"data\":[");
      REQUIRE(at != std::string::npos);
      const size_t end = body.find(']', at);
      REQUIRE(body.substr(0, at + 7) + "null" + body.substr(end + 1) == framing);
      // And its values read back as the outputs' doubles.
      const nlohmann::json got = nlohmann::json::parse(body);
      REQUIRE(got["outputs"][0]["data"] == data);
    }
  }
}

TEST_CASE("a request's numbers and shapes out of range are refused, never thrown",
          "[serve][kserve]") {
  const ModelInfo m = model_2x2();
  // 1e400 overflows a double: nlohmann throws out_of_range (not a parse_error) on the whole parse.
  auto huge = parse_infer_request(m, request("[1e400, 1, 1, 1]"), {});
  REQUIRE(huge.status().exit_code() == 2);
  INFO(huge.status().message());
  REQUIRE(huge.status().message().find("1e400") != std::string::npos);
  // A model of any shape (emulated without a spec) takes the client's: a product past int64, or
  // more values than the body has bytes, is refused before anything is reserved.
  ModelInfo any = m;
  any.input.shape = {-1};
  const std::string big =
      "{\"inputs\": [{\"name\": \"input\", \"shape\": [4611686018427387904, "
      "4611686018427387904], \"datatype\": \"FP32\", \"data\": [1]}]}";
  auto overflow = parse_infer_request(any, big, {});
  INFO(overflow.status().message());
  REQUIRE(overflow.status().message().find("inputs[0].shape: [4611686018427387904, "
                                           "4611686018427387904] holds more values than the ") ==
          0);
  const std::string wide =
      "{\"inputs\": [{\"name\": \"input\", \"shape\": [1, 34359738368], "
      "\"datatype\": \"FP32\", \"data\": [1]}]}";
  REQUIRE(parse_infer_request(any, wide, {}).status().message().find("body can carry") !=
          std::string::npos);
  const std::string four =
      "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 2], "
      "\"datatype\": \"FP32\", \"data\": [1, 2, 3, 4]}]}";
  REQUIRE(parse_infer_request(any, four, {}).ok());
}
