// ONNX import: read the file with libonnx's protobuf classes, check the header (opset, the one
// float32 input with a fixed shape but for the batch), order the nodes that lead to the output
// (cycles and dangling inputs are errors), fold constant subgraphs and translate the rest
// operator by operator (onnx_ops.cc) into a spec whose shapes are checked as it grows.
#include "model/onnx_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "onnx_importer.h"

namespace serf::model {

namespace onnx_import {

std::string Importer::where(const onnx::NodeProto& node) {
  if (!node.name().empty()) return "node '" + node.name() + "' (" + node.op_type() + ")";
  // onnx.helper and some exporters leave names empty: the node is named by what it writes.
  return "unnamed node writing '" + (node.output_size() > 0 ? node.output(0) : std::string()) +
         "' (" + node.op_type() + ")";
}

std::string Importer::label(const onnx::NodeProto& node) {
  if (!node.name().empty() || node.output_size() == 0) return node.name();
  return node.output(0);
}

Status Importer::unsupported(const onnx::NodeProto& node, const std::string& what) const {
  return InvalidArgument(where(node) + ": " + what);
}

bool Importer::has_input(const onnx::NodeProto& node, int k) const {
  return k < node.input_size() && !node.input(k).empty();
}

StatusOr<const Value*> Importer::value(const onnx::NodeProto& node, int k) const {
  if (!has_input(node, k)) {
    return InvalidArgument(where(node) + ": input " + std::to_string(k) + " is missing");
  }
  auto it = values_.find(node.input(k));
  if (it == values_.end()) return Internal(where(node) + ": input '" + node.input(k) + "' unset");
  const Value& v = it->second;
  static const std::set<std::string> pad_readers = {"Conv", "AveragePool", "Identity", "Dropout",
                                                    "Pad"};
  if (v.padded() && (k != 0 || pad_readers.count(node.op_type()) == 0)) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) + "' is padded by Pad '" +
                           v.pad_node +
                           "', which is supported only where a Conv or an AveragePool reads it "
                           "(its zeros are folded into their padding)");
  }
  const bool shuffle_step = k == 0 && (node.op_type() == "Transpose" ||
                                       node.op_type() == "Reshape" || node.op_type() == "Shape");
  if (v.rank == 5 && !shuffle_step) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) + "' is the 5-D view " +
                           dims_str(onnx_dims_of(v)) + " of Reshape '" + v.view_node +
                           "', supported only as a channel shuffle (Reshape [N, C, H, W] to [N, "
                           "g, C/g, H, W], Transpose perm (0, 2, 1, 3, 4), Reshape back)");
  }
  static const std::set<std::string> view_readers = {"Squeeze", "Unsqueeze", "Identity", "Dropout",
                                                     "Shape"};
  if (v.rank == 3 && !v.constant && (k != 0 || view_readers.count(node.op_type()) == 0)) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) + "' is the view " +
                           dims_str(onnx_dims_of(v)) +
                           " between two Squeezes or Unsqueezes, which only another Squeeze or "
                           "Unsqueeze may read (to [N, C] or [N, C, 1, 1])");
  }
  if (v.ln_stage > 0 && !(k == 0 && node.op_type() == "Shape")) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) +
                           "' is a step of the LayerNorm pattern begun by ReduceMean '" +
                           v.ln_node + "', which only the pattern's next node may read");
  }
  if (v.gelu_stage > 0 && !(k == 0 && node.op_type() == "Shape")) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) +
                           "' is a step of the GELU pattern begun by Div '" + v.gelu_node +
                           "', which only the pattern's next node may read");
  }
  return &v;
}

StatusOr<const Value*> Importer::activation_input(const onnx::NodeProto& node, int k) const {
  SERF_ASSIGN_OR_RETURN(const Value* v, value(node, k));
  if (v->constant) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) +
                           "' is a constant where a tensor computed from the model's input is "
                           "expected");
  }
  return v;
}

