// Cairn: errors as values.
//
// Every fallible operation of the C++ API returns a Status or a Result<T>.
// Nothing in Cairn throws across its public API, and nothing calls exit() or
// abort(). The numeric values of Code are the negative error codes of the C API
// (cairn.h) and never change once released.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "cairn/export.h"

namespace cairn {

// The codes are declared once, in cairn/cairn_errors.def, with their meaning.
enum class Code : int {
  kOk = 0,
#define CAIRN_ERROR(c, cpp, value, name, text, py) k##cpp = (value),
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR
};

// Human-readable short name for a code ("corrupt", "no space", ...).
CAIRN_EXPORT const char* CodeName(Code code) noexcept;

class [[nodiscard]] CAIRN_EXPORT Status {
 public:
  Status() noexcept = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() noexcept { return Status(); }
  // Status::InvalidArgument(m), Status::Config(m), ...: one per code.
#define CAIRN_ERROR(c, cpp, value, name, text, py) \
  static Status cpp(std::string m) { return {Code::k##cpp, std::move(m)}; }
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR

  bool ok() const noexcept { return code_ == Code::kOk; }
  Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "corrupt: file ... block 3 checksum mismatch" or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}              // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}       // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  // Precondition for value(): ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  Status status() const {
    if (ok()) return Status::Ok();
    return std::get<Status>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace cairn

// Propagates a non-OK Status out of the calling function.
#define CAIRN_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::cairn::Status cairn_status_ = (expr);    \
    if (!cairn_status_.ok()) return cairn_status_; \
  } while (0)

#define CAIRN_CONCAT_INNER_(a, b) a##b
#define CAIRN_CONCAT_(a, b) CAIRN_CONCAT_INNER_(a, b)
// `CAIRN_ASSIGN_OR_RETURN(auto x, Foo());` declares x from Foo()'s value or
// returns its Status.
#define CAIRN_ASSIGN_OR_RETURN(lhs, rexpr)                      \
  auto CAIRN_CONCAT_(cairn_result_, __LINE__) = (rexpr);        \
  if (!CAIRN_CONCAT_(cairn_result_, __LINE__).ok())             \
    return CAIRN_CONCAT_(cairn_result_, __LINE__).status();     \
  lhs = std::move(CAIRN_CONCAT_(cairn_result_, __LINE__)).value()
