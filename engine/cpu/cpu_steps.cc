// One step builder per layer kind: each turns a LayerStep (engine/layer_steps.h) into oneDNN
// primitives, this rank's weight slices in the primitive's preferred layout, and the reorders
// between the layout a tensor is stored in and the one a primitive wants.
//
// K = 1: a tensor stays in the layout its producer's primitive chose (blocked nChw16c after most
// convolutions), so consecutive conv2d, batchnorm, pooling, add and activation layers exchange
// no reorders; fully_connected and softmax read plain data (after flatten, one reorder).
// K > 1: tensors are plain NCHW so that a rank's channels are one contiguous block for the
// all-gather; primitives that prefer blocked layouts get reorders around them. With a batch of
// b > 1 that block needs the channel-major layout (C, N, H, W; [F, N] after flatten): the
// network input is transposed into it on entry, the output out of it at the end (finish_output),
// and fully_connected and softmax read and write plain rows through staging.
#include <algorithm>

#include "cpu_model.h"
#include "engine/cpu/gemv.h"

namespace serf::engine::cpu {

using model::LayerKind;

namespace {

bool is_plain(const md_t& md) { return md == plain(md.dims()); }

int64_t floats_of(const md_t& md) {
  return static_cast<int64_t>((md.get_size() + sizeof(float) - 1) / sizeof(float));
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// The oneDNN eltwise algorithms, in order, with their alpha and beta for an activation layer:
// one, but hardsigmoid is a linear map clipped to [0, 1] (oneDNN 2.6 has no hardsigmoid).
struct Eltwise {
  dnnl::algorithm alg;
  float alpha, beta;
};
std::vector<Eltwise> eltwise_of(const model::LayerSpec& l) {
  switch (l.kind) {
    case LayerKind::kClip:
      return {{dnnl::algorithm::eltwise_clip, l.clip_min, l.clip_max}};
    case LayerKind::kSigmoid:
      return {{dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f}};
    case LayerKind::kHardSigmoid:
      return {{dnnl::algorithm::eltwise_linear, l.hardsigmoid_alpha, l.hardsigmoid_beta},
              {dnnl::algorithm::eltwise_clip, 0.0f, 1.0f}};
    case LayerKind::kHardSwish:  // x * relu6(x + 3) / 6
      return {{dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f}};
    case LayerKind::kSilu:  // swish with alpha 1: x * sigmoid(x)
      return {{dnnl::algorithm::eltwise_swish, 1.0f, 0.0f}};
    case LayerKind::kLeakyRelu:  // relu with a negative slope
      return {{dnnl::algorithm::eltwise_relu, l.leaky_relu_alpha, 0.0f}};
    case LayerKind::kTanh:
      return {{dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f}};
    case LayerKind::kElu:
      return {{dnnl::algorithm::eltwise_elu, l.elu_alpha, 0.0f}};
    case LayerKind::kGelu:  // x * (1 + erf(x / sqrt 2)) / 2, PyTorch's exact GELU
      return {{dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f}};
    default:
      return {{dnnl::algorithm::eltwise_relu, 0.0f, 0.0f}};
  }
}

using conv_pd = dnnl::convolution_forward::primitive_desc;

// A convolution's primitive with activations `src`, `dst` (`any`: oneDNN's choice): Winograd when
// asked and oneDNN implements it for this shape and CPU, direct otherwise.
conv_pd conv_primitive(const model::Window& w, bool winograd, const md_t& src, const md_t& weights,
                       const md_t& bias, const md_t& dst, const dnnl::primitive_attr& attr,
                       const dnnl::engine& engine) {
  auto desc = [&](dnnl::algorithm alg) {
    return dnnl::convolution_forward::desc(
        kForward, alg, src, weights, bias, dst, {w.stride_h, w.stride_w},
        {w.dilation_h - 1, w.dilation_w - 1}, {w.pad_top, w.pad_left}, {w.pad_bottom, w.pad_right});
  };
  if (winograd) {
    try {
      return conv_pd(desc(dnnl::algorithm::convolution_winograd), attr, engine);
    } catch (const dnnl::error&) {  // unimplemented for this shape or CPU: direct below
    }
  }
  return conv_pd(desc(dnnl::algorithm::convolution_direct), attr, engine);
}

}  // namespace

md_t plain(const dnnl::memory::dims& dims) {
  const tag t = dims.size() == 1 ? tag::a : dims.size() == 2 ? tag::ab : tag::abcd;
  return {dims, dt::f32, t};
}

StepBuilder::StepBuilder(CpuPreparedModel& model, const model::Weights& weights)
    : m_(model), weights_(weights), flow_(model.partition_.ranks == 1), batch_(model.batch_) {
  stored_.resize(m_.plan_.layers.size());
  const model::Shape& in = m_.plan_.spec.input;
  input_md_ = canon(nchw(in.channels, in.height, in.width));
}

md_t StepBuilder::canon(const dnnl::memory::dims& dims) const {
  if (flow_ || batch_ == 1 || (dims.size() != 4 && dims.size() != 2)) return plain(dims);
  return {dims, dt::f32, dims.size() == 4 ? tag::bacd : tag::ba};
}

md_t StepBuilder::whole(const LayerStep& s) const {
  if (model::is_activation(s.kind) || s.kind == LayerKind::kAdd || s.kind == LayerKind::kMul) {
    return stored(s, 0);
  }
  const model::Shape& out = info(s).out;
  if (s.kind == LayerKind::kFullyConnected || s.kind == LayerKind::kSoftmax) {
    return canon({batch_, out.elements()});
  }
  return canon(nchw(out.channels, out.height, out.width));
}

const model::LayerSpec& StepBuilder::spec(const LayerStep& s) const {
  return m_.plan_.spec.layers[static_cast<size_t>(s.layer)];
}
const model::LayerInfo& StepBuilder::info(const LayerStep& s) const {
  return m_.plan_.layers[static_cast<size_t>(s.layer)];
}

const md_t& StepBuilder::stored(const LayerStep& s, size_t k) const {
  const int source = info(s).sources[k];
  return source < 0 ? input_md_ : stored_[static_cast<size_t>(source)];
}

Operand StepBuilder::read(const LayerStep& s, size_t k, const dnnl::memory::dims& dims,
                          bool as_stored, CpuStep* out) {
  const TensorRef& ref = s.inputs[k];
  Operand op{
      ref.buffer < 0 ? Space::kInput : Space::kActivation, std::max(ref.buffer, 0), ref.offset, {}};
  if (!flow_) {
    const md_t& st = stored(s, k);
    // Batch 1, or an element-wise step's flat view of its part: any layout will do.
    const dnnl::memory::dims& sd = st.dims();
    if (batch_ == 1 || (dims.size() == 2 && dims[0] == 1)) {
      op.md = plain(dims);
    } else if (dims.size() == 4 && dims[2] * dims[3] == 1 && sd.size() == 4 && sd[2] * sd[3] > 1) {
      // Features of a flattened conv output read as F x 1 x 1 channels (batchnorm or prelu after
      // flatten): the part is [c][b][h][w], the step wants feature c*h*w + ... as [f][b].
      const int64_t hw = sd[2] * sd[3];
      const dnnl::memory::dims part{batch_, dims[1] / hw, sd[2], sd[3]};
      op.md = canon(part);
      Operand features = staging(md_t(part, dt::f32, {1, hw * batch_, sd[3] * batch_, batch_}));
      reorder(op, features, out);
      features.md = canon(dims);
      return features;
    } else if (sd.size() == dims.size() || (dims.size() == 4 && dims[2] == 1 && dims[3] == 1)) {
      // The part, channel-major. A [b, F] tensor read as C x 1 x 1 channels (batchnorm or prelu
      // after a fully_connected) is the same floats: its part is a block of [c][b].
      op.md = canon(dims);
    } else {  // rows of a flattened tensor (read whole): made plain in staging
      op.md = st;
      Operand flat = staging(plain(st.dims()));
      reorder(op, flat, out);
      flat.md = plain(dims);
      return flat;
    }
    return op;
  }
  const md_t& st = stored(s, k);
  if (st.dims() == dims && (as_stored || is_plain(st))) {
    op.md = st;
    return op;
  }
  if (is_plain(st)) {  // a view of plain data (e.g. flatten)
    op.md = plain(dims);
    return op;
  }
  op.md = st;
  Operand flat = staging(plain(st.dims()));
  reorder(op, flat, out);
  flat.md = plain(dims);
  return flat;
}

Operand StepBuilder::write(const LayerStep& s, const md_t& md) {
  Operand op{Space::kActivation, s.output.buffer, s.output.offset, md};
  int64_t& size = m_.buffer_floats_[static_cast<size_t>(s.output.buffer)];
  size = std::max(size, s.output.offset + floats_of(md));
  const md_t st = flow_ ? md : whole(s);
  stored_[static_cast<size_t>(s.layer)] = st;
  if (s.activation_layer >= 0) stored_[static_cast<size_t>(s.activation_layer)] = st;
  if (s.add_layer >= 0) stored_[static_cast<size_t>(s.add_layer)] = st;
  return op;
}

Operand StepBuilder::staging(const md_t& md) {
  const size_t index = static_cast<size_t>(staging_used_++);
  if (index >= m_.staging_floats_.size()) m_.staging_floats_.push_back(0);
  m_.staging_floats_[index] = std::max(m_.staging_floats_[index], floats_of(md));
  return {Space::kStaging, static_cast<int>(index), 0, md};
}

void StepBuilder::reorder(const Operand& from, const Operand& to, CpuStep* out) {
  Call c;
  c.prim = dnnl::reorder(dnnl::reorder::primitive_desc(m_.engine_, from.md, m_.engine_, to.md));
  c.operands = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  out->calls.push_back(std::move(c));
}

Operand StepBuilder::adapt(const Operand& have, const md_t& want, CpuStep* out) {
  if (have.md == want) return have;
  Operand t = staging(want);
  reorder(have, t, out);
  return t;
}

Call& StepBuilder::call(dnnl::primitive prim, const dnnl::primitive_desc_base& pd, CpuStep* out) {
  Call c;
  c.prim = std::move(prim);
  c.scratch_md = pd.scratchpad_desc();
  m_.scratch_bytes_ = std::max(m_.scratch_bytes_, c.scratch_md.get_size());
  out->calls.push_back(std::move(c));
  return out->calls.back();
}

StatusOr<const model::Tensor*> StepBuilder::tensor(const std::string& name,
                                                   const std::vector<int64_t>& shape) const {
  const model::Tensor* t = weights_.find(name);
  if (t == nullptr) return NotFound("weights: tensor '" + name + "' is missing");
  if (t->shape != shape) {
    return InvalidArgument("weights: tensor '" + name + "' has shape " + dims_str(t->shape) +
                           ", the model needs " + dims_str(shape));
  }
  return t;
}

const float* StepBuilder::packed(const SharedWeights::Key& key, int64_t floats,
                                 const std::function<void(float*)>& fill) {
  bool reused = false;
  m_.weight_storage_.push_back(m_.shared_->get_or_pack(key, floats, fill, &reused));
  const int64_t bytes = m_.weight_storage_.back()->size() * static_cast<int64_t>(sizeof(float));
  m_.weight_bytes_ += bytes;
  if (reused) m_.reused_bytes_ += bytes;
  return m_.weight_storage_.back()->data();
}

dnnl::memory StepBuilder::pack(const model::Tensor& t, int offset, const md_t& plain_md,
                               const md_t& md) {
  const int64_t row = t.elements() / t.shape[0];
  // Our storage rather than oneDNN's: big slices go on 2 MiB pages (aligned_floats.h). Shared
  // with the backend's other models that want the same slice in the same layout (e.g. this
  // convolution at another batch size, when oneDNN picks the same weights layout for it).
  const float* data = packed({&t, offset, plain_md, md, ""}, floats_of(md), [&](float* dst) {
    float* src = const_cast<float*>(t.data.data()) + int64_t{offset} * row;
    dnnl::memory user(plain_md, m_.engine_, src);
    dnnl::memory to(md, m_.engine_, dst);
    dnnl::stream stream(m_.engine_);
    dnnl::reorder(user, to).execute(stream, user, to);
    stream.wait();
  });
  return dnnl::memory(md, m_.engine_, const_cast<float*>(data));
}

const float* StepBuilder::pack_panels(const model::Tensor& t, int offset, int rows) {
  const int64_t cols = t.elements() / t.shape[0];
  const md_t slice({rows, cols}, dt::f32, tag::ab);
  return packed({&t, offset, slice, {}, "gemm_panels"}, gemm_panel_floats(rows, cols),
                [&](float* dst) {
                  pack_gemm_panels(t.data.data() + int64_t{offset} * cols, rows, cols, dst);
                });
}

dnnl::memory StepBuilder::pack_values(const std::vector<float>& values) {
  // A few floats per channel (batchnorm): not worth sharing.
  const md_t md({static_cast<int64_t>(values.size())}, dt::f32, tag::a);
  auto own = std::make_shared<AlignedFloats>(static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), own->data());
  m_.weight_storage_.push_back(own);
  m_.weight_bytes_ += static_cast<int64_t>(md.get_size());
  return dnnl::memory(md, m_.engine_, own->data());
}

dnnl::primitive_attr StepBuilder::attributes(const LayerStep& s) const {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (s.accumulate) ops.append_sum(1.0f);  // out = conv(x) + b + residual, before the activation
  if (s.activation_layer >= 0) {
    for (const Eltwise& e :
         eltwise_of(m_.plan_.spec.layers[static_cast<size_t>(s.activation_layer)])) {
      ops.append_eltwise(1.0f, e.alg, e.alpha, e.beta);
    }
  }
  if (ops.len() > 0) attr.set_post_ops(ops);
  return attr;
}

Status StepBuilder::build(const LayerStep& s, CpuStep* out) {
  out->plan = s;
  staging_used_ = 0;
  if (s.noop) {
    if (s.kind == LayerKind::kFlatten) stored_[static_cast<size_t>(s.layer)] = stored(s, 0);
    return Status::Ok();  // a view, or run by another step (write() recorded its layout)
  }
  try {
    switch (s.kind) {
      case LayerKind::kConv2d:
        return conv(s, out);
      case LayerKind::kConvTranspose2d:
        return conv_transpose(s, out);
      case LayerKind::kFullyConnected:
        return fully_connected(s, out);
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool:
      case LayerKind::kGlobalAvgPool:
        return pool(s, out);
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
        return activation(s, out);
      case LayerKind::kBatchNorm:
        return batchnorm(s, out);
      case LayerKind::kPrelu:
        return prelu(s, out);
      case LayerKind::kUpsample:
        return upsample(s, out);
      case LayerKind::kPad:
        return pad(s, out);
      case LayerKind::kLrn:
        return lrn(s, out);
      case LayerKind::kAdd:
        return add(s, out);
      case LayerKind::kMul:
        return mul(s, out);
      case LayerKind::kConcat:
        return concat(s, out);
      case LayerKind::kSlice:
        return slice(s, out);
      case LayerKind::kChannelShuffle:
        return channel_shuffle(s, out);
      case LayerKind::kSoftmax:
        return softmax(s, out);
      case LayerKind::kLayerNorm:
        return layer_norm(s, out);
      case LayerKind::kFlatten:
        return Status::Ok();
    }
  } catch (const dnnl::error& e) {
    return Internal("layer '" + spec(s).name + "': oneDNN: " + e.what());
  } catch (const std::bad_alloc&) {
    return Internal("layer '" + spec(s).name + "': out of memory for its weights");
  }
  return Status::Ok();
}

// A batch (K = 1): 1x1 and 3x3 convolutions (ungrouped or depthwise) with 16-channel multiples
// write nChw16c activations and read them (oneDNN's jit_1x1, jit, jit_dw and Winograd kernels)
// instead of the NHWC `brgconv` ones `any` picks; a first layer of 3 channels reads its input
// as oneDNN likes. Where oneDNN has only a reference kernel for that, conv() takes `any`. resnet50
// at b = 8 (alternating with main's engine, under the lock): 3-10 % faster; its 13 Winograd
// layers run in nChw16c anyway, so with NHWC 8 images' activations were reordered twice around
// each. Batch 1 keeps `any` (session 24: no gain; K = 1 must equal K > 1 bit for bit).
bool StepBuilder::blocked_conv(int layer) const {
  const model::LayerSpec& l = m_.plan_.spec.layers[static_cast<size_t>(layer)];
  if (!flow_ || batch_ == 1 || l.kind != LayerKind::kConv2d) return false;
  const model::Window& w = l.window;
  const int per_group_in = m_.plan_.layers[static_cast<size_t>(layer)].in.channels / l.groups;
  return w.kernel_h <= 3 && w.kernel_w <= 3 && l.out_channels % 16 == 0 &&
         (l.groups == 1 || (per_group_in == 1 && l.out_channels == l.groups));
}

// A pooling layer's output goes to nChw16c when its pooling runs in another layout (after
// resnet50's 7x7 stem, NHWC) and every reader is a convolution that reads nChw16c
// (blocked_conv): one reorder here instead of one in each reader (resnet50's layer1 has two,
// its first 1x1 and its downsample).
bool StepBuilder::readers_blocked(int layer, int channels) const {
  if (!flow_ || batch_ == 1 || channels % 16 != 0) return false;
  int readers = 0;
  for (size_t i = 0; i < m_.plan_.layers.size(); ++i) {
    for (int source : m_.plan_.layers[i].sources) {
      if (source != layer) continue;
      if (!blocked_conv(static_cast<int>(i))) return false;
      ++readers;
    }
  }
  return readers > 1;
}

Status StepBuilder::conv(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const model::Window& w = l.window;
  const int groups = s.group_slice.count, per_group_in = in.in.channels / l.groups;
  const int cin = groups * per_group_in, cout = s.out_slice.count;
  SERF_ASSIGN_OR_RETURN(
      const model::Tensor* weights,
      tensor(l.name + ".weight", {l.out_channels, per_group_in, w.kernel_h, w.kernel_w}));
  SERF_ASSIGN_OR_RETURN(const model::Tensor* bias, tensor(l.name + ".bias", {l.out_channels}));
  const dnnl::memory::dims dst_dims = nchw(cout, in.out.height, in.out.width);
  Operand src = read(s, 0, nchw(cin, in.in.height, in.in.width), true, out);
  const bool grouped = l.groups > 1;
  const dnnl::memory::dims wdims =
      grouped ? dnnl::memory::dims{groups, cout / groups, per_group_in, w.kernel_h, w.kernel_w}
              : dnnl::memory::dims{cout, cin, w.kernel_h, w.kernel_w};
  const md_t plain_w(wdims, dt::f32, grouped ? tag::goihw : tag::oihw);
  const md_t bias_md({cout}, dt::f32, tag::a);
  // A residual accumulation needs the primitive's output in the residual's layout (K = 1).
  int residual = -1;  // the add's other operand, whose buffer this step accumulates into
  if (s.accumulate) {
    const std::vector<int>& sources = m_.plan_.layers[static_cast<size_t>(s.add_layer)].sources;
    residual = sources[0] == s.layer ? sources[1] : sources[0];
  }
  // Winograd (F(4x4, 3x3): 2.25x fewer multiplies) for ungrouped 3x3 stride-1 convolutions of
  // 16 or more input channels where oneDNN implements it (AVX-512); direct otherwise (vgg16's
  // first layer, 3 channels, took 4.5 ms with Winograd against 2.0 direct). engine_bench (T = 1,
  // load ~10): vgg16 175-182 -> 95-100 ms, resnet50's 3x3 convolutions 16-19 -> 11.1-11.3 ms.
  const bool winograd = !grouped && cin >= 16 && w.kernel_h == 3 && w.kernel_w == 3 &&
                        w.stride_h == 1 && w.stride_w == 1 && w.dilation_h == 1 &&
                        w.dilation_w == 1;
  const bool blocked = blocked_conv(s.layer);
  auto primitive = [&](tag activations) {
    const md_t src_md(src.md.dims(), dt::f32, cin % 16 == 0 ? activations : tag::any);
    const md_t dst_md = flow_ && residual >= 0 ? stored_[static_cast<size_t>(residual)]
                                               : md_t(dst_dims, dt::f32, activations);
    return conv_primitive(w, winograd, src_md, md_t(wdims, dt::f32, tag::any), bias_md, dst_md,
                          attributes(s), m_.engine_);
  };
  conv_pd pd;
  if (blocked) {
    pd = primitive(tag::nChw16c);
    if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) pd = conv_pd();
  }
  if (!pd) pd = primitive(tag::any);
  src = adapt(src, pd.src_desc(), out);
  const Operand target = write(s, flow_ ? pd.dst_desc() : canon(dst_dims));
  Operand dst = target;
  if (pd.dst_desc() != target.md) {
    dst = staging(pd.dst_desc());
    if (s.accumulate) reorder(target, dst, out);  // the residual, for the sum post-op
  }
  Call& c = call(dnnl::convolution_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  c.constants = {{DNNL_ARG_WEIGHTS, pack(*weights, s.out_slice.offset, plain_w, pd.weights_desc())},
                 {DNNL_ARG_BIAS, pack(*bias, s.out_slice.offset, bias_md, pd.bias_desc())}};
  if (dst.space != target.space || dst.buffer != target.buffer) reorder(dst, target, out);
  return Status::Ok();
}

Status StepBuilder::fully_connected(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const int64_t n_in = in.in.elements();
  const int cout = s.out_slice.count;
  SERF_ASSIGN_OR_RETURN(const model::Tensor* weights,
                        tensor(l.name + ".weight", {l.out_channels, n_in}));
  SERF_ASSIGN_OR_RETURN(const model::Tensor* bias, tensor(l.name + ".bias", {l.out_channels}));
  // Plain rows in and out (K > 1, b > 1: through staging, the tensors being channel-major).
  const Operand src = adapt(read(s, 0, {batch_, n_in}, false, out), plain({batch_, n_in}), out);
  const Operand target = write(s, canon({batch_, cout}));
  const Operand dst = target.md == plain({batch_, cout}) ? target : staging(plain({batch_, cout}));
  const md_t plain_w({cout, n_in}, dt::f32, tag::oi);
  const md_t bias_md({cout}, dt::f32, tag::a);
  const bool relu_only =
      s.activation_layer < 0 ||
      m_.plan_.spec.layers[static_cast<size_t>(s.activation_layer)].kind == LayerKind::kRelu;
  if (gemv_supported() && relu_only) {
    // gemm_f32 on the rows packed into panels (engine/cpu/gemv.h), at every b: the panels do not
    // depend on b, so a node's batch sizes share one copy. At b > 1 it beat oneDNN's inner
    // product (x64:gemm:jit, "oi") on ranking_mlp at b = 8: 52 against 69 ms (T = 1), 108
    // against 209 ms (T = 2), bench/batch_roofline on a heavily loaded machine (before panels);
    // at b = 1 it streams faster than the plain-row GEMV (gemv.cc, kPanelStreams).
    out->gemv = true;
    out->gemv_after = out->calls.size();
    GemvCall& g = out->gemv_call;
    g.weights = pack_panels(*weights, s.out_slice.offset, cout);
    g.bias = static_cast<const float*>(
        pack(*bias, s.out_slice.offset, bias_md, bias_md).get_data_handle());
    g.x = src;
    g.y = dst;
    g.rows = cout;
    g.cols = n_in;
    g.batch = batch_;
    g.relu = s.activation_layer >= 0;
    if (dst.space != target.space) reorder(dst, target, out);  // after the kernel (gemv_after)
    return Status::Ok();
  }
  // Plain [out, in] weights ("oi"): oneDNN's jit GEMV for "oi" is its fastest batch-1 kernel
  // (the brgemm one it picks for `any` streams the weights at half the speed; bench/fc_bench).
  // With b > 1 the same primitive is one GEMM over the b rows, reading the weights once.
  const dnnl::inner_product_forward::desc d(kForward, src.md, plain_w, bias_md, dst.md);
  const dnnl::inner_product_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  Call& c = call(dnnl::inner_product_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  c.constants = {{DNNL_ARG_WEIGHTS, pack(*weights, s.out_slice.offset, plain_w, pd.weights_desc())},
                 {DNNL_ARG_BIAS, pack(*bias, s.out_slice.offset, bias_md, pd.bias_desc())}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

Status StepBuilder::activation(const LayerStep& s, CpuStep* out) {
  // Element-wise: any layout (K = 1), or this rank's part viewed as a flat vector.
  const dnnl::memory::dims dims = flow_ ? stored(s, 0).dims() : dnnl::memory::dims{1, s.elements};
  const Operand src = read(s, 0, dims, true, out);
  const Operand target = write(s, src.md);
  Operand from = src;  // the second of two algorithms (hardsigmoid) runs in place on the output
  for (const Eltwise& e : eltwise_of(spec(s))) {
    const dnnl::eltwise_forward::desc d(kForward, e.alg, src.md, e.alpha, e.beta);
    const dnnl::eltwise_forward::primitive_desc pd(d, attributes(s), m_.engine_);
    Call& c = call(dnnl::eltwise_forward(pd), pd, out);
    c.operands = {{DNNL_ARG_SRC, from}, {DNNL_ARG_DST, target}};
    from = target;
  }
  return Status::Ok();
}

Status StepBuilder::batchnorm(const LayerStep& s, CpuStep* out) {
  const model::LayerSpec& l = spec(s);
  const model::LayerInfo& in = info(s);
  const int channels = s.channels.count, all = in.in.channels;
  std::vector<const model::Tensor*> params;
  for (const char* suffix : {".weight", ".bias", ".running_mean", ".running_var"}) {
    SERF_ASSIGN_OR_RETURN(const model::Tensor* t, tensor(l.name + suffix, {all}));
    params.push_back(t);
  }
  auto slice = [&](const model::Tensor* t) {
    return std::vector<float>(t->data.begin() + s.channels.offset,
                              t->data.begin() + s.channels.offset + channels);
  };
  Operand src = read(s, 0, nchw(channels, in.in.height, in.in.width), true, out);
  if (!flow_) src = adapt(src, plain(src.md.dims()), out);  // plain staging, as in pool()
  const auto flags = dnnl::normalization_flags::use_global_stats |
                     dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const dnnl::batch_normalization_forward::desc d(kForward, src.md, l.epsilon, flags);
  const dnnl::batch_normalization_forward::primitive_desc pd(d, attributes(s), m_.engine_);
  const Operand target = write(s, flow_ ? pd.dst_desc() : canon(src.md.dims()));
  const Operand dst = target.md == pd.dst_desc() ? target : staging(pd.dst_desc());
  Call& c = call(dnnl::batch_normalization_forward(pd), pd, out);
  c.operands = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  c.constants = {{DNNL_ARG_SCALE, pack_values(slice(params[0]))},
                 {DNNL_ARG_SHIFT, pack_values(slice(params[1]))},
                 {DNNL_ARG_MEAN, pack_values(slice(params[2]))},
                 {DNNL_ARG_VARIANCE, pack_values(slice(params[3]))}};
  if (dst.space != target.space) reorder(dst, target, out);
  return Status::Ok();
}

int CpuPreparedModel::activation_reorders() const {
  auto count = [](const std::vector<Call>& calls) {
    return static_cast<int>(std::count_if(calls.begin(), calls.end(), [](const Call& c) {
      return c.prim.get_kind() == dnnl::primitive::kind::reorder;
    }));
  };
  int n = count(output_calls);
  for (const CpuStep& step : steps_) n += count(step.calls);
  return n;
}

Status StepBuilder::finish_output() {
  staging_used_ = 0;
  const size_t last = m_.plan_.layers.size() - 1;
  const TensorRef& ref = m_.layout_.output;
  const model::Shape out = m_.plan_.output();
  Operand result{Space::kActivation, ref.buffer, 0,
                 plain(nchw(out.channels, out.height, out.width))};
  if (!is_plain(stored_[last])) {  // blocked (K = 1), or channel-major (K > 1, b > 1)
    result.md = stored_[last];
    CpuStep step;
    const Operand flat = staging(plain(stored_[last].dims()));
    reorder(result, flat, &step);
    m_.output_calls = std::move(step.calls);
    result = flat;
  }
  m_.output = result;
  return Status::Ok();
}

}  // namespace serf::engine::cpu
