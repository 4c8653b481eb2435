#pragma once
// A plain-loop forward pass (double accumulation) used as the engine's reference in tests: the
// definitions of model_spec.h written out, independent of oneDNN, over the graph (each layer reads
// the tensors its spec names).

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/weights.h"

namespace serf::engine::testing {

namespace detail {

using Tensor = std::vector<float>;

inline float activate(const model::LayerSpec& s, double v) {
  switch (s.kind) {
    case model::LayerKind::kRelu:
      return static_cast<float>(std::max(v, 0.0));
    case model::LayerKind::kClip:
      return static_cast<float>(std::min(std::max(v, double{s.clip_min}), double{s.clip_max}));
    case model::LayerKind::kSigmoid:
      return static_cast<float>(1.0 / (1.0 + std::exp(-v)));
    case model::LayerKind::kHardSigmoid:
      return static_cast<float>(
          std::min(std::max(s.hardsigmoid_alpha * v + s.hardsigmoid_beta, 0.0), 1.0));
    case model::LayerKind::kHardSwish:
      return static_cast<float>(v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0);
    case model::LayerKind::kSilu:
      return static_cast<float>(v / (1.0 + std::exp(-v)));
    case model::LayerKind::kLeakyRelu:
      return static_cast<float>(v >= 0 ? v : s.leaky_relu_alpha * v);
    case model::LayerKind::kTanh:
      return static_cast<float>(std::tanh(v));
    case model::LayerKind::kElu:
      return static_cast<float>(v > 0 ? v : s.elu_alpha * std::expm1(v));
    case model::LayerKind::kGelu:
      return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    default:
      return static_cast<float>(v);
  }
}

inline Tensor conv(const model::LayerSpec& s, const model::LayerInfo& info,
                   const model::Weights& weights, const Tensor& x) {
  const model::Shape in = info.in, out = info.out;
  const model::Window& w = s.window;
  const auto& W = weights.find(s.name + ".weight")->data;
  const auto& B = weights.find(s.name + ".bias")->data;
  const int per_in = in.channels / s.groups, per_out = out.channels / s.groups;
  Tensor y(static_cast<size_t>(out.elements()));
  for (int o = 0; o < out.channels; ++o) {
    const int g = o / per_out;
    for (int oh = 0; oh < out.height; ++oh)
      for (int ow = 0; ow < out.width; ++ow) {
        double acc = B[o];
        for (int ci = 0; ci < per_in; ++ci) {
          const int c = g * per_in + ci;
          for (int kh = 0; kh < w.kernel_h; ++kh)
            for (int kw = 0; kw < w.kernel_w; ++kw) {
              const int h = oh * w.stride_h - w.pad_top + kh * w.dilation_h;
              const int v = ow * w.stride_w - w.pad_left + kw * w.dilation_w;
              if (h < 0 || v < 0 || h >= in.height || v >= in.width) continue;
              acc += double{W[((int64_t{o} * per_in + ci) * w.kernel_h + kh) * w.kernel_w + kw]} *
                     x[(int64_t{c} * in.height + h) * in.width + v];
            }
        }
        y[(int64_t{o} * out.height + oh) * out.width + ow] = static_cast<float>(acc);
      }
  }
  return y;
}

// conv_transpose2d: each input element scattered through the kernel, weights [I, O/g, kh, kw].
inline Tensor conv_transpose(const model::LayerSpec& s, const model::LayerInfo& info,
                             const model::Weights& weights, const Tensor& x) {
  const model::Shape in = info.in, out = info.out;
  const model::Window& w = s.window;
  const auto& W = weights.find(s.name + ".weight")->data;
  const auto& B = weights.find(s.name + ".bias")->data;
  const int per_in = in.channels / s.groups, per_out = out.channels / s.groups;
  std::vector<double> acc(static_cast<size_t>(out.elements()));
  for (int o = 0; o < out.channels; ++o)
    for (int64_t j = 0; j < int64_t{out.height} * out.width; ++j)
      acc[static_cast<size_t>(o * int64_t{out.height} * out.width + j)] = B[o];
  for (int c = 0; c < in.channels; ++c) {
    const int g = c / per_in;
    for (int ih = 0; ih < in.height; ++ih)
      for (int iw = 0; iw < in.width; ++iw) {
        const double v = x[(int64_t{c} * in.height + ih) * in.width + iw];
        for (int oo = 0; oo < per_out; ++oo)
          for (int kh = 0; kh < w.kernel_h; ++kh)
            for (int kw = 0; kw < w.kernel_w; ++kw) {
              const int h = ih * w.stride_h - w.pad_top + kh * w.dilation_h;
              const int v2 = iw * w.stride_w - w.pad_left + kw * w.dilation_w;
              if (h < 0 || v2 < 0 || h >= out.height || v2 >= out.width) continue;
              const int o = g * per_out + oo;
              acc[static_cast<size_t>((int64_t{o} * out.height + h) * out.width + v2)] +=
                  v * W[((int64_t{c} * per_out + oo) * w.kernel_h + kh) * w.kernel_w + kw];
            }
      }
  }
  return Tensor(acc.begin(), acc.end());
}

inline Tensor pool(const model::LayerSpec& s, const model::LayerInfo& info, const Tensor& x) {
  const model::Shape in = info.in, out = info.out;
  const bool global = s.kind == model::LayerKind::kGlobalAvgPool;
  model::Window w = s.window;
  if (global) w = {in.height, in.width, 1, 1, 0, 0, 0, 0, 1, 1};
  Tensor y(static_cast<size_t>(out.elements()));
  for (int c = 0; c < out.channels; ++c)
    for (int oh = 0; oh < out.height; ++oh)
      for (int ow = 0; ow < out.width; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0.0;
        int inside = 0, padded = 0;  // window positions in the input / in input or padding
        for (int kh = 0; kh < w.kernel_h; ++kh)
          for (int kw = 0; kw < w.kernel_w; ++kw) {
            const int h = oh * w.stride_h - w.pad_top + kh, v = ow * w.stride_w - w.pad_left + kw;
            if (h < in.height + w.pad_bottom && v < in.width + w.pad_right) ++padded;
            if (h < 0 || v < 0 || h >= in.height || v >= in.width) continue;
            const double a = x[(int64_t{c} * in.height + h) * in.width + v];
            best = std::max(best, a);
            sum += a;
            ++inside;
          }
        double r = best;
        if (s.kind != model::LayerKind::kMaxPool) {
          r = sum / (global || !s.count_include_pad ? inside : padded);
        }
        y[(int64_t{c} * out.height + oh) * out.width + ow] = static_cast<float>(r);
      }
  return y;
}

inline Tensor lrn(const model::LayerSpec& s, const model::LayerInfo& info, const Tensor& x) {
  const model::Shape in = info.in;
  Tensor y(x.size());
  auto at = [&](int c, int h, int w) { return x[(int64_t{c} * in.height + h) * in.width + w]; };
  for (int c = 0; c < in.channels; ++c)
    for (int h = 0; h < in.height; ++h)
      for (int w = 0; w < in.width; ++w) {
        double sum = 0.0;
        for (int j = std::max(0, c - s.lrn_size / 2);
             j <= std::min(in.channels - 1, c + s.lrn_size / 2); ++j)
          sum += double{at(j, h, w)} * at(j, h, w);
        y[(int64_t{c} * in.height + h) * in.width + w] = static_cast<float>(
            at(c, h, w) * std::pow(s.lrn_k + s.lrn_alpha / s.lrn_size * sum, -double{s.lrn_beta}));
      }
  return y;
}

// upsample: nearest (input h / s, rounded down) or bilinear with half-pixel centres clamped at
// the edges (PyTorch's align_corners false), written out per output element.
inline Tensor upsample(const model::LayerSpec& s, const model::LayerInfo& info, const Tensor& x) {
  const model::Shape in = info.in, out = info.out;
  Tensor y(static_cast<size_t>(out.elements()));
  // Source coordinate and weight of the upper neighbour along one axis of scale `k`.
  auto source = [&](int o, int k, int size, int* lo, int* hi, double* t) {
    if (!s.upsample_bilinear) {
      *lo = *hi = o / k;
      *t = 0.0;
      return;
    }
    const double c = std::max((o + 0.5) / k - 0.5, 0.0);
    *lo = std::min(static_cast<int>(c), size - 1);
    *hi = std::min(*lo + 1, size - 1);
    *t = c - *lo;
  };
  for (int c = 0; c < out.channels; ++c)
    for (int oh = 0; oh < out.height; ++oh)
      for (int ow = 0; ow < out.width; ++ow) {
        int h0 = 0, h1 = 0, w0 = 0, w1 = 0;
        double th = 0, tw = 0;
        source(oh, s.upsample_h, in.height, &h0, &h1, &th);
        source(ow, s.upsample_w, in.width, &w0, &w1, &tw);
        auto at = [&](int h, int w) {
          return double{x[(int64_t{c} * in.height + h) * in.width + w]};
        };
        const double top = at(h0, w0) * (1 - tw) + at(h0, w1) * tw;
        const double bottom = at(h1, w0) * (1 - tw) + at(h1, w1) * tw;
        y[(int64_t{c} * out.height + oh) * out.width + ow] =
            static_cast<float>(top * (1 - th) + bottom * th);
      }
  return y;
}

inline Tensor layer(const model::ModelPlan& plan, size_t l, const model::Weights& weights,
                    const std::vector<const Tensor*>& xs) {
  using model::LayerKind;
  const model::LayerSpec& s = plan.spec.layers[l];
  const model::LayerInfo& info = plan.layers[l];
  const Tensor& x = *xs[0];
  Tensor y(static_cast<size_t>(info.out.elements()));
  switch (s.kind) {
    case LayerKind::kConv2d:
      return conv(s, info, weights, x);
    case LayerKind::kConvTranspose2d:
      return conv_transpose(s, info, weights, x);
    case LayerKind::kMaxPool:
    case LayerKind::kAvgPool:
    case LayerKind::kGlobalAvgPool:
      return pool(s, info, x);
    case LayerKind::kRelu:
    case LayerKind::kClip:
    case LayerKind::kSigmoid:
    case LayerKind::kHardSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSilu:
    case LayerKind::kLeakyRelu:
    case LayerKind::kTanh:
    case LayerKind::kElu:
    case LayerKind::kGelu:
      for (size_t i = 0; i < y.size(); ++i) y[i] = activate(s, x[i]);
      return y;
    case LayerKind::kPrelu: {  // x below 0 times its channel's slope
      const auto& a = weights.find(s.name + ".weight")->data;
      const size_t per = y.size() / a.size();
      for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] >= 0 ? x[i] : a[i / per] * x[i];
      return y;
    }
    case LayerKind::kUpsample:
      return upsample(s, info, x);
    case LayerKind::kPad: {  // each output pixel from its mirrored (reflect) or clamped (edge) one
      const model::Shape in = info.in, out = info.out;
      auto from = [&](int o, int before, int n) {
        const int i = o - before;
        if (i < 0) return s.pad_reflect ? -i : 0;
        if (i >= n) return s.pad_reflect ? 2 * (n - 1) - i : n - 1;
        return i;
      };
      for (int c = 0; c < out.channels; ++c)
        for (int oh = 0; oh < out.height; ++oh)
          for (int ow = 0; ow < out.width; ++ow)
            y[(int64_t{c} * out.height + oh) * out.width + ow] =
                x[(int64_t{c} * in.height + from(oh, s.window.pad_top, in.height)) * in.width +
                  from(ow, s.window.pad_left, in.width)];
      return y;
    }
    case LayerKind::kMul: {  // element-wise, or by a per-channel scale (C x 1 x 1)
      const Tensor& b = *xs[1];
      const size_t per = y.size() / b.size();
      for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(double{x[i]} * b[i / per]);
      return y;
    }
    case LayerKind::kBatchNorm: {
      const int64_t per = int64_t{info.in.height} * info.in.width;
      auto p = [&](const char* n) { return weights.find(s.name + n)->data; };
      const auto gamma = p(".weight"), beta = p(".bias"), mean = p(".running_mean"),
                 var = p(".running_var");
      for (size_t i = 0; i < y.size(); ++i) {
        const size_t c = i / static_cast<size_t>(per);
        y[i] = static_cast<float>(
            (x[i] - double{mean[c]}) / std::sqrt(double{var[c]} + s.epsilon) * gamma[c] + beta[c]);
      }
      return y;
    }
    case LayerKind::kLayerNorm: {  // per image: its F features' mean and variance (biased)
      const size_t f = static_cast<size_t>(info.in.channels);
      auto p = [&](const char* n) { return weights.find(s.name + n)->data; };
      const auto gamma = p(".weight"), beta = p(".bias");
      for (size_t row = 0; row < y.size() / f; ++row) {
        double mean = 0, var = 0;
        for (size_t k = 0; k < f; ++k) mean += x[row * f + k];
        mean /= static_cast<double>(f);
        for (size_t k = 0; k < f; ++k) var += (x[row * f + k] - mean) * (x[row * f + k] - mean);
        var /= static_cast<double>(f);
        for (size_t k = 0; k < f; ++k) {
          y[row * f + k] = static_cast<float>(
              (x[row * f + k] - mean) / std::sqrt(var + s.epsilon) * gamma[k] + beta[k]);
        }
      }
      return y;
    }
    case LayerKind::kLrn:
      return lrn(s, info, x);
    case LayerKind::kFlatten:
      return x;
    case LayerKind::kFullyConnected: {
      const auto& W = weights.find(s.name + ".weight")->data;
      const auto& B = weights.find(s.name + ".bias")->data;
      const int64_t n = info.in.elements();
      for (int o = 0; o < info.out.channels; ++o) {
        double acc = B[o];
        for (int64_t i = 0; i < n; ++i) acc += double{W[o * n + i]} * x[i];
        y[o] = static_cast<float>(acc);
      }
      return y;
    }
    case LayerKind::kAdd:
      for (size_t i = 0; i < y.size(); ++i) {
        double acc = 0.0;
        for (const Tensor* t : xs) acc += (*t)[i];
        y[i] = static_cast<float>(acc);
      }
      return y;
    case LayerKind::kConcat: {
      y.clear();
      for (const Tensor* t : xs) y.insert(y.end(), t->begin(), t->end());
      return y;
    }
    case LayerKind::kSlice: {  // channels [begin, end), written out as copies
      const int64_t area = int64_t{info.in.height} * info.in.width;
      return Tensor(x.begin() + s.slice_begin * area, x.begin() + s.slice_end * area);
    }
    case LayerKind::kChannelShuffle: {  // output channel j * g + i <- input channel i * C/g + j
      const int64_t area = int64_t{info.in.height} * info.in.width;
      const int g = s.groups, per = info.in.channels / s.groups;
      for (int i = 0; i < g; ++i)
        for (int j = 0; j < per; ++j)
          std::copy_n(x.begin() + (int64_t{i} * per + j) * area, area,
                      y.begin() + (int64_t{j} * g + i) * area);
      return y;
    }
    case LayerKind::kSoftmax: {
      const double m = *std::max_element(x.begin(), x.end());
      double z = 0.0;
      for (float v : x) z += std::exp(v - m);
      for (size_t i = 0; i < y.size(); ++i) {
        y[i] = static_cast<float>(s.softmax_log ? x[i] - m - std::log(z) : std::exp(x[i] - m) / z);
      }
      return y;
    }
  }
  return y;
}

}  // namespace detail

inline std::vector<float> reference_forward(const model::ModelPlan& plan,
                                            const model::Weights& weights, std::vector<float> x) {
  std::vector<std::vector<float>> tensors(plan.layers.size());
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    std::vector<const std::vector<float>*> inputs;
    for (int s : plan.layers[l].sources) {
      inputs.push_back(s < 0 ? &x : &tensors[static_cast<size_t>(s)]);
    }
    tensors[l] = detail::layer(plan, l, weights, inputs);
  }
  return tensors.back();
}

}  // namespace serf::engine::testing
