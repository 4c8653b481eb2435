// Per-kind layer fields: sliding windows (scalar or per-dimension forms), pooling flags, clip
// bounds, batchnorm epsilon, lrn parameters.
#include "model/layer_fields.h"

#include <vector>

#include "serf/io/json_fields.h"

namespace serf::model {

using nlohmann::json;

namespace {

// An integer field given as a scalar or an array of `allowed` lengths.
StatusOr<std::vector<int>> int_list(const json& obj, const std::string& key,
                                    const std::string& named, const std::vector<size_t>& allowed,
                                    const std::string& forms) {
  const json& v = obj[key];
  const std::string where = io::field_path(named, key);
  std::vector<int> out;
  auto one = [&](const json& x) -> Status {
    if (x.is_number_integer()) {
      const auto n = x.get<long long>();
      if (n >= -(1LL << 31) && n < (1LL << 31)) {
        out.push_back(static_cast<int>(n));
        return Status::Ok();
      }
    }
    return InvalidArgument(where + ": expected an integer or " + forms);
  };
  if (!v.is_array()) {
    SERF_RETURN_IF_ERROR(one(v));
    return out;
  }
  bool size_ok = false;
  for (size_t n : allowed) size_ok = size_ok || v.size() == n;
  if (!size_ok) return InvalidArgument(where + ": expected an integer or " + forms);
  for (const json& x : v) SERF_RETURN_IF_ERROR(one(x));
  return out;
}

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

Status optional_bool(const json& obj, const std::string& key, const std::string& where, bool* out) {
  if (!obj.contains(key)) return Status::Ok();
  if (!obj[key].is_boolean()) {
    return InvalidArgument(io::field_path(where, key) + ": expected true or false");
  }
  *out = obj[key].get<bool>();
  return Status::Ok();
}

// kernel (required), stride (default: 1 for conv2d, the kernel for pooling), pad, dilation.
Status parse_window(const json& obj, const std::string& named, bool conv, Window* w) {
  if (!obj.contains("kernel"))
    return InvalidArgument(io::field_path(named, "kernel") + ": missing field");
  SERF_ASSIGN_OR_RETURN(auto k, int_list(obj, "kernel", named, {2}, "[height, width]"));
  w->kernel_h = k[0];
  w->kernel_w = k.size() == 2 ? k[1] : k[0];
  w->stride_h = conv ? 1 : w->kernel_h;
  w->stride_w = conv ? 1 : w->kernel_w;
  if (obj.contains("stride")) {
    SERF_ASSIGN_OR_RETURN(auto s, int_list(obj, "stride", named, {2}, "[height, width]"));
    w->stride_h = s[0];
    w->stride_w = s.size() == 2 ? s[1] : s[0];
  }
  if (obj.contains("pad")) {
    SERF_ASSIGN_OR_RETURN(auto p, int_list(obj, "pad", named, {2, 4},
                                           "[height, width] or [top, left, bottom, right]"));
    if (p.size() == 1) p = {p[0], p[0], p[0], p[0]};
    if (p.size() == 2) p = {p[0], p[1], p[0], p[1]};
    w->pad_top = p[0];
    w->pad_left = p[1];
    w->pad_bottom = p[2];
    w->pad_right = p[3];
  }
  if (conv && obj.contains("dilation")) {
    SERF_ASSIGN_OR_RETURN(auto d, int_list(obj, "dilation", named, {2}, "[height, width]"));
    w->dilation_h = d[0];
    w->dilation_w = d.size() == 2 ? d[1] : d[0];
  }
  return Status::Ok();
}

// A pair written as one number when both are equal.
json pair_json(int a, int b) { return a == b ? json(a) : json::array({a, b}); }

void write_window(const LayerSpec& l, bool conv, nlohmann::ordered_json* out) {
  const Window& w = l.window;
  (*out)["kernel"] = pair_json(w.kernel_h, w.kernel_w);
  const bool default_stride = conv ? (w.stride_h == 1 && w.stride_w == 1)
                                   : (w.stride_h == w.kernel_h && w.stride_w == w.kernel_w);
  if (!default_stride) (*out)["stride"] = pair_json(w.stride_h, w.stride_w);
  if (w.pad_top == w.pad_bottom && w.pad_left == w.pad_right) {
    if (w.pad_top != 0 || w.pad_left != 0) (*out)["pad"] = pair_json(w.pad_top, w.pad_left);
  } else {
    (*out)["pad"] = json::array({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
  }
  if (conv && (w.dilation_h != 1 || w.dilation_w != 1)) {
    (*out)["dilation"] = pair_json(w.dilation_h, w.dilation_w);
  }
}

// upsample: "scale" (required) s or [sh, sw]; "mode" "nearest" (default) or "bilinear".
Status parse_upsample(const json& obj, const std::string& named, LayerSpec* layer) {
  if (!obj.contains("scale"))
    return InvalidArgument(io::field_path(named, "scale") + ": missing field");
  SERF_ASSIGN_OR_RETURN(auto s, int_list(obj, "scale", named, {2}, "[height, width]"));
  layer->upsample_h = s[0];
  layer->upsample_w = s.size() == 2 ? s[1] : s[0];
  if (!obj.contains("mode")) return Status::Ok();
  SERF_ASSIGN_OR_RETURN(std::string mode, io::get_string(obj, "mode", named));
  if (mode != "nearest" && mode != "bilinear") {
    return InvalidArgument(io::field_path(named, "mode") + ": '" + mode +
                           "' is not an upsampling mode (nearest or bilinear)");
  }
  layer->upsample_bilinear = mode == "bilinear";
  return Status::Ok();
}

// pad: "pad" (required) as for a window; "mode" "reflect" (default) or "edge".
Status parse_pad(const json& obj, const std::string& named, LayerSpec* layer) {
  if (!obj.contains("pad"))
    return InvalidArgument(io::field_path(named, "pad") + ": missing field");
  SERF_ASSIGN_OR_RETURN(
      auto p, int_list(obj, "pad", named, {2, 4}, "[height, width] or [top, left, bottom, right]"));
  if (p.size() == 1) p = {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) p = {p[0], p[1], p[0], p[1]};
  Window& w = layer->window;
  w.pad_top = p[0];
  w.pad_left = p[1];
  w.pad_bottom = p[2];
  w.pad_right = p[3];
  if (!obj.contains("mode")) return Status::Ok();
  SERF_ASSIGN_OR_RETURN(std::string mode, io::get_string(obj, "mode", named));
  if (mode != "reflect" && mode != "edge") {
    return InvalidArgument(io::field_path(named, "mode") + ": '" + mode +
                           "' is not a padding mode (reflect or edge)");
  }
  layer->pad_reflect = mode == "reflect";
  return Status::Ok();
}

}  // namespace

std::set<std::string> allowed_layer_fields(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv2d:
      return {"out_channels", "kernel", "stride", "pad", "dilation", "groups"};
    case LayerKind::kConvTranspose2d:
      return {"out_channels", "kernel", "stride", "pad", "dilation", "output_padding", "groups"};
    case LayerKind::kMaxPool:
      return {"kernel", "stride", "pad", "ceil_mode"};
    case LayerKind::kAvgPool:
      return {"kernel", "stride", "pad", "ceil_mode", "count_include_pad"};
    case LayerKind::kClip:
      return {"min", "max"};
    case LayerKind::kHardSigmoid:
      return {"alpha", "beta"};
    case LayerKind::kLeakyRelu:
    case LayerKind::kElu:
      return {"alpha"};
    case LayerKind::kBatchNorm:
    case LayerKind::kLayerNorm:
      return {"epsilon"};
    case LayerKind::kLrn:
      return {"size", "alpha", "beta", "k"};
    case LayerKind::kFullyConnected:
      return {"out"};
    case LayerKind::kSlice:
      return {"begin", "end"};
    case LayerKind::kChannelShuffle:
      return {"groups"};
    case LayerKind::kUpsample:
      return {"scale", "mode"};
    case LayerKind::kPad:
      return {"pad", "mode"};
    case LayerKind::kGelu:
    case LayerKind::kPrelu:
    case LayerKind::kGlobalAvgPool:
    case LayerKind::kRelu:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSilu:
    case LayerKind::kTanh:
    case LayerKind::kFlatten:
    case LayerKind::kAdd:
    case LayerKind::kMul:
    case LayerKind::kConcat:
      return {};
    case LayerKind::kSoftmax:
      return {"log"};
  }
  return {};
}

Status parse_layer_fields(const json& obj, const std::string& named, LayerSpec* layer) {
  switch (layer->kind) {
    case LayerKind::kConv2d: {
      SERF_ASSIGN_OR_RETURN(layer->out_channels, io::get_int(obj, "out_channels", named));
      SERF_RETURN_IF_ERROR(parse_window(obj, named, /*conv=*/true, &layer->window));
      return optional_int(obj, "groups", named, &layer->groups);
    }
    case LayerKind::kConvTranspose2d: {
      SERF_ASSIGN_OR_RETURN(layer->out_channels, io::get_int(obj, "out_channels", named));
      SERF_RETURN_IF_ERROR(parse_window(obj, named, /*conv=*/true, &layer->window));
      SERF_RETURN_IF_ERROR(optional_int(obj, "groups", named, &layer->groups));
      if (!obj.contains("output_padding")) return Status::Ok();
      SERF_ASSIGN_OR_RETURN(auto p, int_list(obj, "output_padding", named, {2}, "[height, width]"));
      layer->output_padding_h = p[0];
      layer->output_padding_w = p.size() == 2 ? p[1] : p[0];
      return Status::Ok();
    }
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      SERF_RETURN_IF_ERROR(parse_window(obj, named, /*conv=*/false, &layer->window));
      SERF_RETURN_IF_ERROR(optional_bool(obj, "ceil_mode", named, &layer->ceil_mode));
      return optional_bool(obj, "count_include_pad", named, &layer->count_include_pad);
    case LayerKind::kClip:
      SERF_RETURN_IF_ERROR(optional_float(obj, "min", named, &layer->clip_min));
      return optional_float(obj, "max", named, &layer->clip_max);
    case LayerKind::kHardSigmoid:
      SERF_RETURN_IF_ERROR(optional_float(obj, "alpha", named, &layer->hardsigmoid_alpha));
      return optional_float(obj, "beta", named, &layer->hardsigmoid_beta);
    case LayerKind::kLeakyRelu:
      return optional_float(obj, "alpha", named, &layer->leaky_relu_alpha);
    case LayerKind::kElu:
      return optional_float(obj, "alpha", named, &layer->elu_alpha);
    case LayerKind::kBatchNorm:
    case LayerKind::kLayerNorm:
      return optional_float(obj, "epsilon", named, &layer->epsilon);
    case LayerKind::kLrn:
      SERF_RETURN_IF_ERROR(optional_int(obj, "size", named, &layer->lrn_size));
      SERF_RETURN_IF_ERROR(optional_float(obj, "alpha", named, &layer->lrn_alpha));
      SERF_RETURN_IF_ERROR(optional_float(obj, "beta", named, &layer->lrn_beta));
      return optional_float(obj, "k", named, &layer->lrn_k);
    case LayerKind::kFullyConnected: {
      SERF_ASSIGN_OR_RETURN(layer->out_channels, io::get_int(obj, "out", named));
      return Status::Ok();
    }
    case LayerKind::kSlice: {
      SERF_ASSIGN_OR_RETURN(layer->slice_begin, io::get_int(obj, "begin", named));
      SERF_ASSIGN_OR_RETURN(layer->slice_end, io::get_int(obj, "end", named));
      return Status::Ok();
    }
    case LayerKind::kChannelShuffle: {
      SERF_ASSIGN_OR_RETURN(layer->groups, io::get_int(obj, "groups", named));
      return Status::Ok();
    }
    case LayerKind::kUpsample:
      return parse_upsample(obj, named, layer);
    case LayerKind::kPad:
      return parse_pad(obj, named, layer);
    case LayerKind::kGelu:
    case LayerKind::kPrelu:
    case LayerKind::kGlobalAvgPool:
    case LayerKind::kRelu:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSilu:
    case LayerKind::kTanh:
    case LayerKind::kFlatten:
    case LayerKind::kAdd:
    case LayerKind::kMul:
    case LayerKind::kConcat:
      return Status::Ok();
    case LayerKind::kSoftmax:
      return optional_bool(obj, "log", named, &layer->softmax_log);
  }
  return Status::Ok();
}

namespace {

// The fields of the layers over a window: convolutions and the max and average pools.
void write_windowed_fields(const LayerSpec& l, nlohmann::ordered_json* out) {
  const bool conv = l.kind == LayerKind::kConv2d || l.kind == LayerKind::kConvTranspose2d;
  if (conv) (*out)["out_channels"] = l.out_channels;
  write_window(l, conv, out);
  if (conv) {
    if (l.output_padding_h != 0 || l.output_padding_w != 0) {
      (*out)["output_padding"] = pair_json(l.output_padding_h, l.output_padding_w);
    }
    if (l.groups != 1) (*out)["groups"] = l.groups;
    return;
  }
  if (l.ceil_mode) (*out)["ceil_mode"] = true;
  if (l.kind == LayerKind::kAvgPool && !l.count_include_pad) (*out)["count_include_pad"] = false;
}

}  // namespace

void write_layer_fields(const LayerSpec& l, nlohmann::ordered_json* out) {
  switch (l.kind) {
    case LayerKind::kConv2d:
    case LayerKind::kConvTranspose2d:
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      write_windowed_fields(l, out);
      break;
    case LayerKind::kClip:
      (*out)["min"] = l.clip_min;
      (*out)["max"] = l.clip_max;
      break;
    case LayerKind::kHardSigmoid:
      (*out)["alpha"] = l.hardsigmoid_alpha;
      (*out)["beta"] = l.hardsigmoid_beta;
      break;
    case LayerKind::kLeakyRelu:
      (*out)["alpha"] = l.leaky_relu_alpha;
      break;
    case LayerKind::kElu:
      (*out)["alpha"] = l.elu_alpha;
      break;
    case LayerKind::kBatchNorm:
    case LayerKind::kLayerNorm:
      (*out)["epsilon"] = l.epsilon;
      break;
    case LayerKind::kLrn:
      (*out)["size"] = l.lrn_size;
      (*out)["alpha"] = l.lrn_alpha;
      (*out)["beta"] = l.lrn_beta;
      (*out)["k"] = l.lrn_k;
      break;
    case LayerKind::kFullyConnected:
      (*out)["out"] = l.out_channels;
      break;
    case LayerKind::kSlice:
      (*out)["begin"] = l.slice_begin;
      (*out)["end"] = l.slice_end;
      break;
    case LayerKind::kChannelShuffle:
      (*out)["groups"] = l.groups;
      break;
    case LayerKind::kUpsample:
      (*out)["scale"] = pair_json(l.upsample_h, l.upsample_w);
      if (l.upsample_bilinear) (*out)["mode"] = "bilinear";
      break;
    case LayerKind::kPad: {
      const Window& w = l.window;
      (*out)["pad"] = json::array({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
      if (!l.pad_reflect) (*out)["mode"] = "edge";
      break;
    }
    case LayerKind::kGelu:
    case LayerKind::kPrelu:
    case LayerKind::kGlobalAvgPool:
    case LayerKind::kRelu:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSilu:
    case LayerKind::kTanh:
    case LayerKind::kFlatten:
    case LayerKind::kAdd:
    case LayerKind::kMul:
    case LayerKind::kConcat:
      break;
    case LayerKind::kSoftmax:
      if (l.softmax_log) (*out)["log"] = true;
      break;
  }
}

}  // namespace serf::model
