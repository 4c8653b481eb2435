// Spec parsing and shape inference: the shipped models' real counts and every bad-input message.
#include "model/model_spec.h"

#include <catch2/catch.hpp>

#include "model/weights.h"
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
  CHECK(plan->layers[9].connections == int64_t{3136} * 192);
  CHECK(plan->output() == Shape{10, 1, 1});
  CHECK(plan->connections == 28559232);  // the paper's ~28.5 million
  CHECK(plan->parameters == 711562);
  CHECK(plan->weight_bytes == int64_t{711562} * 4);
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
  CHECK(plan->spec.layers[0].window.stride_h == 1);
  CHECK(plan->spec.layers[0].window.pad_top == 0);
  CHECK(plan->spec.layers[1].window.stride_w == 2);  // pooling stride defaults to its kernel
  CHECK(plan->spec.layers[1].inputs == std::vector<std::string>{"conv2d0"});  // the chain
  CHECK(plan->spec.layers[0].inputs == std::vector<std::string>{"input"});
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
        "test.json: layers[1].type: unknown layer type 'conv3d' (known: conv2d, "
        "conv_transpose2d, maxpool, avgpool, global_avgpool, relu, clip, sigmoid, hardsigmoid, "
        "hardswish, silu, leaky_relu, tanh, elu, gelu, prelu, batchnorm, layer_norm, lrn, flatten, "
        "fully_connected, add, mul, concat, slice, channel_shuffle, upsample, pad, softmax)");
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
      "test.json: layers[0] (c): unknown field 'kernal' for a conv2d layer (allowed: dilation, "
      "groups, kernel, out_channels, pad, stride, inputs)");
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

TEST_CASE("every shipped spec loads and counts as before", "[model]") {
  // The chain specs of the first format, and the graph specs of the zoo (configs/models/).
  struct Count {
    const char* name;
    int64_t parameters, connections;
    size_t layers;
  };
  const Count counts[] = {
      {"tiny", 2054, 45856, 12},
      {"cifar10", 711562, 28559232, 13},
      {"imagenet1k", 62378344, 1135256096, 22},
      {"imagenet22k", 170717936, 2196663680LL, 22},
      {"ranking_mlp", 54801921, 54788352, 9},
  };
  for (const Count& c : counts) {
    INFO(c.name);
    auto plan = load_model(models_dir() + c.name + ".json");
    REQUIRE(plan.ok());
    CHECK(plan->parameters == c.parameters);
    CHECK(plan->connections == c.connections);
    CHECK(plan->layers.size() == c.layers);
    // A chain: every layer reads the one before it.
    for (size_t i = 1; i < plan->layers.size(); ++i) {
      CHECK(plan->layers[i].sources == std::vector<int>{static_cast<int>(i) - 1});
    }
    // Written back as JSON, the spec reads the same (and stays a chain: no "inputs").
    const auto doc = model_spec_to_json(plan->spec);
    CHECK(doc.dump().find("\"inputs\"") == std::string::npos);
    auto again = model_spec_from_json(nlohmann::json::parse(doc.dump()), "again");
    REQUIRE(again.ok());
    auto replan = infer_shapes(*again);
    REQUIRE(replan.ok());
    CHECK(replan->parameters == c.parameters);
    CHECK(replan->connections == c.connections);
  }
}

