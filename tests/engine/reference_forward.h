#pragma once
// A plain-loop forward pass (double accumulation) used as the engine's reference in tests: the
// definitions of model_spec.h written out, independent of oneDNN.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/weights.h"

namespace serf::engine::testing {

inline std::vector<float> reference_forward(const model::ModelPlan& plan,
                                            const model::Weights& weights, std::vector<float> x) {
  using model::LayerKind;
  for (size_t l = 0; l < plan.spec.layers.size(); ++l) {
    const model::LayerSpec& s = plan.spec.layers[l];
    const model::Shape in = plan.layers[l].in, out = plan.layers[l].out;
    std::vector<float> y(out.elements());
    auto at = [&](int c, int h, int w) { return x[(int64_t{c} * in.height + h) * in.width + w]; };
    switch (s.kind) {
      case LayerKind::kConv2d: {
        const auto& W = weights.find(s.name + ".weight")->data;
        const auto& B = weights.find(s.name + ".bias")->data;
        for (int o = 0; o < out.channels; ++o)
          for (int oh = 0; oh < out.height; ++oh)
            for (int ow = 0; ow < out.width; ++ow) {
              double acc = B[o];
              for (int c = 0; c < in.channels; ++c)
                for (int kh = 0; kh < s.kernel; ++kh)
                  for (int kw = 0; kw < s.kernel; ++kw) {
                    const int h = oh * s.stride - s.pad + kh, w = ow * s.stride - s.pad + kw;
                    if (h < 0 || w < 0 || h >= in.height || w >= in.width) continue;
                    acc +=
                        double{
                            W[((int64_t{o} * in.channels + c) * s.kernel + kh) * s.kernel + kw]} *
                        at(c, h, w);
                  }
              y[(int64_t{o} * out.height + oh) * out.width + ow] = static_cast<float>(acc);
            }
        break;
      }
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
        for (int c = 0; c < out.channels; ++c)
          for (int oh = 0; oh < out.height; ++oh)
            for (int ow = 0; ow < out.width; ++ow) {
              double best = -std::numeric_limits<double>::infinity(), sum = 0.0;
              for (int kh = 0; kh < s.kernel; ++kh)
                for (int kw = 0; kw < s.kernel; ++kw) {
                  const int h = oh * s.stride - s.pad + kh, w = ow * s.stride - s.pad + kw;
                  if (h < 0 || w < 0 || h >= in.height || w >= in.width) continue;
                  best = std::max(best, double{at(c, h, w)});
                  sum += at(c, h, w);
                }
              y[(int64_t{c} * out.height + oh) * out.width + ow] = static_cast<float>(
                  s.kind == LayerKind::kMaxPool ? best : sum / (s.kernel * s.kernel));
            }
        break;
      case LayerKind::kRelu:
        for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(x[i], 0.0f);
        break;
      case LayerKind::kLrn:
        for (int c = 0; c < in.channels; ++c)
          for (int h = 0; h < in.height; ++h)
            for (int w = 0; w < in.width; ++w) {
              double sum = 0.0;
              for (int j = std::max(0, c - s.lrn_size / 2);
                   j <= std::min(in.channels - 1, c + s.lrn_size / 2); ++j)
                sum += double{at(j, h, w)} * at(j, h, w);
              y[(int64_t{c} * in.height + h) * in.width + w] = static_cast<float>(
                  at(c, h, w) *
                  std::pow(s.lrn_k + s.lrn_alpha / s.lrn_size * sum, -double{s.lrn_beta}));
            }
        break;
      case LayerKind::kFlatten:
        y = x;
        break;
      case LayerKind::kFullyConnected: {
        const auto& W = weights.find(s.name + ".weight")->data;
        const auto& B = weights.find(s.name + ".bias")->data;
        const int64_t n = in.elements();
        for (int o = 0; o < out.channels; ++o) {
          double acc = B[o];
          for (int64_t i = 0; i < n; ++i) acc += double{W[o * n + i]} * x[i];
          y[o] = static_cast<float>(acc);
        }
        break;
      }
      case LayerKind::kSoftmax: {
        const double m = *std::max_element(x.begin(), x.end());
        double z = 0.0;
        for (float v : x) z += std::exp(v - m);
        for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(std::exp(x[i] - m) / z);
        break;
      }
    }
    x = std::move(y);
  }
  return x;
}

}  // namespace serf::engine::testing
