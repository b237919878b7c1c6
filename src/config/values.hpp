// The values a configuration key takes, parsed the same way whether they come
// from a TOML file (config.cpp) or a CAIRN_* variable (environment.cpp).
// Internal to libcairn; docs/config.md is the user-facing description.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/config.hpp"
#include "cairn/status.hpp"

namespace cairn::config_values {

// "0600", "600", "0o600" -> 0600. Values above 07777 are rejected here;
// Validate() narrows to 0777.
Result<uint32_t> ParseMode(std::string_view text);
// Decimal integer in [lo, hi], nothing else (no sign games, no trailing text).
bool ParseInt(std::string_view s, int64_t lo, int64_t hi, int64_t* out);
// 1, 0, true, false, yes, no, on, off (any case).
bool ParseBool(std::string_view s, bool* out);
// 0600 -> "0600".
std::string OctalString(uint32_t v);
// Lexical normal form for comparing directories: no "//", no "." segments,
// ".." resolved lexically, no trailing '/'.
std::string NormalizePath(const std::string& p);
// p against the working directory, normalized (p itself if that fails).
std::string MakeAbsolute(const std::string& p);
// The user name for the default scratch directory, reduced to [A-Za-z0-9._-].
std::string UserName();

// An enumerated key's spellings and parser, from include/cairn/config_enums.def
// (one specialization per enum there).
template <typename E>
struct EnumKey;

template <>
struct EnumKey<CacheInit> {
  static constexpr const char* kNames[] = {
#define CAIRN_CACHE_INIT(cpp, value, name, c, doc) name,
#include "cairn/config_enums.def"
  };
  static Result<CacheInit> Parse(std::string_view s) { return ParseCacheInit(s); }
};

template <>
struct EnumKey<DeviceCacheInit> {
  static constexpr const char* kNames[] = {
#define CAIRN_DEVICE_CACHE_INIT(cpp, value, name, c, doc) name,
#include "cairn/config_enums.def"
  };
  static Result<DeviceCacheInit> Parse(std::string_view s) { return ParseDeviceCacheInit(s); }
};

template <>
struct EnumKey<ChangeDetection> {
  static constexpr const char* kNames[] = {
#define CAIRN_CHANGE_DETECTION(cpp, value, name, c, doc) name,
#include "cairn/config_enums.def"
  };
  static Result<ChangeDetection> Parse(std::string_view s) { return ParseChangeDetection(s); }
};

template <>
struct EnumKey<CaptureMode> {
  static constexpr const char* kNames[] = {
#define CAIRN_CAPTURE_MODE(cpp, value, name, c, doc) name,
#include "cairn/config_enums.def"
  };
  static Result<CaptureMode> Parse(std::string_view s) { return ParseCaptureMode(s); }
};

template <>
struct EnumKey<WriteProtectMode> {
  static constexpr const char* kNames[] = {
#define CAIRN_WRITE_PROTECT_MODE(cpp, value, name, c, doc) name,
#include "cairn/config_enums.def"
  };
  static Result<WriteProtectMode> Parse(std::string_view s) { return ParseWriteProtectMode(s); }
};

template <>
struct EnumKey<L3Code> {
  static constexpr const char* kNames[] = {
#define CAIRN_L3_CODE(cpp, value, name, c, doc) name,
#include "cairn/config_enums.def"
  };
  static Result<L3Code> Parse(std::string_view s) { return ParseL3Code(s); }
};

// "eager, memset, ...": every spelling of E.
template <typename E>
std::string Spellings() {
  std::string out;
  for (const char* n : EnumKey<E>::kNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace cairn::config_values
