// Spec parsing and shape inference: the shipped models' real counts and every bad-input message.
#include "model/model_spec.h"

#include <catch2/catch.hpp>

#include "serf/io/json_fields.h"

using namespace serf::model;

namespace {

std::string models_dir() { return std::string(SERF_SOURCE_DIR) + "/configs/models/"; }

serf::StatusOr<ModelPlan> plan_from(const std::string& text) {
  auto doc = serf::io::parse_json(text, "test.json");
  if (!doc.ok()) return doc.status();
  auto spec = model_spec_from_json(*doc, "test.json");
  if (!spec.ok()) return spec.status();
  return infer_shapes(*spec);
}

// A spec with the given layers on a 3x8x8 input.
std::string with_layers(const std::string& layers) {
  return R"({"name": "t", "input": {"channels": 3, "height": 8, "width": 8}, "layers": [)" +
         layers + "]}";
}

std::string error_of(const std::string& text) {
  auto plan = plan_from(text);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == serf::StatusCode::kInvalidArgument);
  CHECK(plan.status().message().find('\n') == std::string::npos);
  return plan.status().message();
}

}  // namespace

TEST_CASE("cifar10 spec: shapes and counts", "[model]") {
  auto plan = load_model(models_dir() + "cifar10.json");
  REQUIRE(plan.ok());
  CHECK(plan->spec.name == "cifar10");
  CHECK(plan->spec.description.find("CIFAR-10") == 0);
  CHECK(plan->layers.size() == 13);
  // conv1 5x5x3 -> 64 on 32x32: 1024 * 64 * 75 multiply-adds.
  CHECK(plan->layers[0].out == Shape{64, 32, 32});
  CHECK(plan->layers[0].connections == 4915200);
  CHECK(plan->layers[0].parameters == 64 * 75 + 64);
  CHECK(plan->layers[2].out == Shape{64, 15, 15});  // maxpool 3/2, floor
  CHECK(plan->layers[7].out == Shape{64, 7, 7});
  CHECK(plan->layers[8].out == Shape{3136, 1, 1});
  CHECK(plan->layers[9].connections == 3136 * 192);
  CHECK(plan->output() == Shape{10, 1, 1});
  CHECK(plan->connections == 28559232);  // the paper's ~28.5 million
  CHECK(plan->parameters == 711562);
  CHECK(plan->weight_bytes == 711562 * 4);
}

TEST_CASE("imagenet specs: AlexNet-like sizes", "[model]") {
  auto in1k = load_model(models_dir() + "imagenet1k.json");
  REQUIRE(in1k.ok());
  CHECK(in1k->layers[0].out == Shape{96, 55, 55});
  CHECK(in1k->layers[15].out == Shape{9216, 1, 1});
  CHECK(in1k->output() == Shape{1000, 1, 1});
  CHECK(in1k->parameters == 62378344);  // about 60 million
  CHECK(in1k->connections == 1135256096);
  int conv = 0, fc = 0, lrn = 0;
  for (const auto& l : in1k->spec.layers) {
    conv += l.kind == LayerKind::kConv2d;
    fc += l.kind == LayerKind::kFullyConnected;
    lrn += l.kind == LayerKind::kLrn;
  }
  CHECK(conv == 5);
  CHECK(fc == 3);
  CHECK(lrn == 2);

  auto in22k = load_model(models_dir() + "imagenet22k.json");
  REQUIRE(in22k.ok());
  CHECK(in22k->output() == Shape{22000, 1, 1});
  CHECK(in22k->connections == 2196663680LL);  // over 2 billion
  CHECK(in22k->parameters == 170717936);
  CHECK(in22k->weight_bytes == 682871744);
}

TEST_CASE("tiny spec has every layer type", "[model]") {
  auto plan = load_model(models_dir() + "tiny.json");
  REQUIRE(plan.ok());
  for (LayerKind k :
       {LayerKind::kConv2d, LayerKind::kMaxPool, LayerKind::kAvgPool, LayerKind::kRelu,
        LayerKind::kLrn, LayerKind::kFlatten, LayerKind::kFullyConnected, LayerKind::kSoftmax}) {
    bool found = false;
    for (const auto& l : plan->spec.layers) found = found || l.kind == k;
    CHECK(found);
  }
  CHECK(plan->layers[6].out == Shape{12, 2, 2});  // avgpool 3/2 pad 1 on 4x4
  CHECK(plan->parameters == 2054);
  CHECK(plan->connections == 45856);
}

