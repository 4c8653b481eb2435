#include "serve/tensor_json.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace serf::serve {

namespace {

// A cursor over JSON text; every step returns false on anything it does not expect.
struct Scanner {
  std::string_view s;
  size_t i = 0;

  bool at_end() const { return i >= s.size(); }
  char peek() const { return at_end() ? '\0' : s[i]; }
  void skip_ws() {
    while (!at_end() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool take(char c) {
    skip_ws();
    if (peek() != c) return false;
    ++i;
    return true;
  }
  // A string's raw text between its quotes (escapes left as they are).
  bool string(std::string_view* raw) {
    skip_ws();
    if (peek() != '"') return false;
    const size_t begin = ++i;
    while (!at_end() && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
    if (at_end()) return false;
    *raw = s.substr(begin, i - begin);
    ++i;
    return true;
  }
  // Skips one value of any kind (its syntax is checked later by nlohmann); a scalar ends before
  // the ',', '}' or ']' that follows it.
  bool skip_value() {
    skip_ws();
    int depth = 0;
    while (!at_end()) {
      const char c = s[i];
      if (c == '"') {
        std::string_view ignored;
        if (!string(&ignored)) return false;
        if (depth == 0) return true;
      } else if (c == '[' || c == '{') {
        ++depth;
        ++i;
      } else if (c == ']' || c == '}') {
        if (depth == 0) return true;
        ++i;
        if (--depth == 0) return true;
      } else if (c == ',' && depth == 0) {
        return true;
      } else {
        ++i;
      }
    }
    return false;
  }
  // One JSON number (RFC 8259 grammar) as a finite FP32 value, read as a double first and then
  // narrowed, as nlohmann's path does.
  bool number(float* out) {
    skip_ws();
    const size_t begin = i;
    auto digits = [&] {
      const size_t from = i;
      while (!at_end() && s[i] >= '0' && s[i] <= '9') ++i;
      return i > from;
    };
    if (peek() == '-') ++i;
    if (peek() == '0') {
      ++i;
    } else if (!digits()) {
      return false;
    }
    if (peek() == '.') {
      ++i;
      if (!digits()) return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i;
      if (peek() == '+' || peek() == '-') ++i;
      if (!digits()) return false;
    }
    double v = 0;
    const auto r = std::from_chars(s.data() + begin, s.data() + i, v);
    if (r.ec != std::errc() || r.ptr != s.data() + i) return false;
    if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) return false;
    *out = static_cast<float>(v);
    return true;
  }
  // A flat array of numbers; its text spans [*begin, i).
  bool numbers(std::vector<float>* out, size_t* begin) {
    skip_ws();
    *begin = i;
    if (!take('[')) return false;
    if (take(']')) return true;
    do {
      float v = 0;
      if (!number(&v)) return false;
      out->push_back(v);
    } while (take(','));
    return take(']');
  }
};

// In the object at the cursor, moves to the value of `key`'s first occurrence.
bool find_member(Scanner& sc, std::string_view key) {
  if (!sc.take('{')) return false;
  if (sc.take('}')) return false;
  do {
    std::string_view name;
    if (!sc.string(&name) || !sc.take(':')) return false;
    if (name == key) return true;
    if (!sc.skip_value()) return false;
  } while (sc.take(','));
  return false;
}

}  // namespace

std::optional<SplicedInputData> take_input_data(std::string_view text) {
  Scanner sc{text};
  if (!find_member(sc, "inputs") || !sc.take('[')) return std::nullopt;
  if (!find_member(sc, "data")) return std::nullopt;
  SplicedInputData d;
  size_t begin = 0;
  if (!sc.numbers(&d.values, &begin)) return std::nullopt;
  d.json.reserve(text.size() - (sc.i - begin) + 4);
  d.json.append(text.substr(0, begin)).append("null").append(text.substr(sc.i));
  return d;
}

}  // namespace serf::serve
