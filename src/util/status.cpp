#include "cairn/status.hpp"

namespace cairn {

const char* CodeName(Code code) noexcept {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kConfig: return "bad configuration";
    case Code::kNotFound: return "not found";
    case Code::kCorrupt: return "corrupt data";
    case Code::kIo: return "I/O error";
    case Code::kNoSpace: return "no space left";
    case Code::kSizeMismatch: return "size mismatch";
    case Code::kNoMemory: return "out of memory";
    case Code::kState: return "invalid state";
    case Code::kUnsupported: return "unsupported";
    case Code::kExists: return "already exists";
    case Code::kInternal: return "internal error";
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
