// Spec parsing (parse -> normalize): typed fields, defaults, unknown keys rejected so a typo such
// as "kernal" is an error instead of a silent default. Shape checks live in shape_inference.cc;
// the per-kind fields (read and written) in layer_fields.cc.
#include "model/model_spec.h"

#include <set>

#include "model/layer_fields.h"
#include "serf/io/json_fields.h"

namespace serf::model {

using nlohmann::json;

namespace {

struct KindName {
  LayerKind kind;
  const char* name;
};

constexpr KindName kKindNames[] = {
    {LayerKind::kConv2d, "conv2d"},
    {LayerKind::kConvTranspose2d, "conv_transpose2d"},
    {LayerKind::kMaxPool, "maxpool"},
    {LayerKind::kAvgPool, "avgpool"},
    {LayerKind::kGlobalAvgPool, "global_avgpool"},
    {LayerKind::kRelu, "relu"},
    {LayerKind::kClip, "clip"},
    {LayerKind::kSigmoid, "sigmoid"},
    {LayerKind::kHardSigmoid, "hardsigmoid"},
    {LayerKind::kHardSwish, "hardswish"},
    {LayerKind::kSilu, "silu"},
    {LayerKind::kLeakyRelu, "leaky_relu"},
    {LayerKind::kTanh, "tanh"},
    {LayerKind::kElu, "elu"},
    {LayerKind::kGelu, "gelu"},
    {LayerKind::kPrelu, "prelu"},
    {LayerKind::kBatchNorm, "batchnorm"},
    {LayerKind::kLayerNorm, "layer_norm"},
    {LayerKind::kLrn, "lrn"},
    {LayerKind::kFlatten, "flatten"},
    {LayerKind::kFullyConnected, "fully_connected"},
    {LayerKind::kAdd, "add"},
    {LayerKind::kMul, "mul"},
    {LayerKind::kConcat, "concat"},
    {LayerKind::kSlice, "slice"},
    {LayerKind::kChannelShuffle, "channel_shuffle"},
    {LayerKind::kUpsample, "upsample"},
    {LayerKind::kPad, "pad"},
    {LayerKind::kSoftmax, "softmax"},
};

std::string known_types() {
  std::string s;
  for (const KindName& k : kKindNames) s += std::string(s.empty() ? "" : ", ") + k.name;
  return s;
}

bool valid_layer_name(const std::string& name) {
  if (name.empty() || name == kModelInputName) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status check_fields(const json& obj, LayerKind kind, const std::string& type,
                    const std::string& named) {
  const std::set<std::string> allowed = allowed_layer_fields(kind);
  for (const auto& item : obj.items()) {
    if (item.key() == "name" || item.key() == "type" || item.key() == "inputs") continue;
    if (allowed.count(item.key()) == 0) {
      std::string list;
      for (const std::string& a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      return InvalidArgument(named + ": unknown field '" + item.key() + "' for a " + type +
                             " layer (allowed: " + (list.empty() ? "inputs" : list + ", inputs") +
                             ")");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<std::string>> parse_inputs(const json& obj, const std::string& named) {
  std::vector<std::string> inputs;
  if (!obj.contains("inputs")) return inputs;
  const json& v = obj["inputs"];
  const std::string where = io::field_path(named, "inputs");
  if (!v.is_array() || v.empty()) {
    return InvalidArgument(where + ": expected a non-empty array of tensor names");
  }
  for (const json& name : v) {
    if (!name.is_string()) return InvalidArgument(where + ": expected tensor names (strings)");
    inputs.push_back(name.get<std::string>());
  }
  return inputs;
}

StatusOr<LayerSpec> parse_layer(const json& obj, size_t index) {
  const std::string where = io::index_path("layers", index);
  if (!obj.is_object()) return InvalidArgument(where + ": expected a JSON object");
  SERF_ASSIGN_OR_RETURN(std::string type, io::get_string(obj, "type", where));
  LayerSpec layer;
  StatusOr<LayerKind> kind = layer_kind_from_string(type);
  if (!kind.ok()) return kind.status().with_context(io::field_path(where, "type"));
  layer.kind = *kind;
  if (obj.contains("name")) {
    SERF_ASSIGN_OR_RETURN(layer.name, io::get_string(obj, "name", where));
    if (!valid_layer_name(layer.name)) {
      return InvalidArgument(io::field_path(where, "name") + ": '" + layer.name +
                             "' is not a valid layer name (use letters, digits, '_' or '-'; "
                             "not 'input')");
    }
  } else {
    layer.name = type + std::to_string(index);
  }
  const std::string named = where + " (" + layer.name + ")";
  SERF_RETURN_IF_ERROR(check_fields(obj, layer.kind, type, named));
  SERF_ASSIGN_OR_RETURN(layer.inputs, parse_inputs(obj, named));
  SERF_RETURN_IF_ERROR(parse_layer_fields(obj, named, &layer));
  return layer;
}

// Chain defaults: a layer without "inputs" reads the layer before it (or the model input).
void fill_default_inputs(ModelSpec* spec) {
  for (size_t i = 0; i < spec->layers.size(); ++i) {
    LayerSpec& l = spec->layers[i];
    if (l.inputs.empty()) l.inputs = {i == 0 ? kModelInputName : spec->layers[i - 1].name};
  }
}

}  // namespace

const char* to_string(LayerKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

StatusOr<LayerKind> layer_kind_from_string(const std::string& type) {
  for (const KindName& k : kKindNames) {
    if (type == k.name) return k.kind;
  }
  return InvalidArgument("unknown layer type '" + type + "' (known: " + known_types() + ")");
}

bool has_weights(LayerKind kind) {
  return kind == LayerKind::kConv2d || kind == LayerKind::kConvTranspose2d ||
         kind == LayerKind::kFullyConnected || kind == LayerKind::kBatchNorm ||
         kind == LayerKind::kLayerNorm || kind == LayerKind::kPrelu;
}

bool is_activation(LayerKind kind) {
  return kind == LayerKind::kRelu || kind == LayerKind::kClip || kind == LayerKind::kSigmoid ||
         kind == LayerKind::kHardSigmoid || kind == LayerKind::kHardSwish ||
         kind == LayerKind::kSilu || kind == LayerKind::kLeakyRelu || kind == LayerKind::kTanh ||
         kind == LayerKind::kElu || kind == LayerKind::kGelu;
}

StatusOr<ModelSpec> model_spec_from_json(const json& doc, const std::string& source) {
  auto parse = [&]() -> StatusOr<ModelSpec> {
    if (!doc.is_object()) return InvalidArgument("expected a JSON object with name, input, layers");
    for (const auto& item : doc.items()) {
      if (item.key() != "name" && item.key() != "input" && item.key() != "layers" &&
          item.key() != "description") {
        return InvalidArgument("unknown field '" + item.key() +
                               "' (allowed: name, description, input, layers)");
      }
    }
    ModelSpec spec;
    SERF_ASSIGN_OR_RETURN(spec.name, io::get_string(doc, "name", ""));
    if (spec.name.empty()) return InvalidArgument("name: must not be empty");
    if (doc.contains("description")) {
      SERF_ASSIGN_OR_RETURN(spec.description, io::get_string(doc, "description", ""));
    }
    SERF_ASSIGN_OR_RETURN(const json* input, io::get_object(doc, "input", ""));
    SERF_ASSIGN_OR_RETURN(spec.input.channels, io::get_int(*input, "channels", "input"));
    SERF_ASSIGN_OR_RETURN(spec.input.height, io::get_int(*input, "height", "input"));
    SERF_ASSIGN_OR_RETURN(spec.input.width, io::get_int(*input, "width", "input"));
    for (const auto& item : input->items()) {
      if (item.key() != "channels" && item.key() != "height" && item.key() != "width") {
        return InvalidArgument("input: unknown field '" + item.key() +
                               "' (allowed: channels, height, width)");
      }
    }
    SERF_ASSIGN_OR_RETURN(const json* layers, io::get_array(doc, "layers", ""));
    if (layers->empty()) return InvalidArgument("layers: must hold at least one layer");
    std::set<std::string> names;
    for (size_t i = 0; i < layers->size(); ++i) {
      SERF_ASSIGN_OR_RETURN(LayerSpec layer, parse_layer((*layers)[i], i));
      if (!names.insert(layer.name).second) {
        return InvalidArgument(io::index_path("layers", i) + " (" + layer.name +
                               "): duplicate layer name (each layer needs its own name)");
      }
      spec.layers.push_back(std::move(layer));
    }
    fill_default_inputs(&spec);
    return spec;
  };
  StatusOr<ModelSpec> spec = parse();
  if (!spec.ok()) return spec.status().with_context(source);
  return spec;
}

nlohmann::ordered_json model_spec_to_json(const ModelSpec& spec) {
  nlohmann::ordered_json doc;
  doc["name"] = spec.name;
  if (!spec.description.empty()) doc["description"] = spec.description;
  doc["input"] = {{"channels", spec.input.channels},
                  {"height", spec.input.height},
                  {"width", spec.input.width}};
  doc["layers"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    nlohmann::ordered_json layer;
    layer["name"] = l.name;
    layer["type"] = to_string(l.kind);
    const std::string chain = i == 0 ? kModelInputName : spec.layers[i - 1].name;
    if (!(l.inputs.size() == 1 && l.inputs[0] == chain)) layer["inputs"] = l.inputs;
    write_layer_fields(l, &layer);
    doc["layers"].push_back(std::move(layer));
  }
  return doc;
}

StatusOr<ModelSpec> load_model_spec(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(json doc, io::read_json_file(path));
  return model_spec_from_json(doc, path);
}

StatusOr<ModelPlan> load_model(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(ModelSpec spec, load_model_spec(path));
  StatusOr<ModelPlan> plan = infer_shapes(spec);
  if (!plan.ok()) return plan.status().with_context(path);
  return plan;
}

}  // namespace serf::model
