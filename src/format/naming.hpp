// File and directory names of the on-disk store (docs/format.md, "Store").
//
//   <dir>/<name>/v<version, 20 digits>.cairn   committed checkpoint version
//   <dir>/<name>/h<step, 20 digits>.cairn      history step
//   <dir>/<name>/.<file>.<pid>.tmp            in-flight (never read)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/status.hpp"
#include "format/layout.hpp"

namespace cairn::format {

// 1..128 bytes; no '/', no NUL or other control characters, not "." or "..",
// no "..", not starting with '.'. kInvalidArgument says which rule failed.
Status ValidateName(std::string_view name);

std::string EntryFileName(EntryKind kind, int64_t number);  // "v000...0042.cairn"
// "version 42 of 'sim'" or "step 42 of 'adjoint'": how messages name an entry.
std::string EntryLabel(EntryKind kind, std::string_view name, int64_t number);
std::string EntryPath(const std::string& dir, std::string_view name, EntryKind kind, int64_t number);

struct ParsedFileName {
  EntryKind kind;
  int64_t number;
};
// Parses a committed file name; nullopt for temp files and foreign files.
std::optional<ParsedFileName> ParseEntryFileName(std::string_view file_name);
// True for ".<file>.<pid>.tmp"; stores the pid.
bool IsTempFileName(std::string_view file_name, long* pid);

}  // namespace cairn::format