StatusOr<const Value*> Importer::weight_input(const onnx::NodeProto& node, int k, int rank) const {
  SERF_ASSIGN_OR_RETURN(const Value* v, value(node, k));
  if (!v->constant) {
    return InvalidArgument(where(node) + ": input '" + node.input(k) +
                           "' must be a constant (an initializer): weights computed at run time "
                           "are not supported");
  }
  if (v->dtype != onnx::TensorProto_DataType_FLOAT) {
    return InvalidArgument(where(node) + ": weight '" + node.input(k) + "' has type " +
                           dtype_name(v->dtype) + " (only FLOAT, float32, is supported)");
  }
  if (rank >= 0 && static_cast<int>(v->dims.size()) != rank) {
    return InvalidArgument(where(node) + ": weight '" + node.input(k) + "' has " +
                           std::to_string(v->dims.size()) + " dims, expected " +
                           std::to_string(rank));
  }
  return v;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// PyTorch's scoped node names, "/layer1/layer1.0/relu_1/Relu", read as "layer1.0.relu_1": scope
// components that prefix the next are dropped, and the operator's when the module names it.
std::string scoped_name(const std::string& name, const std::string& op) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = name.find('/', start);
    const std::string part = name.substr(start, slash == std::string::npos ? slash : slash - start);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.empty()) return name;
  std::string suffix;
  if (lower(parts.back()).rfind(lower(op), 0) == 0) {
    suffix = lower(parts.back());
    parts.pop_back();
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i + 1 < parts.size() && parts[i + 1].rfind(parts[i] + ".", 0) == 0) continue;
    out += (out.empty() ? "" : ".") + parts[i];
  }
  if (!suffix.empty() && (out.empty() || lower(out).find(lower(op)) == std::string::npos)) {
    out += (out.empty() ? "" : ".") + suffix;
  }
  return out;
}

}  // namespace

std::string Importer::layer_name(const onnx::NodeProto& node, const std::string& weights_from) {
  std::string base = node.name().find('/') != std::string::npos
                         ? scoped_name(node.name(), node.op_type())
                         : node.name();
  const std::string suffix = ".weight";
  if (!weights_from.empty() && weights_from.rfind("onnx::", 0) != 0 &&
      weights_from.size() > suffix.size() &&
      weights_from.compare(weights_from.size() - suffix.size(), suffix.size(), suffix) == 0) {
    base = weights_from.substr(0, weights_from.size() - suffix.size());
  }
  std::string name;
  for (char c : base) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      name += c;
    } else if (!name.empty() && name.back() != '_') {
      name += '_';
    }
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  if (name.empty() || name == kModelInputName) {
    name = lower(node.op_type()) + "_" + std::to_string(layers_.size());
  }
  std::string unique = name;
  for (int k = 2; names_.count(unique) > 0; ++k) unique = name + "_" + std::to_string(k);
  names_.insert(unique);
  return unique;
}

void Importer::rename_layer(size_t index, const std::string& name) {
  LayerSpec& l = layers_[index];
  const std::string old = l.name;
  for (auto& [key, v] : values_) {
    if (!v.constant && v.tensor == old) v.tensor = name;
  }
  tensor_uses_[name] = tensor_uses_[old];
  tensor_uses_.erase(old);
  layer_of_.erase(old);
  layer_of_[name] = index;
  names_.erase(old);
  l.name = name;
}

Status Importer::add_layer(const onnx::NodeProto& node, LayerSpec layer,
                           const std::vector<const Value*>& inputs, int rank,
                           const std::string& weights_from, int output) {
  layer.name = layer_name(node, weights_from);
  std::vector<Shape> shapes;
  for (const Value* v : inputs) {
    layer.inputs.push_back(v->tensor);
    shapes.push_back(v->shape);
  }
  SERF_ASSIGN_OR_RETURN(LayerInfo info, infer_layer_shape(layer, shapes, where(node)));
  Value out;
  out.tensor = layer.name;
  out.shape = info.out;
  out.rank = rank;
  layer_of_[layer.name] = layers_.size();
  node_of_[layer.name] = where(node);
  layers_.push_back(std::move(layer));
  tensor_uses_[out.tensor] += uses_[node.output(output)];
  values_[node.output(output)] = std::move(out);
  return Status::Ok();
}

