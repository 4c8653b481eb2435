// Spec parsing (parse -> normalize): typed fields, defaults, unknown keys rejected so a typo such
// as "kernal" is an error instead of a silent default. Shape checks live in shape_inference.cc.
#include "model/model_spec.h"

#include <set>

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
    {LayerKind::kMaxPool, "maxpool"},
    {LayerKind::kAvgPool, "avgpool"},
    {LayerKind::kRelu, "relu"},
    {LayerKind::kLrn, "lrn"},
    {LayerKind::kFlatten, "flatten"},
    {LayerKind::kFullyConnected, "fully_connected"},
    {LayerKind::kSoftmax, "softmax"},
};

std::string known_types() {
  std::string s;
  for (const KindName& k : kKindNames) s += std::string(s.empty() ? "" : ", ") + k.name;
  return s;
}

// The fields each layer type accepts besides "name" and "type".
std::set<std::string> allowed_fields(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv2d:
      return {"out_channels", "kernel", "stride", "pad"};
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      return {"kernel", "stride", "pad"};
    case LayerKind::kLrn:
      return {"size", "alpha", "beta", "k"};
    case LayerKind::kFullyConnected:
      return {"out"};
    case LayerKind::kRelu:
    case LayerKind::kFlatten:
    case LayerKind::kSoftmax:
      return {};
  }
  return {};
}

// An optional integer field: absent keeps `*out`.
Status optional_int(const json& obj, const std::string& key, const std::string& where, int* out) {
  if (!obj.contains(key)) return Status::Ok();
  SERF_ASSIGN_OR_RETURN(*out, io::get_int(obj, key, where));
  return Status::Ok();
}

Status optional_float(const json& obj, const std::string& key, const std::string& where,
                      float* out) {
  if (!obj.contains(key)) return Status::Ok();
  SERF_ASSIGN_OR_RETURN(double x, io::get_number(obj, key, where));
  *out = static_cast<float>(x);
  return Status::Ok();
}

bool valid_layer_name(const std::string& name) {
  if (name.empty() || name == "input") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
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
  const std::set<std::string> allowed = allowed_fields(layer.kind);
  for (const auto& item : obj.items()) {
    if (item.key() == "name" || item.key() == "type") continue;
    if (allowed.count(item.key()) == 0) {
      std::string list;
      for (const std::string& a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      return InvalidArgument(named + ": unknown field '" + item.key() + "' for a " + type +
                             " layer (allowed: " + (list.empty() ? "none" : list) + ")");
    }
  }
  switch (layer.kind) {
    case LayerKind::kConv2d: {
      SERF_ASSIGN_OR_RETURN(layer.out_channels, io::get_int(obj, "out_channels", named));
      SERF_ASSIGN_OR_RETURN(layer.kernel, io::get_int(obj, "kernel", named));
      SERF_RETURN_IF_ERROR(optional_int(obj, "stride", named, &layer.stride));
      SERF_RETURN_IF_ERROR(optional_int(obj, "pad", named, &layer.pad));
      break;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool: {
      SERF_ASSIGN_OR_RETURN(layer.kernel, io::get_int(obj, "kernel", named));
      layer.stride = layer.kernel;  // PyTorch's default for pooling
      SERF_RETURN_IF_ERROR(optional_int(obj, "stride", named, &layer.stride));
      SERF_RETURN_IF_ERROR(optional_int(obj, "pad", named, &layer.pad));
      break;
    }
    case LayerKind::kLrn:
      SERF_RETURN_IF_ERROR(optional_int(obj, "size", named, &layer.lrn_size));
      SERF_RETURN_IF_ERROR(optional_float(obj, "alpha", named, &layer.lrn_alpha));
      SERF_RETURN_IF_ERROR(optional_float(obj, "beta", named, &layer.lrn_beta));
      SERF_RETURN_IF_ERROR(optional_float(obj, "k", named, &layer.lrn_k));
      break;
    case LayerKind::kFullyConnected: {
      SERF_ASSIGN_OR_RETURN(layer.out_channels, io::get_int(obj, "out", named));
      break;
    }
    case LayerKind::kRelu:
    case LayerKind::kFlatten:
    case LayerKind::kSoftmax:
      break;
  }
  return layer;
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
    return spec;
  };
  StatusOr<ModelSpec> spec = parse();
  if (!spec.ok()) return spec.status().with_context(source);
  return spec;
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
