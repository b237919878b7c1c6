#include "cairn/status.hpp"

namespace cairn {

const char* CodeName(Code code) noexcept {
  switch (code) {
    case Code::kOk: return "ok";
#define CAIRN_ERROR(c, cpp, value, name, text, py) \
  case Code::k##cpp:                               \
    return name;
#include "cairn/cairn_errors.def"
#undef CAIRN_ERROR
  }
  return "unknown error";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = CodeName(code_);
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace cairn
