// Constant folding: nodes whose inputs are all constants are evaluated at import. Exporters emit
// such subgraphs to compute a Reshape's target from the input's shape (Shape -> Gather ->
// Unsqueeze -> Concat); Shape of an activation is a constant here because every dimension but
// the batch is fixed (the batch counts as 1: a request is one image).
#include <algorithm>
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

const std::set<std::string> kFoldable = {
    "Constant", "Identity", "Shape",           "Gather",   "Unsqueeze", "Squeeze",
    "Concat",   "Cast",     "Slice",           "Mul",      "Div",       "Add",
    "Sub",      "Reshape",  "ConstantOfShape", "Transpose"};

bool is_int(int dtype) {
  return dtype == onnx::TensorProto_DataType_INT64 || dtype == onnx::TensorProto_DataType_INT32;
}

Value int_vector(const std::vector<int64_t>& v) {
  Value out;
  out.constant = true;
  out.dtype = onnx::TensorProto_DataType_INT64;
  out.dims = {static_cast<int64_t>(v.size())};
  out.data.assign(v.begin(), v.end());
  return out;
}

// Normalises a possibly negative axis of a rank-`rank` tensor.
StatusOr<int64_t> axis_of(int64_t axis, int64_t rank, const std::string& where) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return InvalidArgument(where + ": axis out of range for a rank-" + std::to_string(rank) +
                           " constant");
  }
  return axis;
}

// One constant-folding step: the node, its attributes and its inputs (nullptr where omitted).
struct Fold {
  const Importer& importer;
  const onnx::NodeProto& node;
  const std::string& where;
  const Attributes& attributes;
  const std::vector<const Value*>& in;
  const Value* arg(size_t k) const { return k < in.size() ? in[k] : nullptr; }
  Status unsupported(const std::string& what) const { return importer.unsupported(node, what); }
};

Value constant_value() {
  Value out;
  out.constant = true;
  return out;
}

StatusOr<Value> fold_constant(const Fold& f) {
  const Attributes& a = f.attributes;
  SERF_RETURN_IF_ERROR(a.only({"value", "value_float", "value_floats", "value_int", "value_ints"}));
  Value out = constant_value();
  if (const onnx::AttributeProto* t = a.find("value")) {
    SERF_ASSIGN_OR_RETURN(out, constant_from(t->t(), f.where));
  } else if (const onnx::AttributeProto* x = a.find("value_float")) {
    out.dims = {};
    out.data = {x->f()};
  } else if (const onnx::AttributeProto* xs = a.find("value_floats")) {
    out.dims = {xs->floats_size()};
    out.data.assign(xs->floats().begin(), xs->floats().end());
  } else if (const onnx::AttributeProto* i = a.find("value_int")) {
    out = int_vector({i->i()});
    out.dims = {};
  } else if (const onnx::AttributeProto* is = a.find("value_ints")) {
    out = int_vector(std::vector<int64_t>(is->ints().begin(), is->ints().end()));
  } else {
    return f.unsupported("no value");
  }
  out.origin.clear();
  return out;
}

StatusOr<Value> fold_shape(const Fold& f) {
  SERF_RETURN_IF_ERROR(f.attributes.only({"start", "end"}));
  const Value& x = *f.arg(0);
  std::vector<int64_t> dims = x.constant ? x.dims : onnx_dims_of(x);
  SERF_ASSIGN_OR_RETURN(int64_t start, f.attributes.integer("start", 0));
  SERF_ASSIGN_OR_RETURN(int64_t end,
                        f.attributes.integer("end", static_cast<int64_t>(dims.size())));
  const int64_t n = static_cast<int64_t>(dims.size());
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return int_vector(std::vector<int64_t>(dims.begin() + start, dims.begin() + end));
}

StatusOr<Value> fold_gather(const Fold& f) {
  SERF_RETURN_IF_ERROR(f.attributes.only({"axis"}));
  SERF_ASSIGN_OR_RETURN(int64_t axis, f.attributes.integer("axis", 0));
  const Value& data = *f.arg(0);
  const Value& idx = *f.arg(1);
  if (data.dims.size() != 1 || axis != 0) {
    return f.unsupported("constant folding of Gather beyond a 1-D vector");
  }
  Value out = constant_value();
  out.dtype = data.dtype;
  out.dims = idx.dims;
  for (double d : idx.data) {
    int64_t i = static_cast<int64_t>(d);
    if (i < 0) i += data.dims[0];
    if (i < 0 || i >= data.dims[0]) return f.unsupported("index out of range");
    out.data.push_back(data.data[static_cast<size_t>(i)]);
  }
  return out;
}

