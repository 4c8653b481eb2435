#pragma once
// Typed access to JSON fields with errors that name the field: "tuples[2].mean_ms: expected a
// number". Every reader of a user's JSON file goes through these, so bad input is one clear line.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "serf/core/status.h"

namespace serf::io {

// Parses `text`; the error names `source` (usually the file name) and the byte offset. A key that
// appears twice in one object is refused, naming it and where (JSON leaves its meaning open; the
// library would silently keep the last value).
StatusOr<nlohmann::json> parse_json(const std::string& text, const std::string& source);
// What parse_json refuses a key given twice with, for parsers of text that is not a file (a
// request body): `json::parse(text, refuse_duplicate_keys())` throws DuplicateJsonKey naming
// the key's path ("inputs[0].shape").
struct DuplicateJsonKey {
  std::string path;
};
nlohmann::json::parser_callback_t refuse_duplicate_keys();
// Reads and parses a file (read_text_file's checks, then parse_json's).
StatusOr<nlohmann::json> read_json_file(const std::string& path);
// The most a text input (profile, table, spec, report) may hold: more is not one of ours.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;
// Reads a whole text file. Before reading anything it checks what `path` is: a missing file is
// NotFound; unreadable ("permission denied"), a directory, anything but a regular file (a pipe, a
// device such as /dev/zero) or more than `max_bytes` is InvalidArgument naming the path.
StatusOr<std::string> read_text_file(const std::string& path,
                                     uint64_t max_bytes = kMaxTextFileBytes);
// Writes `text` to `path` (atomically: a temporary beside it, then rename).
Status write_text_file(const std::string& path, const std::string& text);
// Writes `path` through `body`, so that readers never see half a file: into PATH.tmp beside the
// target, then renamed over it. A symlink is followed (the link stays, its target is replaced);
// a device or pipe (/dev/null) is written in place; a directory is an error. `body` returns
// false on a write error.
Status write_file_atomically(const std::string& path,
                             const std::function<bool(std::ostream&)>& body);

// `where` is the path of `obj` in the document, e.g. "tuples[2]"; "" for the root.
StatusOr<const nlohmann::json*> get_field(const nlohmann::json& obj, const std::string& key,
                                          const std::string& where);
StatusOr<double> get_number(const nlohmann::json& obj, const std::string& key,
                            const std::string& where);
StatusOr<int> get_int(const nlohmann::json& obj, const std::string& key, const std::string& where);
StatusOr<std::string> get_string(const nlohmann::json& obj, const std::string& key,
                                 const std::string& where);
// true or false only: "yes", 1 or "true" is refused, never read as false.
StatusOr<bool> get_bool(const nlohmann::json& obj, const std::string& key,
                        const std::string& where);
StatusOr<const nlohmann::json*> get_array(const nlohmann::json& obj, const std::string& key,
                                          const std::string& where);
StatusOr<const nlohmann::json*> get_object(const nlohmann::json& obj, const std::string& key,
                                           const std::string& where);

// Refuses a field of `obj` that is not in `known` (a typo such as "bacth" would otherwise be
// ignored, and its default used): "WHERE: unknown field 'KEY' (known: a, b, ...)".
Status refuse_unknown_fields(const nlohmann::json& obj, std::initializer_list<const char*> known,
                             const std::string& where);

std::string field_path(const std::string& where, const std::string& key);
std::string index_path(const std::string& where, size_t index);

}  // namespace serf::io