void Importer::alias(const onnx::NodeProto& node, int out, const Value& v) {
  ++dropped;
  if (!v.constant) tensor_uses_[v.tensor] += uses_[node.output(out)];
  values_[node.output(out)] = v;
}

void Importer::set_constant(const std::string& name, Value v) {
  v.constant = true;
  values_[name] = std::move(v);
}

LayerSpec* Importer::sole_writer(const Value& v, LayerKind kind_a, LayerKind kind_b) {
  if (v.constant || tensor_uses_[v.tensor] != 1) return nullptr;
  auto it = layer_of_.find(v.tensor);
  if (it == layer_of_.end()) return nullptr;
  LayerSpec& l = layers_[it->second];
  return l.kind == kind_a || l.kind == kind_b ? &l : nullptr;
}

Status Importer::check_header() {
  if (!model_.has_graph() || model_.ir_version() <= 0) {
    return InvalidArgument("not an ONNX model (no graph or no IR version)");
  }
  bool found = false;
  for (const onnx::OperatorSetIdProto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      found = true;
      opset_ = static_cast<int>(op.version());
    }
  }
  if (!found) return InvalidArgument("no opset for the default ONNX domain in opset_import");
  if (opset_ > kMaxOnnxOpset) {
    return InvalidArgument("opset " + std::to_string(opset_) +
                           " is newer than the newest "
                           "supported, " +
                           std::to_string(kMaxOnnxOpset) +
                           " (export with opset_version <= " + std::to_string(kMaxOnnxOpset) + ")");
  }
  if (opset_ < 7) {
    return InvalidArgument("opset " + std::to_string(opset_) +
                           " is older than the oldest supported, 7");
  }
  return Status::Ok();
}

Status Importer::read_initializers() {
  for (const onnx::TensorProto& t : model_.graph().initializer()) {
    SERF_ASSIGN_OR_RETURN(Value v, constant_from(t, "initializer '" + t.name() + "'"));
    values_[t.name()] = std::move(v);
  }
  return Status::Ok();
}

Status Importer::read_input() {
  const onnx::ValueInfoProto* input = nullptr;
  for (const onnx::ValueInfoProto& in : model_.graph().input()) {
    if (values_.count(in.name()) > 0) continue;  // an initializer listed as an input
    if (input != nullptr) {
      return InvalidArgument("the graph has more than one input ('" + input->name() + "', '" +
                             in.name() + "'); one image tensor is supported");
    }
    input = &in;
  }
  if (input == nullptr) return InvalidArgument("the graph has no input");
  const std::string what = "input '" + input->name() + "'";
  if (!input->type().has_tensor_type()) return InvalidArgument(what + " is not a tensor");
  const onnx::TypeProto_Tensor& type = input->type().tensor_type();
  if (type.elem_type() != onnx::TensorProto_DataType_FLOAT) {
    return InvalidArgument(what + " has type " + dtype_name(type.elem_type()) +
                           " (only FLOAT, float32, is supported)");
  }
  const int rank = type.shape().dim_size();
  if (!type.has_shape() || (rank != 4 && rank != 2)) {
    return InvalidArgument(what + " has rank " + std::to_string(rank) +
                           " (supported: [N, C, H, W] images and [N, F] vectors)");
  }
  std::vector<int> dims;
  for (int k = 0; k < rank; ++k) {
    const onnx::TensorShapeProto_Dimension& d = type.shape().dim(k);
    if (k == 0) {
      if (d.has_dim_value() && d.dim_value() != 1) {
        return InvalidArgument(what + " has batch dimension " + std::to_string(d.dim_value()) +
                               " (a request is one image: 1, or a symbolic batch)");
      }
      continue;
    }
    if (!d.has_dim_value() || d.dim_value() <= 0 || d.dim_value() > (1 << 30)) {
      return InvalidArgument(what + ": dimension " + std::to_string(k) + " is dynamic ('" +
                             d.dim_param() +
                             "'); only the batch dimension may be (export with a "
                             "fixed input size)");
    }
    dims.push_back(static_cast<int>(d.dim_value()));
  }
  input_shape_ = rank == 4 ? Shape{dims[0], dims[1], dims[2]} : Shape{dims[0], 1, 1};
  Value v;
  v.tensor = kModelInputName;
  v.shape = input_shape_;
  v.rank = rank;
  tensor_uses_[v.tensor] += uses_[input->name()];
  values_[input->name()] = std::move(v);
  return Status::Ok();
}

