#include "serf/io/json_fields.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace serf::io {

using nlohmann::json;

std::string field_path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

std::string index_path(const std::string& where, size_t index) {
  return where + "[" + std::to_string(index) + "]";
}

StatusOr<json> parse_json(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument(source + ": malformed JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception& e) {  // e.g. a number beyond double's range (1e999)
    return InvalidArgument(source + ": unreadable JSON: " + e.what());
  }
}

StatusOr<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open file (does it exist?)");
  // Whatever the file is (a device, a pipe), more than this is not a profile, spec or report.
  constexpr size_t kMaxTextBytes = size_t{1} << 30;
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxTextBytes) return InvalidArgument(path + ": larger than 1 GiB");
  }
  if (in.bad()) return InvalidArgument(path + ": read error");
  return text;
}

StatusOr<json> read_json_file(const std::string& path) {
  SERF_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_json(text, path);
}

Status write_file_atomically(const std::string& path,
                             const std::function<bool(std::ostream&)>& body) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string target = path;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (fs::is_symlink(link)) {
    target = fs::canonical(path, ec).string();
    if (ec) return InvalidArgument(path + ": a symlink to nowhere");
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) return InvalidArgument(path + ": is a directory, not a file");
  if (fs::exists(st) && !fs::is_regular_file(st)) {  // a device or a pipe: no rename
    std::ofstream out(target, std::ios::binary);
    if (!out) return InvalidArgument(path + ": cannot write");
    if (!body(out) || !out) return InvalidArgument(path + ": write error");
    return Status::Ok();
  }
  const std::string tmp = target + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return InvalidArgument(path + ": cannot write file (does its folder exist?)");
    if (!body(out) || !out) {
      out.close();
      std::remove(tmp.c_str());
      return InvalidArgument(path + ": write error (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::remove(tmp.c_str());
    return InvalidArgument(path + ": cannot replace file");
  }
  return Status::Ok();
}

Status write_text_file(const std::string& path, const std::string& text) {
  return write_file_atomically(path, [&](std::ostream& out) {
    out << text;
    return static_cast<bool>(out);
  });
}

StatusOr<const json*> get_field(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) {
    return InvalidArgument((where.empty() ? std::string("document") : where) +
                           ": expected a JSON object");
  }
  auto it = obj.find(key);
  if (it == obj.end()) return InvalidArgument(field_path(where, key) + ": missing field");
  return &*it;
}

StatusOr<double> get_number(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_number()) return InvalidArgument(field_path(where, key) + ": expected a number");
  const double x = v->get<double>();
  if (!std::isfinite(x)) return InvalidArgument(field_path(where, key) + ": not a finite number");
  return x;
}

StatusOr<int> get_int(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (v->is_number_integer()) {
    const auto x = v->get<long long>();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
      return InvalidArgument(field_path(where, key) + ": integer out of range");
    }
    return static_cast<int>(x);
  }
  if (v->is_number_float()) {
    const double x = v->get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 2e9) return static_cast<int>(x);
  }
  return InvalidArgument(field_path(where, key) + ": expected an integer");
}

StatusOr<std::string> get_string(const json& obj, const std::string& key,
                                 const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_string()) return InvalidArgument(field_path(where, key) + ": expected a string");
  return v->get<std::string>();
}

StatusOr<const json*> get_array(const json& obj, const std::string& key, const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_array()) return InvalidArgument(field_path(where, key) + ": expected an array");
  return v;
}

StatusOr<const json*> get_object(const json& obj, const std::string& key,
                                 const std::string& where) {
  SERF_ASSIGN_OR_RETURN(const json* v, get_field(obj, key, where));
  if (!v->is_object()) return InvalidArgument(field_path(where, key) + ": expected an object");
  return v;
}

}  // namespace serf::io