// Unsqueeze and Squeeze: the axes are an attribute before opset 13, an input from it on.
StatusOr<Value> fold_squeeze(const Fold& f, bool unsqueeze) {
  std::vector<int64_t> axes;
  if (f.importer.opset() < 13) {
    SERF_RETURN_IF_ERROR(f.attributes.only({"axes"}));
    SERF_ASSIGN_OR_RETURN(axes, f.attributes.integers("axes", {}));
  } else {
    SERF_RETURN_IF_ERROR(f.attributes.only({}));
    if (f.arg(1) != nullptr) axes = ints_of(*f.arg(1));
  }
  Value out = *f.arg(0);
  out.origin.clear();
  std::vector<int64_t> dims;
  if (unsqueeze) {
    const int64_t rank = static_cast<int64_t>(out.dims.size() + axes.size());
    size_t next = 0;
    for (int64_t d = 0; d < rank; ++d) {
      bool inserted = false;
      for (int64_t ax : axes) inserted = inserted || (ax < 0 ? ax + rank : ax) == d;
      if (inserted) {
        dims.push_back(1);
      } else if (next < out.dims.size()) {
        dims.push_back(out.dims[next++]);
      }
    }
  } else {
    const int64_t rank = static_cast<int64_t>(out.dims.size());
    for (int64_t d = 0; d < rank; ++d) {
      bool removed = axes.empty() && out.dims[static_cast<size_t>(d)] == 1;
      for (int64_t ax : axes) removed = removed || (ax < 0 ? ax + rank : ax) == d;
      if (!removed) dims.push_back(out.dims[static_cast<size_t>(d)]);
    }
  }
  out.dims = dims;
  return out;
}

StatusOr<Value> fold_concat(const Fold& f) {
  SERF_RETURN_IF_ERROR(f.attributes.only({"axis"}));
  SERF_ASSIGN_OR_RETURN(int64_t axis, f.attributes.integer("axis", 0));
  Value out = constant_value();
  out.dtype = f.arg(0)->dtype;
  int64_t n = 0;
  for (const Value* v : f.in) {
    if (v == nullptr) continue;
    SERF_ASSIGN_OR_RETURN(int64_t ax, axis_of(axis, static_cast<int64_t>(v->dims.size()), f.where));
    if (v->dims.size() != 1 || ax != 0) {
      return f.unsupported("constant folding of Concat beyond 1-D vectors");
    }
    out.data.insert(out.data.end(), v->data.begin(), v->data.end());
    n += v->dims[0];
  }
  out.dims = {n};
  return out;
}

StatusOr<Value> fold_cast(const Fold& f) {
  SERF_RETURN_IF_ERROR(f.attributes.only({"to"}));
  SERF_ASSIGN_OR_RETURN(int64_t to, f.attributes.integer("to", 0));
  Value out = *f.arg(0);
  out.origin.clear();
  out.dtype = static_cast<int>(to);
  if (is_int(out.dtype)) {
    for (double& d : out.data) d = std::trunc(d);
  } else if (out.dtype == onnx::TensorProto_DataType_FLOAT) {
    for (double& d : out.data) d = static_cast<float>(d);
  } else {
    return f.unsupported("Cast to " + dtype_name(out.dtype) + " (only FLOAT, INT64, INT32)");
  }
  return out;
}

// The indices a Slice keeps along an axis of `dim` (ONNX's clamping; a negative step walks back).
std::vector<int64_t> slice_indices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  std::vector<int64_t> out;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    for (int64_t i = start; i < end; i += step) out.push_back(i);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    for (int64_t i = start; i > end; i += step) out.push_back(i);
  }
  return out;
}