StatusOr<std::vector<const onnx::NodeProto*>> Importer::order_nodes() {
  const onnx::GraphProto& g = model_.graph();
  std::map<std::string, int> producer;  // value -> node index
  for (int n = 0; n < g.node_size(); ++n) {
    for (const std::string& out : g.node(n).output()) {
      if (!out.empty()) producer[out] = n;
    }
  }
  // The nodes the output depends on (others are dead code: dropped).
  std::vector<char> live(static_cast<size_t>(g.node_size()), 0);
  std::vector<std::string> pending;
  for (const onnx::ValueInfoProto& out : g.output()) pending.push_back(out.name());
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    auto it = producer.find(name);
    if (it == producer.end() || live[static_cast<size_t>(it->second)]) continue;
    live[static_cast<size_t>(it->second)] = 1;
    for (const std::string& in : g.node(it->second).input()) {
      if (!in.empty()) pending.push_back(in);
    }
  }
  std::set<std::string> inputs;
  for (const onnx::ValueInfoProto& in : g.input()) inputs.insert(in.name());
  std::vector<int> waiting(static_cast<size_t>(g.node_size()), 0);
  for (int n = 0; n < g.node_size(); ++n) {
    if (!live[static_cast<size_t>(n)]) continue;
    for (const std::string& in : g.node(n).input()) {
      if (in.empty()) continue;
      ++uses_[in];
      if (producer.count(in) > 0) {
        ++waiting[static_cast<size_t>(n)];
      } else if (values_.count(in) == 0 && inputs.count(in) == 0) {
        return InvalidArgument(where(g.node(n)) + ": input '" + in +
                               "' is produced by no node, initializer or graph input "
                               "(a dangling input)");
      }
    }
  }
  for (const onnx::ValueInfoProto& out : g.output()) ++uses_[out.name()];
  // Kahn's order, keeping the file's order among ready nodes.
  std::vector<const onnx::NodeProto*> order;
  std::vector<char> done(static_cast<size_t>(g.node_size()), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int n = 0; n < g.node_size(); ++n) {
      if (!live[static_cast<size_t>(n)] || done[static_cast<size_t>(n)] ||
          waiting[static_cast<size_t>(n)] > 0) {
        continue;
      }
      done[static_cast<size_t>(n)] = 1;
      progress = true;
      order.push_back(&g.node(n));
      for (const std::string& out : g.node(n).output()) {
        for (int m = 0; m < g.node_size(); ++m) {
          if (!live[static_cast<size_t>(m)]) continue;
          for (const std::string& in : g.node(m).input()) {
            if (!out.empty() && in == out) --waiting[static_cast<size_t>(m)];
          }
        }
      }
    }
  }
  for (int n = 0; n < g.node_size(); ++n) {
    if (live[static_cast<size_t>(n)] && !done[static_cast<size_t>(n)]) {
      return InvalidArgument(where(g.node(n)) +
                             ": the graph has a cycle through this node (no order computes its "
                             "inputs first)");
    }
  }
  return order;
}