TEST_CASE("graph specs: named inputs, windows per dimension, activation peak", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "a", "type": "conv2d", "out_channels": 4, "kernel": [3, 1], "pad": [1, 0]},
      {"name": "b", "type": "conv2d", "out_channels": 4, "kernel": 3, "pad": [1, 1, 1, 1],
       "inputs": ["input"]},
      {"name": "s", "type": "add", "inputs": ["a", "b"]},
      {"name": "d", "type": "conv2d", "out_channels": 8, "kernel": 3, "dilation": 2, "groups": 4,
       "pad": [2, 1, 2, 3]},
      {"name": "c", "type": "concat", "inputs": ["d", "s", "d"]},
      {"name": "m", "type": "maxpool", "kernel": 3, "stride": 2, "ceil_mode": true},
      {"name": "g", "type": "global_avgpool"}, {"name": "n", "type": "batchnorm"},
      {"name": "k", "type": "clip", "min": -1, "max": 1}, {"type": "sigmoid"})"));
  REQUIRE(plan.ok());
  CHECK(plan->layers[0].out == Shape{4, 8, 8});
  CHECK(plan->layers[0].parameters == 4 * 3 * 3 * 1 + 4);
  CHECK(plan->layers[2].sources == std::vector<int>{0, 1});
  CHECK(plan->layers[3].out == Shape{8, 8, 8});  // 8 + 2 + 2 - 5 + 1, 8 + 1 + 3 - 5 + 1
  CHECK(plan->layers[3].parameters == int64_t{8} * 1 * 3 * 3 + 8);  // 4 groups of 1 input channel
  CHECK(plan->layers[3].connections == int64_t{8} * 8 * 8 * 9);
  CHECK(plan->layers[4].out == Shape{20, 8, 8});
  CHECK(plan->layers[5].out == Shape{20, 4, 4});  // ceil((8 - 3) / 2) + 1
  CHECK(plan->layers[6].out == Shape{20, 1, 1});
  CHECK(plan->layers[7].parameters == int64_t{4} * 20);
  CHECK(plan->consumers[3] == std::vector<int>{4});
  CHECK(plan->input_consumers == std::vector<int>{0, 1});
  // Peak: during c, the input (3x8x8) is dead; d, s and c are alive: (8 + 4 + 20) * 64 floats.
  CHECK(plan->activation_peak_bytes == int64_t{8 + 4 + 20} * 64 * 4);
  // The spec written back keeps its graph.
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[1].inputs == std::vector<std::string>{"input"});
  CHECK(again->layers[3].window.pad_right == 3);
  CHECK(again->layers[5].ceil_mode);
  CHECK(again->layers[8].clip_min == -1.0f);
}

TEST_CASE("gates and mul: fields, shapes, written back", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "c", "type": "conv2d", "out_channels": 4, "kernel": 3, "pad": 1},
      {"name": "a", "type": "silu"}, {"name": "h", "type": "hardswish"},
      {"name": "g", "type": "global_avgpool"},
      {"name": "s", "type": "hardsigmoid", "alpha": 0.2, "beta": 0.4},
      {"name": "x", "type": "mul", "inputs": ["h", "s"]},
      {"name": "d", "type": "hardsigmoid", "inputs": ["x"]},
      {"name": "y", "type": "mul", "inputs": ["x", "d"]})"));
  REQUIRE(plan.ok());
  CHECK(plan->layers[5].out == Shape{4, 8, 8});  // 4x8x8 scaled by 4x1x1
  CHECK(plan->layers[7].out == Shape{4, 8, 8});  // equal shapes
  CHECK(plan->layers[5].parameters == 0);
  CHECK(is_activation(LayerKind::kSilu));
  CHECK(is_activation(LayerKind::kHardSwish));
  CHECK(is_activation(LayerKind::kHardSigmoid));
  CHECK_FALSE(is_activation(LayerKind::kMul));
  CHECK(plan->spec.layers[6].hardsigmoid_alpha == 1.0f / 6.0f);  // PyTorch's defaults
  CHECK(plan->spec.layers[6].hardsigmoid_beta == 0.5f);
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[1].kind == LayerKind::kSilu);
  CHECK(again->layers[2].kind == LayerKind::kHardSwish);
  CHECK(again->layers[4].hardsigmoid_alpha == 0.2f);
  CHECK(again->layers[4].hardsigmoid_beta == 0.4f);
  CHECK(again->layers[5].kind == LayerKind::kMul);
  CHECK(again->layers[5].inputs == std::vector<std::string>{"h", "s"});
  CHECK(error_of(with_layers(R"({"name": "m", "type": "mul", "inputs": ["input"]})")) ==
        "layers[0] (m): mul reads two inputs (got 1)");
  CHECK(error_of(with_layers(R"({"name": "g", "type": "global_avgpool"},
                                {"name": "m", "type": "mul", "inputs": ["g", "input"]})")) ==
        "layers[1] (m): input 'input' is 3x8x8 but 'g' is 3x1x1 (mul needs equal shapes, or a "
        "per-channel scale 3x1x1 as its second input)");
  CHECK(error_of(with_layers(R"({"name": "s", "type": "silu", "alpha": 1})")) ==
        "test.json: layers[0] (s): unknown field 'alpha' for a silu layer (allowed: inputs)");
}

