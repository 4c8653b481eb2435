// Constant folding: nodes whose inputs are all constants are evaluated at import. Exporters emit
// such subgraphs to compute a Reshape's target from the input's shape (Shape -> Gather ->
// Unsqueeze -> Concat); Shape of an activation is a constant here because every dimension but
// the batch is fixed (the batch counts as 1: a request is one image).
#include <cmath>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

namespace {

const std::set<std::string> kFoldable = {"Constant", "Identity", "Shape", "Gather", "Unsqueeze",
                                         "Squeeze", "Concat", "Cast", "Slice", "Mul", "Div",
                                         "Add", "Sub", "Reshape", "ConstantOfShape"};

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

std::vector<int64_t> as_ints(const Value& v) {
  return std::vector<int64_t>(v.data.begin(), v.data.end());
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
  const std::string& op = node.op_type();
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
  auto arg = [&](size_t k) -> const Value* { return k < in.size() ? in[k] : nullptr; };
  Value out;
  out.constant = true;
  if (op == "Constant") {
    SERF_RETURN_IF_ERROR(a.only({"value", "value_float", "value_floats", "value_int",
                                 "value_ints"}));
    if (const onnx::AttributeProto* t = a.find("value")) {
      SERF_ASSIGN_OR_RETURN(out, constant_from(t->t(), w));
    } else if (const onnx::AttributeProto* f = a.find("value_float")) {
      out.dims = {};
      out.data = {f->f()};
    } else if (const onnx::AttributeProto* fs = a.find("value_floats")) {
      out.dims = {fs->floats_size()};
      out.data.assign(fs->floats().begin(), fs->floats().end());
    } else if (const onnx::AttributeProto* i = a.find("value_int")) {
      out = int_vector({i->i()});
      out.dims = {};
    } else if (const onnx::AttributeProto* is = a.find("value_ints")) {
      out = int_vector(std::vector<int64_t>(is->ints().begin(), is->ints().end()));
    } else {
      return unsupported(node, "no value");
    }
    out.origin.clear();
  } else if (op == "Identity") {
    out = *arg(0);
  } else if (op == "Shape") {
    SERF_RETURN_IF_ERROR(a.only({"start", "end"}));
    const Value& x = *arg(0);
    std::vector<int64_t> dims = x.constant ? x.dims
                                : x.rank == 4 ? std::vector<int64_t>{1, x.shape.channels,
                                                                     x.shape.height, x.shape.width}
                                              : std::vector<int64_t>{1, x.shape.channels};
    SERF_ASSIGN_OR_RETURN(int64_t start, a.integer("start", 0));
    SERF_ASSIGN_OR_RETURN(int64_t end, a.integer("end", static_cast<int64_t>(dims.size())));
    const int64_t n = static_cast<int64_t>(dims.size());
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, start, n);
    out = int_vector(std::vector<int64_t>(dims.begin() + start, dims.begin() + end));
  } else if (op == "Gather") {
    SERF_RETURN_IF_ERROR(a.only({"axis"}));
    SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", 0));
    const Value& data = *arg(0);
    const Value& idx = *arg(1);
    if (data.dims.size() != 1 || axis != 0) {
      return unsupported(node, "constant folding of Gather beyond a 1-D vector");
    }
    out.dtype = data.dtype;
    out.dims = idx.dims;
    for (double d : idx.data) {
      int64_t i = static_cast<int64_t>(d);
      if (i < 0) i += data.dims[0];
      if (i < 0 || i >= data.dims[0]) return unsupported(node, "index out of range");
      out.data.push_back(data.data[static_cast<size_t>(i)]);
    }
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> axes;
    if (opset() < 13) {
      SERF_RETURN_IF_ERROR(a.only({"axes"}));
      SERF_ASSIGN_OR_RETURN(axes, a.integers("axes", {}));
    } else {
      SERF_RETURN_IF_ERROR(a.only({}));
      if (arg(1) != nullptr) axes = as_ints(*arg(1));
    }
    out = *arg(0);
    out.origin.clear();
    if (op == "Unsqueeze") {
      const int64_t rank = static_cast<int64_t>(out.dims.size() + axes.size());
      std::vector<int64_t> dims;
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
      out.dims = dims;
    } else {
      std::vector<int64_t> dims;
      const int64_t rank = static_cast<int64_t>(out.dims.size());
      for (int64_t d = 0; d < rank; ++d) {
        bool removed = axes.empty() && out.dims[static_cast<size_t>(d)] == 1;
        for (int64_t ax : axes) removed = removed || (ax < 0 ? ax + rank : ax) == d;
        if (!removed) dims.push_back(out.dims[static_cast<size_t>(d)]);
      }
      out.dims = dims;
    }
  } else if (op == "Concat") {
    SERF_RETURN_IF_ERROR(a.only({"axis"}));
    SERF_ASSIGN_OR_RETURN(int64_t axis, a.integer("axis", 0));
    out.dtype = arg(0)->dtype;
    int64_t n = 0;
    for (const Value* v : in) {
      if (v == nullptr) continue;
      SERF_ASSIGN_OR_RETURN(int64_t ax, axis_of(axis, static_cast<int64_t>(v->dims.size()), w));
      if (v->dims.size() != 1 || ax != 0) {
        return unsupported(node, "constant folding of Concat beyond 1-D vectors");
      }
      out.data.insert(out.data.end(), v->data.begin(), v->data.end());
      n += v->dims[0];
    }
    out.dims = {n};
  } else if (op == "Cast") {
    SERF_RETURN_IF_ERROR(a.only({"to"}));
    SERF_ASSIGN_OR_RETURN(int64_t to, a.integer("to", 0));
    out = *arg(0);
    out.origin.clear();
    out.dtype = static_cast<int>(to);
    if (is_int(out.dtype)) {
      for (double& d : out.data) d = std::trunc(d);
    } else if (out.dtype == onnx::TensorProto_DataType_FLOAT) {
      for (double& d : out.data) d = static_cast<float>(d);
    } else {
      return unsupported(node, "Cast to " + dtype_name(out.dtype) + " (only FLOAT, INT64, INT32)");
    }
  } else if (op == "Slice") {
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset() < 10) {
      SERF_RETURN_IF_ERROR(a.only({"starts", "ends", "axes"}));
      SERF_ASSIGN_OR_RETURN(starts, a.integers("starts", {}));
      SERF_ASSIGN_OR_RETURN(ends, a.integers("ends", {}));
      SERF_ASSIGN_OR_RETURN(axes, a.integers("axes", {0}));
    } else {
      SERF_RETURN_IF_ERROR(a.only({}));
      if (arg(1) == nullptr || arg(2) == nullptr) return unsupported(node, "no starts or ends");
      starts = as_ints(*arg(1));
      ends = as_ints(*arg(2));
      axes = arg(3) != nullptr ? as_ints(*arg(3)) : std::vector<int64_t>{0};
      if (arg(4) != nullptr) steps = as_ints(*arg(4));
    }
    const Value& data = *arg(0);
    if (data.dims.size() != 1 || starts.size() != 1 || ends.size() != 1 ||
        (axes.size() == 1 && axes[0] != 0 && axes[0] != -1) || (!steps.empty() && steps[0] != 1)) {
      return unsupported(node, "constant folding of Slice beyond a step-1 slice of a 1-D vector");
    }
    const int64_t n = data.dims[0];
    int64_t s = starts[0] < 0 ? starts[0] + n : starts[0];
    int64_t e = ends[0] < 0 ? ends[0] + n : ends[0];
    s = std::clamp<int64_t>(s, 0, n);
    e = std::clamp<int64_t>(e, s, n);
    out.dtype = data.dtype;
    out.data.assign(data.data.begin() + s, data.data.begin() + e);
    out.dims = {e - s};
  } else if (op == "Mul" || op == "Div" || op == "Add" || op == "Sub") {
    SERF_RETURN_IF_ERROR(a.only({}));
    const Value& x = *arg(0);
    const Value& y = *arg(1);
    if (x.elements() != y.elements() && x.elements() != 1 && y.elements() != 1) {
      return unsupported(node, "constant folding with broadcasting beyond scalars");
    }
    out = x.elements() >= y.elements() ? x : y;
    out.origin.clear();
    const bool ints = is_int(x.dtype) && is_int(y.dtype);
    for (size_t i = 0; i < out.data.size(); ++i) {
      const double p = x.data[x.data.size() == 1 ? 0 : i], q = y.data[y.data.size() == 1 ? 0 : i];
      double r = op == "Mul" ? p * q : op == "Add" ? p + q : op == "Sub" ? p - q : 0.0;
      if (op == "Div") {
        if (q == 0.0) return unsupported(node, "division by zero in a constant");
        r = ints ? std::trunc(p / q) : p / q;
      }
      out.data[i] = ints ? r : static_cast<float>(r);
    }
  } else if (op == "Reshape") {
    out = *arg(0);
    out.origin.clear();
    std::vector<int64_t> dims = as_ints(*arg(1));
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
      return unsupported(node, "a constant reshaped to a different number of elements");
    }
  } else if (op == "ConstantOfShape") {
    SERF_RETURN_IF_ERROR(a.only({"value"}));
    double fill = 0.0;
    out.dtype = onnx::TensorProto_DataType_FLOAT;
    if (const onnx::AttributeProto* t = a.find("value")) {
      SERF_ASSIGN_OR_RETURN(Value v, constant_from(t->t(), w));
      if (v.data.size() != 1) return unsupported(node, "value must hold one element");
      fill = v.data[0];
      out.dtype = v.dtype;
    }
    out.dims = as_ints(*arg(0));
    if (out.elements() > (1 << 24)) return unsupported(node, "constant too large");
    out.data.assign(static_cast<size_t>(out.elements()), fill);
  } else {
    return unsupported(node, "constant folding of " + op + " is not supported");
  }
  set_constant(node.output(0), std::move(out));
  return Status::Ok();
}

}  // namespace serf::model::onnx_import