StatusOr<OnnxImport> Importer::run(const std::string& name) {
  SERF_RETURN_IF_ERROR(check_header());
  SERF_RETURN_IF_ERROR(read_initializers());
  SERF_ASSIGN_OR_RETURN(std::vector<const onnx::NodeProto*> order, order_nodes());
  SERF_RETURN_IF_ERROR(read_input());
  SERF_RETURN_IF_ERROR(check_control_flow(order));
  for (const onnx::NodeProto* node : order) {
    if (!node->domain().empty() && node->domain() != "ai.onnx") {
      return unsupported(*node, "operator " + node->domain() + "::" + node->op_type() +
                                    " is not supported (only the default ONNX domain)");
    }
    for (int k = 1; k < node->output_size() && node->op_type() != "Split"; ++k) {
      if (!node->output(k).empty() && uses_[node->output(k)] > 0) {
        return unsupported(*node, "output " + std::to_string(k) + " ('" + node->output(k) +
                                      "') is read by the graph; only the first output is "
                                      "supported");
      }
    }
    if (foldable(*node)) {
      SERF_RETURN_IF_ERROR(fold(*node));
      ++folded_constants;
    } else {
      SERF_RETURN_IF_ERROR(translate(*node));
    }
    for (const std::string& in : node->input()) {  // this node's reads are done
      auto it = values_.find(in);
      if (!in.empty() && it != values_.end() && !it->second.constant) {
        --tensor_uses_[it->second.tensor];
      }
    }
  }
  OnnxImport out;
  out.nodes = static_cast<int>(order.size());
  SERF_RETURN_IF_ERROR(finish(name, &out));
  return out;
}

// If, Loop and Scan (torch.jit.script's control flow) carry subgraphs: refused before any other
// node, whatever computes their condition, with what to export instead.
Status Importer::check_control_flow(const std::vector<const onnx::NodeProto*>& order) const {
  for (const onnx::NodeProto* node : order) {
    for (const onnx::AttributeProto& a : node->attribute()) {
      if (a.has_g() || a.graphs_size() > 0) {
        return unsupported(*node, "control flow (the subgraph in attribute '" + a.name() +
                                      "') is not supported; export a traced module "
                                      "(torch.onnx.export of the nn.Module, not of a "
                                      "torch.jit.script one)");
      }
    }
  }
  return Status::Ok();
}