TEST_CASE("gelu, prelu, upsample: fields, shapes, weights, written back", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "c", "type": "conv2d", "out_channels": 4, "kernel": 3, "pad": 1},
      {"name": "g", "type": "gelu"}, {"name": "p", "type": "prelu"},
      {"name": "u", "type": "upsample", "scale": [2, 3]},
      {"name": "b", "type": "upsample", "scale": 2, "mode": "bilinear"})"));
  REQUIRE(plan.ok());
  CHECK(is_activation(LayerKind::kGelu));
  CHECK_FALSE(is_activation(LayerKind::kPrelu));
  CHECK(has_weights(LayerKind::kPrelu));
  CHECK(plan->layers[2].parameters == 4);  // one slope per channel
  CHECK(plan->layers[2].connections == 0);
  CHECK(plan->layers[3].out == Shape{4, 16, 24});
  CHECK(plan->layers[4].out == Shape{4, 32, 48});
  CHECK_FALSE(plan->spec.layers[3].upsample_bilinear);  // nearest by default
  CHECK(plan->spec.layers[4].upsample_bilinear);
  const auto tensors = expected_tensors(*plan);
  REQUIRE(tensors.size() == 3);  // c.weight, c.bias, p.weight
  CHECK(tensors[2].name == "p.weight");
  CHECK(tensors[2].shape == std::vector<int64_t>{4});
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[1].kind == LayerKind::kGelu);
  CHECK(again->layers[2].kind == LayerKind::kPrelu);
  CHECK(again->layers[3].upsample_h == 2);
  CHECK(again->layers[3].upsample_w == 3);
  CHECK_FALSE(again->layers[3].upsample_bilinear);
  CHECK(again->layers[4].upsample_h == 2);
  CHECK(again->layers[4].upsample_bilinear);
  CHECK(error_of(with_layers(R"({"name": "u", "type": "upsample"})")) ==
        "test.json: layers[0] (u).scale: missing field");
  CHECK(error_of(with_layers(R"({"name": "u", "type": "upsample", "scale": 0})")) ==
        "layers[0] (u): scale must be positive (got 0)");
  CHECK(error_of(with_layers(R"({"name": "u", "type": "upsample", "scale": 1.5})")) ==
        "test.json: layers[0] (u).scale: expected an integer or [height, width]");
  CHECK(error_of(with_layers(R"({"name": "u", "type": "upsample", "scale": 2,
                                 "mode": "cubic"})")) ==
        "test.json: layers[0] (u).mode: 'cubic' is not an upsampling mode (nearest or bilinear)");
  CHECK(error_of(with_layers(R"({"name": "u", "type": "upsample", "scale": 1000000})")) ==
        "layers[0] (u): upsampled output 8000000x8000000 exceeds 1048576 per side");
  CHECK(error_of(with_layers(R"({"name": "p", "type": "prelu", "alpha": 0.2})")) ==
        "test.json: layers[0] (p): unknown field 'alpha' for a prelu layer (allowed: inputs)");
}

TEST_CASE("pad: reflect and edge, sizes, written back", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "r", "type": "pad", "pad": 2}, {"name": "e", "type": "pad", "pad": [1, 0, 3, 2],
       "mode": "edge"})"));
  REQUIRE(plan.ok());
  CHECK(plan->layers[0].out == Shape{3, 12, 12});
  CHECK(plan->layers[1].out == Shape{3, 16, 14});
  CHECK(plan->spec.layers[0].pad_reflect);
  CHECK_FALSE(plan->spec.layers[1].pad_reflect);
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[1].window.pad_bottom == 3);
  CHECK(again->layers[1].window.pad_right == 2);
  CHECK_FALSE(again->layers[1].pad_reflect);
  CHECK(error_of(with_layers(R"({"name": "r", "type": "pad", "pad": 8})")) ==
        "layers[0] (r): reflect pad 8 must be smaller than the input's 8x8");
  CHECK(error_of(with_layers(R"({"name": "r", "type": "pad", "pad": [1, -1]})")) ==
        "layers[0] (r): pads must be in [0, 1048576]");
  CHECK(error_of(with_layers(R"({"name": "r", "type": "pad", "pad": 1, "mode": "wrap"})")) ==
        "test.json: layers[0] (r).mode: 'wrap' is not a padding mode (reflect or edge)");
  CHECK(error_of(with_layers(R"({"name": "r", "type": "pad"})")) ==
        "test.json: layers[0] (r).pad: missing field");
}

