// Shape inference (validate): every layer's inputs, output shape and counts, the graph's
// consumers and the activation peak. The rules follow PyTorch (floor division for output sizes,
// pooling pad at most half the kernel) so the reference script builds exactly the same network.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "model/model_spec.h"
#include "serf/io/json_fields.h"

namespace serf::model {

namespace {

// A weight file larger than this is a typo in a size, not a model (64 GiB of float32).
constexpr int64_t kMaxParameters = int64_t{1} << 34;
constexpr int64_t kMaxSide = 1 << 20;

std::string shape_str(const Shape& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

Status positive(const std::string& layer, const char* field, int value) {
  if (value <= 0) {
    return InvalidArgument(layer + ": " + field + " must be positive (got " +
                           std::to_string(value) + ")");
  }
  return Status::Ok();
}

// Output size of a sliding window along one dimension, PyTorch's rule, in 64 bits (a pad near 2^31
// must not wrap; the caller bounds the result). `span` is the dilated kernel.
int64_t window_out(int in, int span, int stride, int pad_before, int pad_after, bool ceil_mode) {
  const int64_t room = int64_t{in} + pad_before + pad_after - span;
  if (!ceil_mode) return room / stride + 1;
  int64_t out = (room + stride - 1) / stride + 1;
  // The last window must start inside the input or its leading padding.
  if ((out - 1) * stride >= int64_t{in} + pad_before) --out;
  return out;
}

// Checks a sliding window over `in` and sets the output height and width.
Status check_window(const std::string& layer, const LayerSpec& l, const Shape& in, bool ceil_mode,
                    int* out_h, int* out_w) {
  const Window& w = l.window;
  SERF_RETURN_IF_ERROR(positive(layer, "kernel", std::min(w.kernel_h, w.kernel_w)));
  SERF_RETURN_IF_ERROR(positive(layer, "stride", std::min(w.stride_h, w.stride_w)));
  SERF_RETURN_IF_ERROR(positive(layer, "dilation", std::min(w.dilation_h, w.dilation_w)));
  const int min_pad = std::min({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
  if (min_pad < 0) {
    return InvalidArgument(layer + ": pad must be >= 0 (got " + std::to_string(min_pad) + ")");
  }
  const int64_t span_h = int64_t{w.dilation_h} * (w.kernel_h - 1) + 1,
                span_w = int64_t{w.dilation_w} * (w.kernel_w - 1) + 1;
  const int64_t room_h = int64_t{in.height} + w.pad_top + w.pad_bottom,
                room_w = int64_t{in.width} + w.pad_left + w.pad_right;
  if (room_h < span_h || room_w < span_w) {
    const bool padded = w.pad_top || w.pad_left || w.pad_bottom || w.pad_right;
    const std::string kernel = w.square() && span_h == w.kernel_h
                                   ? std::to_string(w.kernel_h)
                                   : std::to_string(span_h) + "x" + std::to_string(span_w);
    return InvalidArgument(
        layer + ": kernel " + kernel + " larger than its input " + std::to_string(in.height) + "x" +
        std::to_string(in.width) +
        (padded ? " padded by " +
                      std::to_string(std::max({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right}))
                : std::string()) +
        " (use a smaller kernel or fewer pooling layers before it)");
  }
  if (span_h > kMaxSide || span_w > kMaxSide) {
    return InvalidArgument(layer + ": dilated kernel exceeds " + std::to_string(kMaxSide));
  }
  const int64_t h = window_out(in.height, static_cast<int>(span_h), w.stride_h, w.pad_top,
                               w.pad_bottom, ceil_mode),
                wd = window_out(in.width, static_cast<int>(span_w), w.stride_w, w.pad_left,
                                w.pad_right, ceil_mode);
  if (h > kMaxSide || wd > kMaxSide) {
    return InvalidArgument(layer + ": output " + std::to_string(h) + "x" + std::to_string(wd) +
                           " exceeds " + std::to_string(kMaxSide) + " per side (pad " +
                           std::to_string(std::max({w.pad_top, w.pad_left})) + ")");
  }
  *out_h = static_cast<int>(h);
  *out_w = static_cast<int>(wd);
  return Status::Ok();
}

Status check_flat(const std::string& layer, const char* type, const Shape& in) {
  if (in.height != 1 || in.width != 1) {
    return InvalidArgument(layer + ": " + type + " needs a flat input but gets " + shape_str(in) +
                           " (add {\"type\": \"flatten\"} before it)");
  }
  return Status::Ok();
}

Status infer_conv(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  const Shape& in = info->in;
  SERF_RETURN_IF_ERROR(positive(layer, "out_channels", l.out_channels));
  SERF_RETURN_IF_ERROR(positive(layer, "groups", l.groups));
  if (in.channels % l.groups != 0 || l.out_channels % l.groups != 0) {
    return InvalidArgument(layer + ": groups " + std::to_string(l.groups) +
                           " must divide the input channels " + std::to_string(in.channels) +
                           " and out_channels " + std::to_string(l.out_channels));
  }
  info->out.channels = l.out_channels;
  SERF_RETURN_IF_ERROR(check_window(layer, l, in, false, &info->out.height, &info->out.width));
  const int64_t per_out = int64_t{in.channels / l.groups} * l.window.kernel_h * l.window.kernel_w;
  info->parameters = int64_t{l.out_channels} * per_out + l.out_channels;
  info->connections = info->out.elements() * per_out;
  return Status::Ok();
}

// conv_transpose2d: out = (in - 1) * stride - pads + dilation * (kernel - 1) + 1 + output_padding
// (PyTorch's ConvTranspose2d). The output padding extends the bottom / right edge, so it may not
// exceed that side's pad (the engine computes it as a smaller pad there).
Status infer_conv_transpose(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  const Shape& in = info->in;
  const Window& w = l.window;
  SERF_RETURN_IF_ERROR(positive(layer, "out_channels", l.out_channels));
  SERF_RETURN_IF_ERROR(positive(layer, "groups", l.groups));
  SERF_RETURN_IF_ERROR(positive(layer, "kernel", std::min(w.kernel_h, w.kernel_w)));
  SERF_RETURN_IF_ERROR(positive(layer, "stride", std::min(w.stride_h, w.stride_w)));
  SERF_RETURN_IF_ERROR(positive(layer, "dilation", std::min(w.dilation_h, w.dilation_w)));
  if (in.channels % l.groups != 0 || l.out_channels % l.groups != 0) {
    return InvalidArgument(layer + ": groups " + std::to_string(l.groups) +
                           " must divide the input channels " + std::to_string(in.channels) +
                           " and out_channels " + std::to_string(l.out_channels));
  }
  if (std::min({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right}) < 0 ||
      std::min(l.output_padding_h, l.output_padding_w) < 0 || l.output_padding_h > w.pad_bottom ||
      l.output_padding_w > w.pad_right || std::max(w.kernel_h, w.kernel_w) > kMaxSide ||
      std::max(w.stride_h, w.stride_w) > kMaxSide ||
      std::max(w.dilation_h, w.dilation_w) > kMaxSide) {
    return InvalidArgument(layer +
                           ": needs pads >= 0 and 0 <= output_padding <= the bottom / right "
                           "pad (got output_padding " +
                           std::to_string(l.output_padding_h) + "x" +
                           std::to_string(l.output_padding_w) + ", pad bottom " +
                           std::to_string(w.pad_bottom) + ", right " + std::to_string(w.pad_right) +
                           ")");
  }
  auto side = [](int n, int k, int s, int d, int before, int after, int extra) {
    return (int64_t{n} - 1) * s - before - after + int64_t{d} * (k - 1) + 1 + extra;
  };
  const int64_t h = side(in.height, w.kernel_h, w.stride_h, w.dilation_h, w.pad_top, w.pad_bottom,
                         l.output_padding_h);
  const int64_t wd = side(in.width, w.kernel_w, w.stride_w, w.dilation_w, w.pad_left, w.pad_right,
                          l.output_padding_w);
  if (h < 1 || wd < 1 || h > kMaxSide || wd > kMaxSide) {
    return InvalidArgument(layer + ": output " + std::to_string(h) + "x" + std::to_string(wd) +
                           " is empty or exceeds " + std::to_string(kMaxSide) + " per side");
  }
  info->out = {l.out_channels, static_cast<int>(h), static_cast<int>(wd)};
  const int64_t per_in = int64_t{l.out_channels / l.groups} * w.kernel_h * w.kernel_w;
  info->parameters = int64_t{in.channels} * per_in + l.out_channels;
  info->connections = in.elements() * per_in;
  return Status::Ok();
}

Status infer_pool(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  const Window& w = l.window;
  if (w.dilation_h != 1 || w.dilation_w != 1) {
    return InvalidArgument(layer + ": pooling has no dilation");
  }
  SERF_RETURN_IF_ERROR(
      check_window(layer, l, info->in, l.ceil_mode, &info->out.height, &info->out.width));
  if (2 * int64_t{std::max(w.pad_top, w.pad_bottom)} > w.kernel_h ||
      2 * int64_t{std::max(w.pad_left, w.pad_right)} > w.kernel_w) {
    return InvalidArgument(
        layer + ": pad " +
        std::to_string(std::max({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right})) +
        " must be at most half the kernel " + std::to_string(std::min(w.kernel_h, w.kernel_w)));
  }
  // A partial window's divisor: without the padding (count_include_pad false) it is the part
  // inside the input, as oneDNN's exclude_padding divides; PyTorch's with the padding counts the
  // padding but not the part past it, which oneDNN cannot divide by.
  if (l.ceil_mode && l.kind == LayerKind::kAvgPool && l.count_include_pad) {
    int floor_h = 0, floor_w = 0;
    SERF_RETURN_IF_ERROR(check_window(layer, l, info->in, false, &floor_h, &floor_w));
    if (floor_h != info->out.height || floor_w != info->out.width) {
      return InvalidArgument(layer + ": avgpool with ceil_mode adding a partial window (" +
                             std::to_string(info->out.height) + "x" +
                             std::to_string(info->out.width) + " instead of " +
                             std::to_string(floor_h) + "x" + std::to_string(floor_w) +
                             ") is not supported with count_include_pad true");
    }
  }
  return Status::Ok();
}

Status infer_join(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  if (info->ins.size() < 2) {
    return InvalidArgument(layer + ": " + to_string(l.kind) + " needs at least two inputs (got " +
                           std::to_string(info->ins.size()) + ")");
  }
  int64_t channels = 0;
  for (size_t k = 0; k < info->ins.size(); ++k) {
    const Shape& s = info->ins[k];
    const bool same = l.kind == LayerKind::kAdd
                          ? s == info->in
                          : s.height == info->in.height && s.width == info->in.width;
    if (!same) {
      return InvalidArgument(layer + ": input '" + l.inputs[k] + "' is " + shape_str(s) + " but '" +
                             l.inputs[0] + "' is " + shape_str(info->in) +
                             (l.kind == LayerKind::kAdd
                                  ? " (add needs equal shapes)"
                                  : " (concat joins channels of equal height and width)"));
    }
    channels += s.channels;
  }
  if (l.kind == LayerKind::kConcat) {
    if (channels * info->in.height * info->in.width > std::numeric_limits<int>::max()) {
      return InvalidArgument(layer + ": concatenated output is too large");
    }
    info->out.channels = static_cast<int>(channels);
  }
  return Status::Ok();
}

// mul: the second input of the first's shape, or a per-channel C x 1 x 1 scale of it.
Status infer_mul(const std::string& layer, const LayerSpec& l, const LayerInfo& info) {
  const Shape& x = info.ins[0];
  const Shape& s = info.ins[1];
  if (s == x || s == Shape{x.channels, 1, 1}) return Status::Ok();
  return InvalidArgument(layer + ": input '" + l.inputs[1] + "' is " + shape_str(s) + " but '" +
                         l.inputs[0] + "' is " + shape_str(x) +
                         " (mul needs equal shapes, or a per-channel scale " +
                         std::to_string(x.channels) + "x1x1 as its second input)");
}

// slice: channels [begin, end) of the input, 0 <= begin < end <= C. channel_shuffle: groups
// g >= 1 dividing C.
Status infer_channels(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  const int c = info->in.channels;
  if (l.kind == LayerKind::kChannelShuffle) {
    if (l.groups < 1 || c % l.groups != 0) {
      return InvalidArgument(layer + ": channel_shuffle groups " + std::to_string(l.groups) +
                             " must be at least 1 and divide the input's " + std::to_string(c) +
                             " channels");
    }
    return Status::Ok();
  }
  if (l.slice_begin < 0 || l.slice_begin >= l.slice_end || l.slice_end > c) {
    return InvalidArgument(layer + ": slice of channels [" + std::to_string(l.slice_begin) + ", " +
                           std::to_string(l.slice_end) +
                           ") needs 0 <= begin < end <= the input's " + std::to_string(c) +
                           " channels");
  }
  info->out.channels = l.slice_end - l.slice_begin;
  return Status::Ok();
}

// upsample: integer scales >= 1, the output at most kMaxSide per side.
Status infer_upsample(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  SERF_RETURN_IF_ERROR(positive(layer, "scale", std::min(l.upsample_h, l.upsample_w)));
  const int64_t h = int64_t{info->in.height} * l.upsample_h,
                w = int64_t{info->in.width} * l.upsample_w;
  if (h > kMaxSide || w > kMaxSide) {
    return InvalidArgument(layer + ": upsampled output " + std::to_string(h) + "x" +
                           std::to_string(w) + " exceeds " + std::to_string(kMaxSide) +
                           " per side");
  }
  info->out.height = static_cast<int>(h);
  info->out.width = static_cast<int>(w);
  return Status::Ok();
}

// pad: pads >= 0; reflect needs each below its side's size (the mirror skips the edge).
Status infer_pad(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  const Window& w = l.window;
  const Shape& in = info->in;
  const int most = std::max({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right});
  if (std::min({w.pad_top, w.pad_left, w.pad_bottom, w.pad_right}) < 0 || most > kMaxSide) {
    return InvalidArgument(layer + ": pads must be in [0, " + std::to_string(kMaxSide) + "]");
  }
  if (l.pad_reflect && (std::max(w.pad_top, w.pad_bottom) >= in.height ||
                        std::max(w.pad_left, w.pad_right) >= in.width)) {
    return InvalidArgument(layer + ": reflect pad " + std::to_string(most) +
                           " must be smaller than the input's " + std::to_string(in.height) + "x" +
                           std::to_string(in.width));
  }
  info->out.height = in.height + w.pad_top + w.pad_bottom;
  info->out.width = in.width + w.pad_left + w.pad_right;
  return Status::Ok();
}

// Layer l reads two inputs (mul), one or more (add, concat) or one (every other kind).
Status check_arity(const LayerSpec& l, const std::string& layer, const LayerInfo& info) {
  const bool join = l.kind == LayerKind::kAdd || l.kind == LayerKind::kConcat;
  if (l.kind == LayerKind::kMul && info.ins.size() != 2) {
    return InvalidArgument(layer + ": mul reads two inputs (got " +
                           std::to_string(info.ins.size()) + ")");
  }
  if (!join && l.kind != LayerKind::kMul && info.ins.size() != 1) {
    return InvalidArgument(layer + ": " + to_string(l.kind) + " reads one input (got " +
                           std::to_string(info.ins.size()) + ")");
  }
  return Status::Ok();
}

// Element-wise activations (the shape unchanged): finite parameters; prelu's slopes.
Status infer_activation(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  switch (l.kind) {
    case LayerKind::kPrelu:  // one slope per channel
      info->parameters = int64_t{info->in.channels};
      return Status::Ok();
    case LayerKind::kLeakyRelu:
    case LayerKind::kElu:
      if (!std::isfinite(l.kind == LayerKind::kElu ? l.elu_alpha : l.leaky_relu_alpha)) {
        return InvalidArgument(layer + ": " + to_string(l.kind) + " needs a finite alpha");
      }
      return Status::Ok();
    case LayerKind::kHardSigmoid:
      if (!std::isfinite(l.hardsigmoid_alpha) || !std::isfinite(l.hardsigmoid_beta)) {
        return InvalidArgument(layer + ": hardsigmoid needs finite alpha and beta");
      }
      return Status::Ok();
    case LayerKind::kClip:
      if (!std::isfinite(l.clip_min) || !std::isfinite(l.clip_max) || l.clip_min > l.clip_max) {
        return InvalidArgument(layer + ": clip needs finite min <= max");
      }
      return Status::Ok();
    default:  // relu, sigmoid, hardswish, silu, tanh, gelu
      return Status::Ok();
  }
}

// Normalisations (the shape unchanged): batchnorm (per channel), layer_norm (over the features
// of a flat input), lrn (across channels, an odd window).
Status infer_norm(const std::string& layer, const LayerSpec& l, LayerInfo* info) {
  if (l.kind == LayerKind::kLrn) {
    // Odd sizes only: PyTorch and oneDNN place an even window differently.
    if (l.lrn_size <= 0 || l.lrn_size % 2 == 0) {
      return InvalidArgument(layer + ": size must be a positive odd number (got " +
                             std::to_string(l.lrn_size) + ")");
    }
    if (!(l.lrn_alpha >= 0) || !(l.lrn_beta >= 0) || !(l.lrn_k > 0)) {
      return InvalidArgument(layer + ": need alpha >= 0, beta >= 0 and k > 0");
    }
    return Status::Ok();
  }
  if (!(l.epsilon > 0) || !std::isfinite(l.epsilon)) {
    return InvalidArgument(layer + ": epsilon must be positive");
  }
  if (l.kind == LayerKind::kLayerNorm) {
    SERF_RETURN_IF_ERROR(check_flat(layer, "layer_norm", info->in));
    info->parameters = 2 * int64_t{info->in.channels};
    return Status::Ok();
  }
  info->parameters = 4 * int64_t{info->in.channels};  // batchnorm
  return Status::Ok();
}

// The shape and counts of layer l (its inputs are resolved into info->ins).
Status infer_layer(const LayerSpec& l, const std::string& layer, LayerInfo* info) {
  SERF_RETURN_IF_ERROR(check_arity(l, layer, *info));
  const Shape in = info->in;
  info->out = in;
  switch (l.kind) {
    case LayerKind::kConv2d:
      return infer_conv(layer, l, info);
    case LayerKind::kConvTranspose2d:
      return infer_conv_transpose(layer, l, info);
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
      return infer_pool(layer, l, info);
    case LayerKind::kGlobalAvgPool:
      info->out = {in.channels, 1, 1};
      return Status::Ok();
    case LayerKind::kRelu:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSilu:
    case LayerKind::kTanh:
    case LayerKind::kGelu:
    case LayerKind::kPrelu:
    case LayerKind::kLeakyRelu:
    case LayerKind::kElu:
    case LayerKind::kHardSigmoid:
    case LayerKind::kClip:
      return infer_activation(layer, l, info);
    case LayerKind::kUpsample:
      return infer_upsample(layer, l, info);
    case LayerKind::kPad:
      return infer_pad(layer, l, info);
    case LayerKind::kMul:
      return infer_mul(layer, l, *info);
    case LayerKind::kBatchNorm:
    case LayerKind::kLayerNorm:
    case LayerKind::kLrn:
      return infer_norm(layer, l, info);
    case LayerKind::kFlatten:
      if (in.elements() > std::numeric_limits<int>::max()) {
        return InvalidArgument(layer + ": flattened size of " + shape_str(in) + " is too large");
      }
      info->out = {static_cast<int>(in.elements()), 1, 1};
      return Status::Ok();
    case LayerKind::kFullyConnected:
      SERF_RETURN_IF_ERROR(positive(layer, "out", l.out_channels));
      SERF_RETURN_IF_ERROR(check_flat(layer, "fully_connected", in));
      info->out = {l.out_channels, 1, 1};
      info->parameters = int64_t{l.out_channels} * in.channels + l.out_channels;
      info->connections = int64_t{l.out_channels} * in.channels;
      return Status::Ok();
    case LayerKind::kAdd:
    case LayerKind::kConcat:
      return infer_join(layer, l, info);
    case LayerKind::kSlice:
    case LayerKind::kChannelShuffle:
      return infer_channels(layer, l, info);
    case LayerKind::kSoftmax:
      return check_flat(layer, "softmax", in);
  }
  return Status::Ok();
}

// Resolves layer i's input names to producing layers (-1: the model input).
Status resolve_inputs(const ModelSpec& spec, size_t i, const std::string& layer,
                      const std::map<std::string, int>& index, const ModelPlan& plan,
                      LayerInfo* info) {
  for (const std::string& name : spec.layers[i].inputs) {
    int source = -1;
    if (name != kModelInputName) {
      auto it = index.find(name);
      if (it == index.end()) {
        return InvalidArgument(layer + ": input '" + name +
                               "' is neither \"input\" nor the name of a layer");
      }
      if (it->second >= static_cast<int>(i)) {
        return InvalidArgument(
            layer + ": input '" + name + "' is " +
            (it->second == static_cast<int>(i) ? "the layer itself" : "a later layer") +
            " (list layers so that each input is defined before it is read; "
            "a graph with a cycle has no such order)");
      }
      source = it->second;
    }
    info->sources.push_back(source);
    info->ins.push_back(source < 0 ? spec.input : plan.layers[static_cast<size_t>(source)].out);
  }
  info->in = info->ins.at(0);
  return Status::Ok();
}

// Activations alive at once: flatten's output is a view of its input; the input lives from the
// start, the output to the end.
int64_t activation_peak_bytes(const ModelPlan& plan) {
  const int n = static_cast<int>(plan.layers.size());
  std::vector<int> storage(static_cast<size_t>(n));  // the storage each tensor lives in
  auto storage_of = [&](int source) {
    return source < 0 ? -1 : storage[static_cast<size_t>(source)];
  };
  std::vector<int> last(static_cast<size_t>(n) + 1, -1);  // last reader, per storage id + 1
  for (int i = 0; i < n; ++i) {
    const LayerInfo& info = plan.layers[static_cast<size_t>(i)];
    for (int s : info.sources) {
      const int slot = storage_of(s) + 1;  // storage -1 (the input) is slot 0
      int& l = last[static_cast<size_t>(slot)];
      l = std::max(l, i);
    }
    const bool view = plan.spec.layers[static_cast<size_t>(i)].kind == LayerKind::kFlatten;
    storage[static_cast<size_t>(i)] = view ? storage_of(info.sources[0]) : i;
  }
  const int output_slot = storage_of(n - 1) + 1;
  last[static_cast<size_t>(output_slot)] = n;
  int64_t peak = 0;
  for (int t = 0; t < n; ++t) {
    int64_t live = 0;
    for (int id = -1; id < n; ++id) {  // storage `id` is written by layer `id`
      if (id >= 0 && storage[static_cast<size_t>(id)] != id) continue;
      const int slot = id + 1;
      if (id > t || last[static_cast<size_t>(slot)] < t) continue;
      const Shape s = id < 0 ? plan.spec.input : plan.layers[static_cast<size_t>(id)].out;
      live += s.elements() * static_cast<int64_t>(sizeof(float));
    }
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

StatusOr<LayerInfo> infer_layer_shape(const LayerSpec& layer, const std::vector<Shape>& ins,
                                      const std::string& where) {
  LayerInfo info;
  if (ins.empty()) return InvalidArgument(where + ": no inputs");
  info.ins = ins;
  info.in = ins[0];
  SERF_RETURN_IF_ERROR(infer_layer(layer, where, &info));
  if (info.out.elements() > std::numeric_limits<int>::max()) {
    return InvalidArgument(where + ": output " + shape_str(info.out) + " is too large");
  }
  info.weight_bytes = info.parameters * static_cast<int64_t>(sizeof(float));
  return info;
}

StatusOr<ModelPlan> infer_shapes(const ModelSpec& spec) {
  ModelPlan plan;
  plan.spec = spec;
  SERF_RETURN_IF_ERROR(positive("input", "channels", spec.input.channels));
  SERF_RETURN_IF_ERROR(positive("input", "height", spec.input.height));
  SERF_RETURN_IF_ERROR(positive("input", "width", spec.input.width));
  if (spec.input.elements() > std::numeric_limits<int>::max()) {
    return InvalidArgument("input: " + shape_str(spec.input) + " is too large");
  }
  if (spec.layers.empty()) return InvalidArgument("layers: must hold at least one layer");

  std::map<std::string, int> index;  // every layer's name, so a later one is named as such
  for (size_t i = 0; i < spec.layers.size(); ++i) index[spec.layers[i].name] = static_cast<int>(i);
  plan.consumers.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string layer = io::index_path("layers", i) + " (" + l.name + ")";
    if (l.inputs.empty()) return InvalidArgument(layer + ": no inputs");
    LayerInfo info;
    SERF_RETURN_IF_ERROR(resolve_inputs(spec, i, layer, index, plan, &info));
    SERF_RETURN_IF_ERROR(infer_layer(l, layer, &info));
    if (l.kind == LayerKind::kSoftmax && i + 1 != spec.layers.size()) {
      return InvalidArgument(layer + ": softmax must be the last layer (found " +
                             std::to_string(spec.layers.size() - 1 - i) + " layer(s) after it)");
    }
    if (info.out.elements() > std::numeric_limits<int>::max()) {
      return InvalidArgument(layer + ": output " + shape_str(info.out) + " is too large");
    }
    info.weight_bytes = info.parameters * static_cast<int64_t>(sizeof(float));
    plan.parameters += info.parameters;
    plan.connections += info.connections;
    plan.weight_bytes += info.weight_bytes;
    if (plan.parameters > kMaxParameters) {
      return InvalidArgument(layer + ": the model exceeds " + std::to_string(kMaxParameters) +
                             " parameters (64 GiB of weights); check the layer sizes");
    }
    for (int s : info.sources) {
      auto& readers = s < 0 ? plan.input_consumers : plan.consumers[static_cast<size_t>(s)];
      if (readers.empty() || readers.back() != static_cast<int>(i)) {
        readers.push_back(static_cast<int>(i));
      }
    }
    plan.layers.push_back(std::move(info));
  }
  for (size_t i = 0; i + 1 < spec.layers.size(); ++i) {
    if (plan.consumers[i].empty()) {
      return InvalidArgument(io::index_path("layers", i) + " (" + spec.layers[i].name +
                             "): its output is read by no layer (only the last layer's output "
                             "leaves the model)");
    }
  }
  plan.activation_peak_bytes = activation_peak_bytes(plan);
  return plan;
}

}  // namespace serf::model