// The elements of `data` at indices keep[0] x keep[1] x ... (row-major): a slice of any axes.
Value gather_axes(const Value& data, const std::vector<std::vector<int64_t>>& keep) {
  Value out = constant_value();
  out.dtype = data.dtype;
  for (const auto& k : keep) out.dims.push_back(static_cast<int64_t>(k.size()));
  const int64_t n = out.elements();
  std::vector<int64_t> at(keep.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < keep.size(); ++d)
      src = src * data.dims[d] + keep[d][static_cast<size_t>(at[d])];
    out.data.push_back(data.data[static_cast<size_t>(src)]);
    for (size_t d = keep.size(); d-- > 0;) {  // the next multi-index
      if (++at[d] < out.dims[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

// Slice: starts/ends/axes are attributes before opset 10, inputs (with steps) from it on. Any
// axes and steps: torch.onnx reverses a Pad's [begin, end] pairs with a step of -1.
StatusOr<Value> fold_slice(const Fold& f) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (f.importer.opset() < 10) {
    SERF_RETURN_IF_ERROR(f.attributes.only({"starts", "ends", "axes"}));
    SERF_ASSIGN_OR_RETURN(starts, f.attributes.integers("starts", {}));
    SERF_ASSIGN_OR_RETURN(ends, f.attributes.integers("ends", {}));
    SERF_ASSIGN_OR_RETURN(axes, f.attributes.integers("axes", {}));
  } else {
    SERF_RETURN_IF_ERROR(f.attributes.only({}));
    if (f.arg(1) == nullptr || f.arg(2) == nullptr) return f.unsupported("no starts or ends");
    starts = ints_of(*f.arg(1));
    ends = ints_of(*f.arg(2));
    if (f.arg(3) != nullptr) axes = ints_of(*f.arg(3));
    if (f.arg(4) != nullptr) steps = ints_of(*f.arg(4));
  }
  const Value& data = *f.arg(0);
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  for (int64_t k = static_cast<int64_t>(axes.size()); k < static_cast<int64_t>(starts.size());
       ++k) {
    axes.push_back(k);  // ONNX's default axes: 0, 1, ...
  }
  steps.resize(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return f.unsupported("starts, ends, axes and steps of different lengths");
  }
  std::vector<std::vector<int64_t>> keep;
  for (int64_t d = 0; d < rank; ++d)
    keep.push_back(slice_indices(data.dims[d], 0, data.dims[d], 1));
  for (size_t k = 0; k < starts.size(); ++k) {
    SERF_ASSIGN_OR_RETURN(int64_t axis, axis_of(axes[k], rank, f.where));
    if (steps[k] == 0) return f.unsupported("step 0");
    keep[static_cast<size_t>(axis)] =
        slice_indices(data.dims[static_cast<size_t>(axis)], starts[k], ends[k], steps[k]);
  }
  return gather_axes(data, keep);
}

// Transpose of a constant (torch.onnx's Pad subgraph transposes its [n, 2] pairs).
StatusOr<Value> fold_transpose(const Fold& f) {
  SERF_RETURN_IF_ERROR(f.attributes.only({"perm"}));
  const Value& data = *f.arg(0);
  const size_t rank = data.dims.size();
  std::vector<int64_t> reversed;
  for (size_t d = rank; d-- > 0;) reversed.push_back(static_cast<int64_t>(d));
  SERF_ASSIGN_OR_RETURN(std::vector<int64_t> perm, f.attributes.integers("perm", reversed));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(rank);
  for (size_t d = 0; d < rank; ++d) identity[d] = static_cast<int64_t>(d);
  if (sorted != identity)
    return f.unsupported("perm " + dims_str(perm) + " of a rank-" + std::to_string(rank) +
                         " constant");
  Value out = constant_value();
  out.dtype = data.dtype;
  for (int64_t p : perm) out.dims.push_back(data.dims[static_cast<size_t>(p)]);
  // Output element (i_0, ..., i_r-1) is input element with i_k at axis perm[k].
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * data.dims[d];
  const int64_t n = out.elements();
  std::vector<int64_t> at(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t k = 0; k < rank; ++k) src += at[k] * stride[static_cast<size_t>(perm[k])];
    out.data.push_back(data.data[static_cast<size_t>(src)]);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < out.dims[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

// Mul, Div, Add, Sub of equal shapes or with a scalar; integer division truncates.
StatusOr<Value> fold_arithmetic(const Fold& f, const std::string& op) {
  SERF_RETURN_IF_ERROR(f.attributes.only({}));
  const Value& x = *f.arg(0);
  const Value& y = *f.arg(1);
  if (x.elements() != y.elements() && x.elements() != 1 && y.elements() != 1) {
    return f.unsupported("constant folding with broadcasting beyond scalars");
  }
  if (x.data.empty() || y.data.empty()) return f.unsupported("an empty constant");
  Value out = x.elements() >= y.elements() ? x : y;
  out.origin.clear();
  const bool ints = is_int(x.dtype) && is_int(y.dtype);
  for (size_t i = 0; i < out.data.size(); ++i) {
    const double p = x.data[x.data.size() == 1 ? 0 : i], q = y.data[y.data.size() == 1 ? 0 : i];
    double r = op == "Mul" ? p * q : op == "Add" ? p + q : op == "Sub" ? p - q : 0.0;
    if (op == "Div") {
      if (q == 0.0) return f.unsupported("division by zero in a constant");
      r = ints ? std::trunc(p / q) : p / q;
    }
    out.data[i] = ints ? r : static_cast<float>(r);
  }
  return out;
}

StatusOr<Value> fold_reshape(const Fold& f) {
  Value out = *f.arg(0);
  out.origin.clear();
  std::vector<int64_t> dims = ints_of(*f.arg(1));
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0 && k < out.dims.size()) dims[k] = out.dims[k];
    if (dims[k] == -1) {
      infer = static_cast<int64_t>(k);
    } else {
      known *= dims[k];
    }
  }
  if (infer >= 0 && known > 0) dims[static_cast<size_t>(infer)] = out.elements() / known;
  out.dims = dims;
  if (out.elements() != static_cast<int64_t>(out.data.size())) {
    return f.unsupported("a constant reshaped to a different number of elements");
  }
  return out;
}

StatusOr<Value> fold_constant_of_shape(const Fold& f) {
  SERF_RETURN_IF_ERROR(f.attributes.only({"value"}));
  double fill = 0.0;
  Value out = constant_value();
  out.dtype = onnx::TensorProto_DataType_FLOAT;
  if (const onnx::AttributeProto* t = f.attributes.find("value")) {
    SERF_ASSIGN_OR_RETURN(Value v, constant_from(t->t(), f.where));
    if (v.data.size() != 1) return f.unsupported("value must hold one element");
    fill = v.data[0];
    out.dtype = v.dtype;
  }
  out.dims = ints_of(*f.arg(0));
  for (int64_t d : out.dims) {
    if (d < 0 || d > (1 << 24)) return f.unsupported("shape " + dims_str(out.dims));
  }
  if (out.elements() > (1 << 24)) return f.unsupported("constant too large");
  out.data.assign(static_cast<size_t>(out.elements()), fill);
  return out;
}

StatusOr<Value> fold_op(const Fold& f) {
  const std::string& op = f.node.op_type();
  if (op == "Constant") return fold_constant(f);
  if (op == "Identity") return *f.arg(0);
  if (op == "Shape") return fold_shape(f);
  if (op == "Gather") return fold_gather(f);
  if (op == "Unsqueeze" || op == "Squeeze") return fold_squeeze(f, op == "Unsqueeze");
  if (op == "Concat") return fold_concat(f);
  if (op == "Cast") return fold_cast(f);
  if (op == "Slice") return fold_slice(f);
  if (op == "Transpose") return fold_transpose(f);
  if (op == "Mul" || op == "Div" || op == "Add" || op == "Sub") return fold_arithmetic(f, op);
  if (op == "Reshape") return fold_reshape(f);
  if (op == "ConstantOfShape") return fold_constant_of_shape(f);
  return f.unsupported("constant folding of " + op + " is not supported");
}

}  // namespace

bool Importer::foldable(const onnx::NodeProto& node) const {
  if (kFoldable.count(node.op_type()) == 0) return false;
  for (int k = 0; k < node.input_size(); ++k) {
    if (node.input(k).empty()) continue;
    auto it = values_.find(node.input(k));
    if (it == values_.end()) return false;
    if (!it->second.constant && !(node.op_type() == "Shape" && k == 0)) return false;
  }
  return true;
}

Status Importer::fold(const onnx::NodeProto& node) {
  const std::string w = where(node);
  const Attributes a(node, w);
  std::vector<const Value*> in;
  for (int k = 0; k < node.input_size(); ++k) {
    if (node.input(k).empty()) {
      in.push_back(nullptr);
      continue;
    }
    SERF_ASSIGN_OR_RETURN(const Value* v, value(node, k));
    if (v->constant && !is_int(v->dtype) && v->dtype != onnx::TensorProto_DataType_FLOAT) {
      return unsupported(node, "constant of type " + dtype_name(v->dtype) +
                                   " (constants are FLOAT or INT64/INT32)");
    }
    in.push_back(v);
  }
  SERF_ASSIGN_OR_RETURN(Value out, fold_op(Fold{*this, node, w, a, in}));
  out.constant = true;
  set_constant(node.output(0), std::move(out));
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
