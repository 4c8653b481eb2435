// Shape inference (validate): every layer's input and output shape and its counts. The rules
// follow PyTorch (floor division for output sizes, pooling pad at most half the kernel) so the
// reference script builds exactly the same network.
#include <limits>

#include "model/model_spec.h"
#include "serf/io/json_fields.h"

namespace serf::model {

namespace {

// A weight file larger than this is a typo in a size, not a model (64 GiB of float32).
constexpr int64_t kMaxParameters = int64_t{1} << 34;

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

// Output size of a sliding window, PyTorch's floor rule (in 64 bits: a pad near 2^31 must not wrap;
// check_window bounds the result).
int64_t window_out(int in, int kernel, int stride, int pad) {
  return (int64_t{in} + 2 * int64_t{pad} - kernel) / stride + 1;
}

// Checks a sliding window (kernel, stride, pad) over `in` and sets its output height and width.
Status check_window(const std::string& layer, const LayerSpec& l, const Shape& in, int* out_h,
                    int* out_w) {
  SERF_RETURN_IF_ERROR(positive(layer, "kernel", l.kernel));
  SERF_RETURN_IF_ERROR(positive(layer, "stride", l.stride));
  if (l.pad < 0) {
    return InvalidArgument(layer + ": pad must be >= 0 (got " + std::to_string(l.pad) + ")");
  }
  if (int64_t{in.height} + 2 * int64_t{l.pad} < l.kernel ||
      int64_t{in.width} + 2 * int64_t{l.pad} < l.kernel) {
    return InvalidArgument(layer + ": kernel " + std::to_string(l.kernel) +
                           " larger than its input " + std::to_string(in.height) + "x" +
                           std::to_string(in.width) +
                           (l.pad > 0 ? " padded by " + std::to_string(l.pad) : std::string()) +
                           " (use a smaller kernel or fewer pooling layers before it)");
  }
  constexpr int64_t kMaxSide = 1 << 20;
  const int64_t h = window_out(in.height, l.kernel, l.stride, l.pad),
                w = window_out(in.width, l.kernel, l.stride, l.pad);
  if (h > kMaxSide || w > kMaxSide) {
    return InvalidArgument(layer + ": output " + std::to_string(h) + "x" + std::to_string(w) +
                           " exceeds " + std::to_string(kMaxSide) + " per side (pad " +
                           std::to_string(l.pad) + ")");
  }
  *out_h = static_cast<int>(h);
  *out_w = static_cast<int>(w);
  return Status::Ok();
}

Status check_flat(const std::string& layer, const char* type, const Shape& in) {
  if (in.height != 1 || in.width != 1) {
    return InvalidArgument(layer + ": " + type + " needs a flat input but gets " + shape_str(in) +
                           " (add {\"type\": \"flatten\"} before it)");
  }
  return Status::Ok();
}

}  // namespace

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

  Shape cur = spec.input;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string layer = io::index_path("layers", i) + " (" + l.name + ")";
    LayerInfo info;
    info.in = cur;
    Shape out = cur;
    switch (l.kind) {
      case LayerKind::kConv2d: {
        SERF_RETURN_IF_ERROR(positive(layer, "out_channels", l.out_channels));
        out.channels = l.out_channels;
        SERF_RETURN_IF_ERROR(check_window(layer, l, cur, &out.height, &out.width));
        const int64_t per_out = int64_t{cur.channels} * l.kernel * l.kernel;
        info.parameters = int64_t{l.out_channels} * per_out + l.out_channels;
        info.connections = out.elements() * per_out;
        break;
      }
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
        SERF_RETURN_IF_ERROR(check_window(layer, l, cur, &out.height, &out.width));
        if (2 * int64_t{l.pad} > l.kernel) {
          return InvalidArgument(layer + ": pad " + std::to_string(l.pad) +
                                 " must be at most half the kernel " + std::to_string(l.kernel));
        }
        break;
      case LayerKind::kRelu:
        break;
      case LayerKind::kLrn:
        // Odd sizes only: PyTorch and oneDNN place an even window differently.
        if (l.lrn_size <= 0 || l.lrn_size % 2 == 0) {
          return InvalidArgument(layer + ": size must be a positive odd number (got " +
                                 std::to_string(l.lrn_size) + ")");
        }
        if (!(l.lrn_alpha >= 0) || !(l.lrn_beta >= 0) || !(l.lrn_k > 0)) {
          return InvalidArgument(layer + ": need alpha >= 0, beta >= 0 and k > 0");
        }
        break;
      case LayerKind::kFlatten:
        if (cur.elements() > std::numeric_limits<int>::max()) {
          return InvalidArgument(layer + ": flattened size of " + shape_str(cur) + " is too large");
        }
        out = {static_cast<int>(cur.elements()), 1, 1};
        break;
      case LayerKind::kFullyConnected:
        SERF_RETURN_IF_ERROR(positive(layer, "out", l.out_channels));
        SERF_RETURN_IF_ERROR(check_flat(layer, "fully_connected", cur));
        out = {l.out_channels, 1, 1};
        info.parameters = int64_t{l.out_channels} * cur.channels + l.out_channels;
        info.connections = int64_t{l.out_channels} * cur.channels;
        break;
      case LayerKind::kSoftmax:
        SERF_RETURN_IF_ERROR(check_flat(layer, "softmax", cur));
        if (i + 1 != spec.layers.size()) {
          return InvalidArgument(layer + ": softmax must be the last layer (found " +
                                 std::to_string(spec.layers.size() - 1 - i) +
                                 " layer(s) after it)");
        }
        break;
    }
    if (out.elements() > std::numeric_limits<int>::max()) {
      return InvalidArgument(layer + ": output " + shape_str(out) + " is too large");
    }
    info.out = out;
    info.weight_bytes = info.parameters * static_cast<int64_t>(sizeof(float));
    plan.parameters += info.parameters;
    plan.connections += info.connections;
    plan.weight_bytes += info.weight_bytes;
    if (plan.parameters > kMaxParameters) {
      return InvalidArgument(layer + ": the model exceeds " + std::to_string(kMaxParameters) +
                             " parameters (64 GiB of weights); check the layer sizes");
    }
    plan.layers.push_back(info);
    cur = out;
  }
  return plan;
}

}  // namespace serf::model
