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

Status Status::with_context(const std::string& context) const {
  if (ok() || context.empty()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace serf
