// Status and Result<T>: the library's internal error model. A Status carries a
// pg_status_t and a message; c_guard() turns one (or a C++ exception) into the C ABI's
// return code plus the thread's pg_last_error() text.
//
//   Result<int> parse(std::string_view s);
//   PG_ASSIGN_OR_RETURN(int port, parse(text));
//   if (port == 0) return make_error(PG_ERR_CONFIG, "MASTER_PORT is 0");
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "procgroup/procgroup.h"

namespace procgroup::detail {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(pg_status_t code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == PG_OK; }
  pg_status_t code() const { return code_; }
  const std::string& message() const { return message_; }
  // "PG_ERR_TIMEOUT: message"
  std::string to_string() const;
  // A copy whose message starts with context ("creating group: ...").
  Status with_context(std::string_view context) const;

 private:
  pg_status_t code_ = PG_OK;
  std::string message_;
};

inline Status ok_status() { return Status(); }

template <class... Args>
Status make_error(pg_status_t code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit on purpose
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit on purpose

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

const char* status_name(pg_status_t code);

// Thread-local message behind pg_last_error().
void set_last_error(std::string_view message);
// Empties it (cheaply: the common case before every plugin call).
void clear_last_error();
const char* last_error();

// Runs body (returning Status) at a C entry point: stores the message of a failure as
// the thread's last error, and converts any escaping exception into PG_ERR_INTERNAL
// (PG_ERR_OUT_OF_MEMORY for std::bad_alloc). Never throws.
template <class Body>
pg_status_t c_guard(const char* function, Body&& body) noexcept;

pg_status_t report(const Status& status) noexcept;
pg_status_t report_exception(const char* function) noexcept;

template <class Body>
pg_status_t c_guard(const char* function, Body&& body) noexcept {
  try {
    return report(body());
  } catch (...) {
    return report_exception(function);
  }
}

}  // namespace procgroup::detail

#define PG_CONCAT_INNER_(a, b) a##b
#define PG_CONCAT_(a, b) PG_CONCAT_INNER_(a, b)

#define PG_RETURN_IF_ERROR(expr)                         \
  do {                                                   \
    ::procgroup::detail::Status pg_status_tmp_ = (expr); \
    if (!pg_status_tmp_.ok()) return pg_status_tmp_;     \
  } while (0)

#define PG_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define PG_ASSIGN_OR_RETURN(lhs, expr) \
  PG_ASSIGN_OR_RETURN_IMPL_(PG_CONCAT_(pg_result_tmp_, __LINE__), lhs, expr)
