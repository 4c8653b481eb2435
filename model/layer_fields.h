#pragma once
// The per-kind fields of a layer in the spec JSON, read and written in one place so the two agree
// (model_spec.cc uses them; ONNX import writes specs through model_spec_to_json).

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "model/model_spec.h"

namespace serf::model {

// The fields a layer kind accepts besides "name", "type" and "inputs".
std::set<std::string> allowed_layer_fields(LayerKind kind);
// Reads the kind's fields of `obj` into `layer` (layer->kind is set); errors name `named`.
Status parse_layer_fields(const nlohmann::json& obj, const std::string& named, LayerSpec* layer);
// Writes the kind's fields that differ from their defaults.
void write_layer_fields(const LayerSpec& layer, nlohmann::ordered_json* out);

}  // namespace serf::model
