// The values and attributes of an ONNX graph as the importer reads them: a constant tensor's
// values in any of the stored types (constant_from), as integers (ints_of), and each node's
// attributes with their types checked (Attributes).
#include <cstring>
#include <limits>

#include "onnx_importer.h"

namespace serf::model::onnx_import {

int64_t Value::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> ints_of(const Value& v) {
  std::vector<int64_t> out;
  for (double d : v.data) {
    constexpr double kLimit = 9.2e18;  // below 2^63
    out.push_back(d >= kLimit    ? std::numeric_limits<int64_t>::max()
                  : d <= -kLimit ? std::numeric_limits<int64_t>::min()
                                 : static_cast<int64_t>(d));
  }
  return out;
}

std::string dtype_name(int dtype) {
  if (!onnx::TensorProto_DataType_IsValid(dtype)) return "type " + std::to_string(dtype);
  return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(dtype));
}

namespace {

template <typename T>
bool read_raw(const std::string& raw, int64_t n, std::vector<double>* out) {
  if (raw.size() != static_cast<size_t>(n) * sizeof(T)) return false;
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    (*out)[static_cast<size_t>(i)] = static_cast<double>(v);
  }
  return true;
}

// The n values of a tensor of element type T: its raw bytes, or else its typed field (float_data,
// int64_data, int32_data); false when they do not hold n values.
template <typename T, typename Field>
bool read_values(const onnx::TensorProto& t, const Field& field, int64_t n,
                 std::vector<double>* out) {
  if (t.has_raw_data()) return read_raw<T>(t.raw_data(), n, out);
  if (field.size() != n) return false;
  out->assign(field.begin(), field.end());
  return true;
}

}  // namespace

StatusOr<Value> constant_from(const onnx::TensorProto& t, const std::string& where) {
  Value v;
  v.constant = true;
  v.dtype = t.data_type();
  v.origin = t.name();
  for (int64_t d : t.dims()) {
    if (d < 0) return InvalidArgument(where + ": tensor '" + t.name() + "' has a negative dim");
    v.dims.push_back(d);
  }
  const int64_t n = v.elements();
  if (n > (int64_t{1} << 34))
    return InvalidArgument(where + ": tensor '" + t.name() + "' is too large");
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    return InvalidArgument(where + ": tensor '" + t.name() +
                           "' keeps its data in an external file (save the model with its data "
                           "inside: onnx.save(model, path, save_as_external_data=False))");
  }
  const std::string bad = where + ": tensor '" + t.name() +
                          "' holds a number of values that "
                          "does not match its shape (truncated file?)";
  switch (t.data_type()) {
    case onnx::TensorProto_DataType_FLOAT:
      if (!read_values<float>(t, t.float_data(), n, &v.data)) return InvalidArgument(bad);
      break;
    case onnx::TensorProto_DataType_INT64:
      if (!read_values<int64_t>(t, t.int64_data(), n, &v.data)) return InvalidArgument(bad);
      break;
    case onnx::TensorProto_DataType_INT32:
      if (!read_values<int32_t>(t, t.int32_data(), n, &v.data)) return InvalidArgument(bad);
      break;
    default:
      break;  // kept with its dtype: an error where a float or a shape is needed
  }
  return v;
}

Attributes::Attributes(const onnx::NodeProto& node, std::string where)
    : node_(node), where_(std::move(where)) {}

const onnx::AttributeProto* Attributes::find(const std::string& name) const {
  for (const onnx::AttributeProto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

Status Attributes::only(const std::set<std::string>& known) const {
  for (const onnx::AttributeProto& a : node_.attribute()) {
    if (known.count(a.name()) == 0) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument(where_ + ": attribute '" + a.name() +
                             "' is not supported (known: " + (list.empty() ? "none" : list) + ")");
    }
  }
  return Status::Ok();
}

Status Attributes::type_error(const onnx::AttributeProto& a, const char* want) const {
  return InvalidArgument(where_ + ": attribute '" + a.name() + "' must be " + want);
}

StatusOr<int64_t> Attributes::integer(const std::string& name, int64_t fallback) const {
  const onnx::AttributeProto* a = find(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto_AttributeType_INT) return type_error(*a, "an integer");
  return a->i();
}

StatusOr<float> Attributes::real(const std::string& name, float fallback) const {
  const onnx::AttributeProto* a = find(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto_AttributeType_FLOAT) return type_error(*a, "a float");
  return a->f();
}

StatusOr<std::string> Attributes::text(const std::string& name, const std::string& fallback) const {
  const onnx::AttributeProto* a = find(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto_AttributeType_STRING) return type_error(*a, "a string");
  return a->s();
}

StatusOr<std::vector<int64_t>> Attributes::integers(const std::string& name,
                                                    const std::vector<int64_t>& fallback) const {
  const onnx::AttributeProto* a = find(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto_AttributeType_INTS) {
    return type_error(*a, "a list of integers");
  }
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

}  // namespace serf::model::onnx_import
