#pragma once
// Typed errors for everything a user can get wrong (Triton-style Status / StatusOr).
// Libraries return these; the CLI boundary prints one line and maps the code to an exit status.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace serf {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad file, flag or request: exit 2
  kNotFound,         // a named thing (file, tuple, tensor) is missing: exit 2
  kInfeasible,       // the question has no answer (no configuration meets the SLO): exit 3
  kUnavailable,      // a peer (rank, device) is gone or does not answer
  kInternal,         // a bug or a library failure we did not expect
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // The exit status a command returns for this error.
  int exit_code() const;
  // Prefix the message with context, e.g. the file name: "profile.json: tuples[3].mean_ms: ...".
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// `text` with its control characters written as escapes (a line feed as \n, a tab as \t, others
// as \xNN), so that an error line naming a file or a value stays one line whatever they hold.
std::string one_line(const std::string& text);

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Infeasible(std::string m) { return {StatusCode::kInfeasible, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace serf

#define SERF_CONCAT_INNER_(a, b) a##b
#define SERF_CONCAT_(a, b) SERF_CONCAT_INNER_(a, b)

// Return the Status from the enclosing function if `expr` is an error.
#define SERF_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::serf::Status serf_status_ = (expr);        \
    if (!serf_status_.ok()) return serf_status_; \
  } while (0)

// `SERF_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a StatusOr or returns its error.
#define SERF_ASSIGN_OR_RETURN(lhs, expr) \
  SERF_ASSIGN_OR_RETURN_IMPL_(SERF_CONCAT_(serf_statusor_, __LINE__), lhs, expr)
// `tmp` and `lhs` are names a declaration introduces: they cannot be put in parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SERF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