TEST_CASE("defaults: layer names, strides, lrn", "[model]") {
  auto plan = plan_from(with_layers(
      R"({"type": "conv2d", "out_channels": 4, "kernel": 3}, {"type": "maxpool", "kernel": 2},
         {"type": "lrn"}, {"type": "flatten"}, {"type": "fully_connected", "out": 5})"));
  REQUIRE(plan.ok());
  CHECK(plan->spec.layers[0].name == "conv2d0");
  CHECK(plan->spec.layers[1].name == "maxpool1");
  CHECK(plan->spec.layers[0].stride == 1);
  CHECK(plan->spec.layers[0].pad == 0);
  CHECK(plan->spec.layers[1].stride == 2);  // pooling stride defaults to its kernel
  CHECK(plan->spec.layers[2].lrn_size == 5);
  CHECK(plan->spec.layers[2].lrn_beta == Approx(0.75f));
  CHECK(plan->layers[0].out == Shape{4, 6, 6});
  CHECK(plan->layers[1].out == Shape{4, 3, 3});
  CHECK(plan->layers[4].parameters == 5 * 36 + 5);
  CHECK(std::string(to_string(LayerKind::kFullyConnected)) == "fully_connected");
  CHECK(layer_kind_from_string("avgpool").value() == LayerKind::kAvgPool);
}

TEST_CASE("bad specs: one line naming the layer", "[model]") {
  CHECK(error_of(R"({"name": "t", "input": )").find("test.json: malformed JSON") == 0);
  CHECK(error_of(with_layers(R"({"type": "relu"}, {"type": "conv3d"})")) ==
        "test.json: layers[1].type: unknown layer type 'conv3d' (known: conv2d, maxpool, "
        "avgpool, relu, lrn, flatten, fully_connected, softmax)");
  CHECK(
      error_of(with_layers(R"({"name": "c", "type": "conv2d", "out_channels": 4, "kernel": 9})")) ==
      "layers[0] (c): kernel 9 larger than its input 8x8 (use a smaller kernel or fewer "
      "pooling layers before it)");
  CHECK(error_of(with_layers(R"({"type": "maxpool", "kernel": 4},
                                {"name": "c2", "type": "conv2d", "out_channels": 4, "kernel": 7, "pad": 1})"))
            .find("layers[1] (c2): kernel 7 larger than its input 2x2 padded by 1") == 0);
  CHECK(
      error_of(with_layers(R"({"name": "c", "type": "conv2d", "out_channels": 0, "kernel": 3})")) ==
      "layers[0] (c): out_channels must be positive (got 0)");
  CHECK(error_of(with_layers(
            R"({"name": "c", "type": "conv2d", "out_channels": 2, "kernel": 3, "stride": -1})")) ==
        "layers[0] (c): stride must be positive (got -1)");
  CHECK(error_of(with_layers(
            R"({"name": "c", "type": "conv2d", "out_channels": 2, "kernel": 3, "pad": -2})")) ==
        "layers[0] (c): pad must be >= 0 (got -2)");
  CHECK(error_of(with_layers(R"({"name": "f", "type": "fully_connected", "out": -5})")) ==
        "layers[0] (f): out must be positive (got -5)");
  CHECK(error_of(R"({"name": "t", "input": {"channels": 0, "height": 8, "width": 8},
                     "layers": [{"type": "relu"}]})") ==
        "input: channels must be positive (got 0)");
  CHECK(error_of(with_layers(R"({"name": "fc1", "type": "fully_connected", "out": 10})")) ==
        "layers[0] (fc1): fully_connected needs a flat input but gets 3x8x8 (add {\"type\": "
        "\"flatten\"} before it)");
  CHECK(error_of(with_layers(
            R"({"type": "flatten"}, {"name": "p", "type": "softmax"}, {"type": "relu"})")) ==
        "layers[1] (p): softmax must be the last layer (found 1 layer(s) after it)");
  CHECK(
      error_of(with_layers(R"({"name": "c", "type": "conv2d", "out_channels": 4, "kernal": 3})")) ==
      "test.json: layers[0] (c): unknown field 'kernal' for a conv2d layer (allowed: kernel, "
      "out_channels, pad, stride)");
  CHECK(error_of(with_layers(R"({"name": "c", "type": "conv2d", "kernel": 3})")) ==
        "test.json: layers[0] (c).out_channels: missing field");
  CHECK(error_of(with_layers(
            R"({"name": "c", "type": "conv2d", "out_channels": "four", "kernel": 3})")) ==
        "test.json: layers[0] (c).out_channels: expected an integer");
  CHECK(error_of(with_layers(R"({"name": "a", "type": "relu"}, {"name": "a", "type": "relu"})")) ==
        "test.json: layers[1] (a): duplicate layer name (each layer needs its own name)");
  CHECK(error_of(with_layers(R"({"name": "n", "type": "lrn", "size": 4})")) ==
        "layers[0] (n): size must be a positive odd number (got 4)");
  CHECK(error_of(with_layers(R"({"name": "p", "type": "avgpool", "kernel": 2, "pad": 2})")) ==
        "layers[0] (p): pad 2 must be at most half the kernel 2");
  CHECK(error_of(with_layers(R"({"name": "a.b", "type": "relu"})"))
            .find("test.json: layers[0].name: 'a.b' is not a valid layer name") == 0);
  CHECK(error_of(with_layers("")) == "test.json: layers: must hold at least one layer");
  CHECK(error_of(R"({"name": "t", "inputs": {}})") ==
        "test.json: unknown field 'inputs' (allowed: name, description, input, layers)");
  CHECK(error_of(with_layers(R"({"type": "conv2d", "out_channels": 100000, "kernel": 8},
                                {"type": "flatten"}, {"type": "fully_connected", "out": 2000000000})"))
            .find("layers[2] (fully_connected2): the model exceeds") == 0);
}

TEST_CASE("load_model names the file", "[model]") {
  auto missing = load_model(models_dir() + "no_such_model.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == serf::StatusCode::kNotFound);
  CHECK(missing.status().message().find("no_such_model.json: cannot open file") !=
        std::string::npos);
}