TEST_CASE("conv_transpose2d: output size, counts, weights, written back", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "t", "type": "conv_transpose2d", "out_channels": 6, "kernel": 3, "stride": 2,
       "pad": 1, "output_padding": 1},
      {"name": "g", "type": "conv_transpose2d", "out_channels": 4, "kernel": [4, 2],
       "stride": 2, "pad": [1, 0], "groups": 2})"));
  REQUIRE(plan.ok());
  CHECK(plan->layers[0].out == Shape{6, 16, 16});  // (8 - 1) * 2 - 2 + 3 + 1
  CHECK(plan->layers[0].parameters == 3 * 6 * 9 + 6);
  CHECK(plan->layers[0].connections == int64_t{3} * 8 * 8 * 6 * 9);  // every input times its kernel
  CHECK(plan->layers[1].out == Shape{4, 32, 32});  // (16 - 1) * 2 - 2 + 4, (16 - 1) * 2 + 2
  CHECK(plan->layers[1].parameters == 6 * 2 * 4 * 2 + 4);
  const auto tensors = expected_tensors(*plan);
  REQUIRE(tensors.size() == 4);
  CHECK(tensors[0].shape == std::vector<int64_t>{3, 6, 3, 3});  // PyTorch's [I, O/groups, kh, kw]
  CHECK(tensors[2].shape == std::vector<int64_t>{6, 2, 4, 2});
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[0].kind == LayerKind::kConvTranspose2d);
  CHECK(again->layers[0].output_padding_h == 1);
  CHECK(again->layers[0].output_padding_w == 1);
  CHECK(again->layers[1].groups == 2);
  CHECK(again->layers[1].output_padding_h == 0);
  CHECK(error_of(with_layers(R"({"name": "t", "type": "conv_transpose2d", "out_channels": 2,
                                 "kernel": 3, "stride": 2, "output_padding": 1})")) ==
        "layers[0] (t): needs pads >= 0 and 0 <= output_padding <= the bottom / right pad (got "
        "output_padding 1x1, pad bottom 0, right 0)");
  CHECK(error_of(with_layers(R"({"name": "t", "type": "conv_transpose2d", "out_channels": 2,
                                 "kernel": 2, "pad": 5})")) ==
        "layers[0] (t): output -1x-1 is empty or exceeds 1048576 per side");
  CHECK(error_of(with_layers(R"({"name": "t", "type": "conv_transpose2d", "out_channels": 4,
                                 "kernel": 2, "groups": 2})")) ==
        "layers[0] (t): groups 2 must divide the input channels 3 and out_channels 4");
}

TEST_CASE("leaky_relu, tanh, elu, log softmax: fields, defaults, written back", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "c", "type": "conv2d", "out_channels": 4, "kernel": 3, "pad": 1},
      {"name": "l", "type": "leaky_relu"}, {"name": "t", "type": "tanh"},
      {"name": "e", "type": "elu", "alpha": 0.5}, {"name": "l2", "type": "leaky_relu", "alpha": 0.2},
      {"name": "e2", "type": "elu"})"));
  REQUIRE(plan.ok());
  CHECK(plan->layers[5].out == Shape{4, 8, 8});
  for (LayerKind k : {LayerKind::kLeakyRelu, LayerKind::kTanh, LayerKind::kElu}) {
    CHECK(is_activation(k));
  }
  CHECK(plan->spec.layers[1].leaky_relu_alpha == 0.01f);  // ONNX's and PyTorch's defaults
  CHECK(plan->spec.layers[5].elu_alpha == 1.0f);
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[2].kind == LayerKind::kTanh);
  CHECK(again->layers[3].kind == LayerKind::kElu);
  CHECK(again->layers[3].elu_alpha == 0.5f);
  CHECK(again->layers[4].leaky_relu_alpha == 0.2f);
  auto log = plan_from(with_layers(R"({"name": "f", "type": "flatten"},
      {"name": "s", "type": "softmax", "log": true})"));
  REQUIRE(log.ok());
  CHECK(log->spec.layers[1].softmax_log);
  CHECK(model_spec_to_json(log->spec)["layers"][1]["log"] == true);
  CHECK_FALSE(model_spec_to_json(plan->spec)["layers"][1].contains("log"));
  CHECK(error_of(with_layers(R"({"name": "t", "type": "tanh", "alpha": 1})")) ==
        "test.json: layers[0] (t): unknown field 'alpha' for a tanh layer (allowed: inputs)");
  CHECK(error_of(with_layers(R"({"name": "l", "type": "leaky_relu", "alpha": "x"})")) ==
        "test.json: layers[0] (l).alpha: expected a number");
}

