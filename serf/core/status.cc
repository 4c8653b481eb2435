#include "serf/core/status.h"

namespace serf {

int Status::exit_code() const {
  switch (code_) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return 2;
    case StatusCode::kInfeasible:
      return 3;
    case StatusCode::kUnavailable:
      return 4;
    case StatusCode::kInternal:
      return 1;
  }
  return 1;
}

std::string one_line(const std::string& text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

Status Status::with_context(const std::string& context) const {
  if (ok() || context.empty()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace serf
