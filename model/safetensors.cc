// safetensors F32 reader/writer. Tensors are read straight into their own buffers (no copy of
// the whole file), so loading imagenet22k needs its weight memory once, not twice.
#include "model/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serf/io/json_fields.h"

namespace serf::model {

using nlohmann::json;

namespace {

// The format's own limit on the header; a larger length field means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

static_assert(sizeof(float) == 4, "safetensors F32 needs 4-byte floats");

bool host_is_little_endian() {
  const uint16_t one = 1;
  return *reinterpret_cast<const uint8_t*>(&one) == 1;
}

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

StatusOr<Entry> parse_entry(const std::string& name, const json& v) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) return InvalidArgument(where + ": expected an object");
  auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) return InvalidArgument(where + ": missing dtype");
  if (dtype->get<std::string>() != "F32") {
    return InvalidArgument(where + ": dtype " + dtype->get<std::string>() +
                           " is not supported (only F32)");
  }
  Entry e;
  e.name = name;
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) return InvalidArgument(where + ": missing shape");
  int64_t elements = 1;
  for (const json& d : *shape) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0)) {
      return InvalidArgument(where + ": shape must hold non-negative integers");
    }
    const int64_t dim = d.get<int64_t>();
    if (dim > 0 && elements > (int64_t{1} << 40) / dim) {
      return InvalidArgument(where + ": shape too large");
    }
    elements *= dim;
    e.shape.push_back(dim);
  }
  auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return InvalidArgument(where + ": data_offsets must be [begin, end] (non-negative integers)");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.end < e.begin || e.end - e.begin != static_cast<uint64_t>(elements) * sizeof(float)) {
    return InvalidArgument(where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                           std::to_string(e.end) + "] do not hold " + std::to_string(elements) +
                           " F32 values");
  }
  return e;
}

// A file the reader can use: exists, readable, a regular file (not a directory, a FIFO or
// /dev/zero, which would be read for ever).
Status check_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) return InvalidArgument(path + ": permission denied");
    return NotFound(path + ": cannot open file (does it exist?)");
  }
  if (S_ISDIR(st.st_mode))
    return InvalidArgument(path + ": is a directory, not a safetensors file");
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(path + ": not a regular file (a safetensors file is needed)");
  }
  if (::access(path.c_str(), R_OK) != 0) return InvalidArgument(path + ": permission denied");
  return Status::Ok();
}

// Two tensors must not share bytes: a file whose ranges overlap was not written by a safetensors
// writer, and reading it would alias one tensor's values into another.
Status check_disjoint(const std::string& path, std::vector<Entry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;  // an empty tensor holds no bytes
    if (prev != nullptr && e.begin < prev->end) {
      return InvalidArgument(
          path + ": tensors '" + prev->name + "' [" + std::to_string(prev->begin) + ", " +
          std::to_string(prev->end) + ") and '" + e.name + "' [" + std::to_string(e.begin) + ", " +
          std::to_string(e.end) + ") overlap (each tensor needs its own data range)");
    }
    prev = &e;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::map<std::string, Tensor>> read_safetensors(
    const std::string& path, const std::function<Status(const TensorShapes&)>& check) {
  if (!host_is_little_endian()) return Internal("safetensors needs a little-endian host");
  SERF_RETURN_IF_ERROR(check_regular_file(path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file (does it exist?)");
  in.seekg(0, std::ios::end);
  const uint64_t file_bytes = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint8_t len_bytes[8];
  if (!in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    return InvalidArgument(path + ": truncated safetensors file (no 8-byte header length)");
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | len_bytes[i];
  if (header_bytes > kMaxHeaderBytes || 8 + header_bytes > file_bytes) {
    return InvalidArgument(path + ": header length " + std::to_string(header_bytes) +
                           " exceeds the file (" + std::to_string(file_bytes) +
                           " bytes): truncated or not a safetensors file");
  }
  std::string header(header_bytes, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_bytes))) {
    return InvalidArgument(path + ": truncated safetensors header");
  }
  // As every JSON input: a tensor named twice is refused, not resolved to the last entry.
  SERF_ASSIGN_OR_RETURN(json doc, io::parse_json(header, path + ": safetensors header"));
  if (!doc.is_object()) return InvalidArgument(path + ": safetensors header is not an object");
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;

  std::vector<Entry> entries;
  TensorShapes shapes;
  for (const auto& item : doc.items()) {
    if (item.key() == "__metadata__") continue;
    StatusOr<Entry> e = parse_entry(item.key(), item.value());
    if (!e.ok()) return e.status().with_context(path);
    if (e->end > data_bytes) {
      return InvalidArgument(path + ": tensor '" + e->name + "': data_offsets end " +
                             std::to_string(e->end) + " beyond the " + std::to_string(data_bytes) +
                             " data bytes (truncated file?)");
    }
    shapes[e->name] = e->shape;
    entries.push_back(std::move(e).value());
  }
  SERF_RETURN_IF_ERROR(check_disjoint(path, entries));
  if (check) SERF_RETURN_IF_ERROR(check(shapes));

  std::map<std::string, Tensor> tensors;
  for (const Entry& e : entries) {
    Tensor t;
    t.shape = e.shape;
    t.data.resize(static_cast<size_t>(t.elements()));
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    if (!in.read(reinterpret_cast<char*>(t.data.data()),
                 static_cast<std::streamsize>(e.end - e.begin))) {
      return InvalidArgument(path + ": tensor '" + e.name + "': read error (truncated file?)");
    }
    tensors.emplace(e.name, std::move(t));
  }
  return tensors;
}

Status write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  if (!host_is_little_endian()) return Internal("safetensors needs a little-endian host");
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (static_cast<int64_t>(t.data.size()) != t.elements()) {
      return Internal("tensor '" + name + "': data size does not match its shape");
    }
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  return io::write_file_atomically(path, [&](std::ostream& out) {
    uint8_t len_bytes[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : tensors) {
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    }
    return static_cast<bool>(out);
  });
}

}  // namespace serf::model