TEST_CASE("slice and channel_shuffle: fields, shapes, written back", "[model]") {
  auto plan = plan_from(with_layers(R"(
      {"name": "c", "type": "conv2d", "out_channels": 6, "kernel": 3, "pad": 1},
      {"name": "s", "type": "channel_shuffle", "groups": 3},
      {"name": "a", "type": "slice", "begin": 1, "end": 5},
      {"name": "b", "type": "slice", "begin": 0, "end": 1, "inputs": ["s"]},
      {"name": "j", "type": "concat", "inputs": ["a", "b"]})"));
  REQUIRE(plan.ok());
  CHECK(plan->layers[1].out == Shape{6, 8, 8});
  CHECK(plan->layers[2].out == Shape{4, 8, 8});
  CHECK(plan->layers[3].out == Shape{1, 8, 8});
  CHECK(plan->layers[4].out == Shape{5, 8, 8});
  CHECK(plan->layers[2].parameters == 0);
  auto again =
      model_spec_from_json(nlohmann::json::parse(model_spec_to_json(plan->spec).dump()), "x");
  REQUIRE(again.ok());
  CHECK(again->layers[1].kind == LayerKind::kChannelShuffle);
  CHECK(again->layers[1].groups == 3);
  CHECK(again->layers[2].kind == LayerKind::kSlice);
  CHECK(again->layers[2].slice_begin == 1);
  CHECK(again->layers[2].slice_end == 5);
  CHECK(error_of(with_layers(R"({"name": "s", "type": "slice", "begin": 0})")).find("end") !=
        std::string::npos);
  CHECK(error_of(with_layers(R"({"name": "s", "type": "channel_shuffle"})")).find("groups") !=
        std::string::npos);
  CHECK(error_of(with_layers(R"({"name": "s", "type": "channel_shuffle", "groups": 2})")) ==
        "layers[0] (s): channel_shuffle groups 2 must be at least 1 and divide the input's 3 "
        "channels");
}

TEST_CASE("bad graphs: one line naming the layer", "[model]") {
  CHECK(error_of(with_layers(R"({"name": "a", "type": "relu", "inputs": ["nope"]})")) ==
        "layers[0] (a): input 'nope' is neither \"input\" nor the name of a layer");
  CHECK(error_of(with_layers(R"({"name": "a", "type": "relu", "inputs": ["b"]},
                                {"name": "b", "type": "relu", "inputs": ["a"]})"))
            .find("layers[0] (a): input 'b' is a later layer (list layers so that each input is "
                  "defined before it is read; a graph with a cycle has no such order)") == 0);
  CHECK(error_of(with_layers(R"({"name": "a", "type": "relu"}, {"name": "b", "type": "relu",
                                "inputs": ["input"]})")) ==
        "layers[0] (a): its output is read by no layer (only the last layer's output leaves the "
        "model)");
  CHECK(error_of(with_layers(R"({"name": "a", "type": "add"})")) ==
        "layers[0] (a): add needs at least two inputs (got 1)");
  CHECK(error_of(with_layers(R"({"name": "a", "type": "relu", "inputs": ["input", "input"]})")) ==
        "layers[0] (a): relu reads one input (got 2)");
  CHECK(error_of(with_layers(R"({"name": "p", "type": "maxpool", "kernel": 2},
                                {"name": "a", "type": "add", "inputs": ["p", "input"]})")) ==
        "layers[1] (a): input 'input' is 3x8x8 but 'p' is 3x4x4 (add needs equal shapes)");
  CHECK(error_of(with_layers(R"({"name": "p", "type": "maxpool", "kernel": 2},
                                {"name": "a", "type": "concat", "inputs": ["p", "input"]})")) ==
        "layers[1] (a): input 'input' is 3x8x8 but 'p' is 3x4x4 (concat joins channels of equal "
        "height and width)");
  CHECK(error_of(with_layers(R"({"name": "c", "type": "conv2d", "out_channels": 4, "kernel": 1,
                                "groups": 2})")) ==
        "layers[0] (c): groups 2 must divide the input channels 3 and out_channels 4");
  CHECK(error_of(with_layers(R"({"name": "c", "type": "conv2d", "out_channels": 4,
                                "kernel": [1, 2, 3]})")) ==
        "test.json: layers[0] (c).kernel: expected an integer or [height, width]");
  CHECK(error_of(with_layers(R"({"name": "c", "type": "avgpool", "kernel": 3, "stride": 2,
                                "ceil_mode": true})")) ==
        "layers[0] (c): avgpool with ceil_mode adding a partial window (4x4 instead of 3x3) is "
        "not supported with count_include_pad true");
  CHECK(error_of(with_layers(R"({"name": "k", "type": "clip", "min": 2, "max": 1})")) ==
        "layers[0] (k): clip needs finite min <= max");
  CHECK(error_of(with_layers(R"({"name": "p", "type": "maxpool", "kernel": 3, "stride": 2,
                                "ceil_mode": "yes"})")) ==
        "test.json: layers[0] (p).ceil_mode: expected true or false");
  CHECK(error_of(with_layers(R"({"name": "p", "type": "relu", "inputs": []})")) ==
        "test.json: layers[0] (p).inputs: expected a non-empty array of tensor names");
}