Status Importer::finish(const std::string& name, OnnxImport* out) {
  const onnx::GraphProto& g = model_.graph();
  if (g.output_size() != 1) {
    std::string names;
    for (const onnx::ValueInfoProto& o : g.output()) {
      names += (names.empty() ? "'" : ", '") + o.name() + "'";
    }
    return InvalidArgument("the graph has " + std::to_string(g.output_size()) + " outputs" +
                           (names.empty() ? std::string() : " (" + names + ")") +
                           "; one is supported (return one tensor from forward)");
  }
  const onnx::ValueInfoProto& output = g.output(0);
  if (output.type().has_tensor_type() &&
      output.type().tensor_type().elem_type() != onnx::TensorProto_DataType_FLOAT) {
    return InvalidArgument("output '" + output.name() + "' has type " +
                           dtype_name(output.type().tensor_type().elem_type()) +
                           " (only FLOAT, float32, is supported)");
  }
  auto it = values_.find(output.name());
  if (it != values_.end() && it->second.padded()) {
    return InvalidArgument("output '" + output.name() + "' is padded by Pad '" +
                           it->second.pad_node +
                           "', which is supported only where a Conv or an AveragePool reads it");
  }
  if (it != values_.end() && it->second.gelu_stage > 0) {
    return InvalidArgument(
        "output '" + output.name() + "' is a step of the GELU pattern begun by " + "Div '" +
        it->second.gelu_node + "', not its end (x * (1 + Erf(x / sqrt(2))) * 0.5)");
  }
  if (it != values_.end() && it->second.rank == 5) {
    return InvalidArgument("output '" + output.name() + "' is the 5-D view of Reshape '" +
                           it->second.view_node + "' (only a channel shuffle's, reshaped back)");
  }
  if (it == values_.end() || it->second.constant || it->second.tensor == kModelInputName) {
    return InvalidArgument("output '" + output.name() +
                           "' is not computed from the input by any supported layer");
  }
  // Keep the layers the output depends on (a tensor read only by Shape, say, is not needed).
  std::set<std::string> needed = {it->second.tensor};
  for (size_t k = layers_.size(); k-- > 0;) {
    if (needed.count(layers_[k].name) == 0) continue;
    for (const std::string& in : layers_[k].inputs) needed.insert(in);
  }
  ModelSpec& spec = out->spec;
  spec.name = name;
  spec.input = input_shape_;
  spec.description = "Imported from " + path_ + " (ONNX opset " + std::to_string(opset_) +
                     (model_.producer_name().empty()
                          ? std::string()
                          : ", " + model_.producer_name() + " " + model_.producer_version()) +
                     ")";
  for (LayerSpec& l : layers_) {
    if (needed.count(l.name) == 0) continue;
    // The spec runs a softmax only as the last layer: refused here with the node's name.
    if (!spec.layers.empty() && spec.layers.back().kind == LayerKind::kSoftmax) {
      return InvalidArgument(node_of_[spec.layers.back().name] +
                             ": a softmax read by other layers (only the model's last layer "
                             "may be a softmax)");
    }
    spec.layers.push_back(std::move(l));
  }
  if (spec.layers.back().name != it->second.tensor) {
    return Internal("the output layer is not the last one");
  }
  SERF_ASSIGN_OR_RETURN(ModelPlan plan, infer_shapes(spec));
  for (const TensorSpec& t : expected_tensors(plan)) {
    const Tensor* w = weights_.find(t.name);
    if (w == nullptr || w->shape != t.shape) {
      return Internal("tensor '" + t.name + "' was not written with the shape the spec needs");
    }
    out->weights.set(t.name, *w);
  }
  out->folded_batchnorms = folded_batchnorms;
  out->folded_constants = folded_constants;
  out->dropped = dropped;
  out->folded_pads = folded_pads;
  out->fused_gates = fused_gates;
  return Status::Ok();
}

}  // namespace onnx_import

StatusOr<OnnxImport> import_onnx(const std::string& path, const std::string& name) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) return InvalidArgument(path + ": permission denied");
    return NotFound(path + ": cannot open file (does it exist?)");
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgument(path + ": is a directory, not an ONNX file");
  if (!S_ISREG(st.st_mode))
    return InvalidArgument(path + ": not a regular file (an ONNX file is needed)");
  if (::access(path.c_str(), R_OK) != 0) return InvalidArgument(path + ": permission denied");
  if (st.st_size == 0) return InvalidArgument(path + ": empty file, not an ONNX model");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) {
    return InvalidArgument(path +
                           ": not an ONNX model, or a truncated one (its protobuf does "
                           "not parse)");
  }
  std::string model_name = name;
  if (model_name.empty()) model_name = model.graph().name();
  if (model_name.empty() || model_name == "torch_jit" || model_name == "main_graph") {
    const size_t slash = path.find_last_of('/');
    model_name = path.substr(slash == std::string::npos ? 0 : slash + 1);
    const size_t dot = model_name.rfind('.');
    if (dot != std::string::npos && dot > 0) model_name = model_name.substr(0, dot);
  }
  onnx_import::Importer importer(model, path);
  StatusOr<OnnxImport> result = importer.run(model_name);
  if (!result.ok()) return result.status().with_context(path);
  return result;
}

}  // namespace serf::model
