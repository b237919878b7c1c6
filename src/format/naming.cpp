// Names and file names of the store (docs/format.md, section 3).
#include "format/naming.hpp"

#include <cstdio>
#include <limits>

#include "os/fs/fs.hpp"

namespace cairn::format {
namespace {

constexpr size_t kNumberDigits = 20;
constexpr std::string_view kSuffix = ".cairn";
constexpr std::string_view kTempSuffix = ".tmp";

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Decimal digits to a non-negative int64; false on overflow.
bool ParseDigits(std::string_view s, int64_t* out) {
  if (!AllDigits(s)) return false;
  uint64_t v = 0;
  for (char c : s) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace

Status ValidateName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("name is empty");
  if (name.size() > 128) {
    return Status::InvalidArgument("name is " + std::to_string(name.size()) +
                                   " bytes long (at most 128)");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      // Not quoted: the name holds the control character itself.
      return Status::InvalidArgument("name contains control character 0x" +
                                     std::string(1, "0123456789abcdef"[c >> 4]) +
                                     std::string(1, "0123456789abcdef"[c & 15]) +
                                     " at byte " + std::to_string(i));
    }
  }
  // Quoting is safe now: no control characters.
  const std::string quoted = "name '" + std::string(name) + "'";
  if (name == "." || name == "..") return Status::InvalidArgument(quoted + " is reserved");
  if (name.front() == '.') return Status::InvalidArgument(quoted + " starts with '.'");
  if (name.find("..") != std::string_view::npos) {
    return Status::InvalidArgument(quoted + " contains \"..\"");
  }
  if (name.find('/') != std::string_view::npos) return Status::InvalidArgument(quoted + " contains '/'");
  return Status::Ok();
}

std::string EntryFileName(EntryKind kind, int64_t number) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%c%020lld.cairn", kind == EntryKind::kCheckpoint ? 'v' : 'h',
                static_cast<long long>(number));
  return buf;
}

std::string EntryPath(const std::string& dir, std::string_view name, EntryKind kind,
                      int64_t number) {
  return os::JoinPath(os::JoinPath(dir, std::string(name)), EntryFileName(kind, number));
}

std::optional<ParsedFileName> ParseEntryFileName(std::string_view file_name) {
  if (file_name.size() != 1 + kNumberDigits + kSuffix.size()) return std::nullopt;
  if (file_name.substr(1 + kNumberDigits) != kSuffix) return std::nullopt;
  ParsedFileName parsed;
  if (file_name[0] == 'v') {
    parsed.kind = EntryKind::kCheckpoint;
  } else if (file_name[0] == 'h') {
    parsed.kind = EntryKind::kHistoryStep;
  } else {
    return std::nullopt;
  }
  if (!ParseDigits(file_name.substr(1, kNumberDigits), &parsed.number)) return std::nullopt;
  return parsed;
}

bool IsTempFileName(std::string_view file_name, long* pid) {
  // ".<entry file name>.<pid>.tmp": only our own temp files match, so that
  // tools deleting stale temps never touch foreign files.
  if (file_name.size() < 1 + kTempSuffix.size() || file_name.front() != '.') return false;
  if (file_name.substr(file_name.size() - kTempSuffix.size()) != kTempSuffix) return false;
  std::string_view inner = file_name.substr(1, file_name.size() - 1 - kTempSuffix.size());
  const size_t dot = inner.rfind('.');
  if (dot == std::string_view::npos) return false;
  int64_t value = 0;
  if (!ParseDigits(inner.substr(dot + 1), &value) || value <= 0 ||
      value > std::numeric_limits<long>::max()) {
    return false;
  }
  if (!ParseEntryFileName(inner.substr(0, dot))) return false;
  if (pid != nullptr) *pid = static_cast<long>(value);
  return true;
}

std::string EntryLabel(EntryKind kind, std::string_view name, int64_t number) {
  return std::string(kind == EntryKind::kCheckpoint ? "version " : "step ") + std::to_string(number) +
         " of '" + std::string(name) + "'";
}

}  // namespace cairn::format
