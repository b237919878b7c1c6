// Value strings of the configuration: ParseSize("512MiB"), FormatSize, and the
// names of the cache init strategies.
// Exact integer arithmetic throughout (no doubles while parsing), so that
// "1.5GiB" is exactly 1610612736 and "0.1KiB" is rejected rather than rounded.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "cairn/config.hpp"

namespace cairn {
namespace {

struct Unit {
  const char* name;  // compared case-insensitively
  uint64_t factor;
};

constexpr uint64_t kKi = 1024;
constexpr Unit kUnits[] = {
    {"", 1},
    {"b", 1},
    {"kb", 1000},
    {"mb", 1000ull * 1000},
    {"gb", 1000ull * 1000 * 1000},
    {"tb", 1000ull * 1000 * 1000 * 1000},
    {"kib", kKi},
    {"mib", kKi * kKi},
    {"gib", kKi * kKi * kKi},
    {"tib", kKi * kKi * kKi * kKi},
    {"k", kKi},
    {"m", kKi * kKi},
    {"g", kKi * kKi * kKi},
    {"t", kKi * kKi * kKi * kKi},
};

bool IsSpace(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsLower(std::string_view text, const char* lower) {
  size_t i = 0;
  for (; i < text.size(); ++i) {
    if (lower[i] == '\0' || Lower(text[i]) != lower[i]) return false;
  }
  return lower[i] == '\0';
}

Status Bad(std::string_view text, const std::string& why) {
  return Status::Config("bad size '" + std::string(text) + "': " + why);
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  __extension__ typedef unsigned __int128 u128;  // GCC and Clang; exact 64x64 products
  constexpr u128 kMax = UINT64_MAX;
  std::string_view s = text;
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  if (s.empty()) return Bad(text, "empty");
  if (s.front() == '-') return Bad(text, "sizes cannot be negative");

  size_t i = 0;
  u128 whole = 0;
  bool overflow = false;
  for (; i < s.size() && IsDigit(s[i]); ++i) {
    whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
    if (whole > kMax) {  // saturate and keep scanning, to report "too large"
      overflow = true;
      whole = kMax + 1;
    }
  }
  if (i == 0) return Bad(text, "expected a number of bytes with an optional unit, e.g. 512MiB");

  // Fraction: kept as an exact ratio frac / 10^digits, trailing zeros dropped.
  u128 frac = 0, scale = 1;
  if (i < s.size() && s[i] == '.') {
    size_t begin = ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == begin) return Bad(text, "expected digits after '.'");
    size_t end = i;
    while (end > begin && s[end - 1] == '0') --end;
    if (end - begin > 18) return Bad(text, "too many decimal places");
    for (size_t k = begin; k < end; ++k) {
      frac = frac * 10 + static_cast<unsigned>(s[k] - '0');
      scale *= 10;
    }
  }
  while (i < s.size() && IsSpace(s[i])) ++i;
  std::string_view unit_text = s.substr(i);

  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (EqualsLower(unit_text, u.name)) unit = &u;
  }
  if (unit == nullptr) {
    return Bad(text, "unknown unit '" + std::string(unit_text) +
                         "' (use B; KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB or K, M, G, T = "
                         "powers of 1024)");
  }
  if (frac != 0 && (frac * unit->factor) % scale != 0) {
    return Bad(text, "not a whole number of bytes");
  }
  if (overflow) return Bad(text, "too large");
  u128 bytes = whole * unit->factor + frac * unit->factor / scale;  // whole <= 2^64, factor < 2^41
  if (bytes > kMax) return Bad(text, "too large (the limit is 16 EiB)");
  return static_cast<uint64_t>(bytes);
}

std::string FormatSize(uint64_t bytes) {
  static const char* const kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  // Three significant digits; rounding can reach 1024 (1023.9 KiB), which
  // reads better as the next unit.
  int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  if (std::string_view(buf) == "1024" && u < 6) {
    ++u;
    std::snprintf(buf, sizeof(buf), "1");
  }
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s + " " + kNames[u];
}

}  // namespace cairn

namespace cairn {

// The names of the configuration enums (include/cairn/config_enums.def).
namespace {

template <typename E>
using Name = std::pair<E, const char*>;

constexpr Name<CacheInit> kInitNames[] = {
#define CAIRN_CACHE_INIT(cpp, value, name, c, doc) {CacheInit::cpp, name},
#include "cairn/config_enums.def"
};
constexpr Name<DeviceCacheInit> kDeviceInitNames[] = {
#define CAIRN_DEVICE_CACHE_INIT(cpp, value, name, c, doc) {DeviceCacheInit::cpp, name},
#include "cairn/config_enums.def"
};
constexpr Name<ChangeDetection> kChangeNames[] = {
#define CAIRN_CHANGE_DETECTION(cpp, value, name, c, doc) {ChangeDetection::cpp, name},
#include "cairn/config_enums.def"
};
constexpr Name<CaptureMode> kCaptureNames[] = {
#define CAIRN_CAPTURE_MODE(cpp, value, name, c, doc) {CaptureMode::cpp, name},
#include "cairn/config_enums.def"
};
constexpr Name<WriteProtectMode> kWriteProtectNames[] = {
#define CAIRN_WRITE_PROTECT_MODE(cpp, value, name, c, doc) {WriteProtectMode::cpp, name},
#include "cairn/config_enums.def"
};
constexpr Name<L3Code> kL3CodeNames[] = {
#define CAIRN_L3_CODE(cpp, value, name, c, doc) {L3Code::cpp, name},
#include "cairn/config_enums.def"
};

template <typename E, size_t N>
const char* NameOf(const Name<E> (&names)[N], E v) {
  for (const auto& [value, name] : names) {
    if (value == v) return name;
  }
  return "unknown";
}

// kConfig naming `what` and every accepted spelling.
template <typename E, size_t N>
Result<E> Parse(const Name<E> (&names)[N], std::string_view text, const char* what) {
  std::string accepted;
  for (const auto& [value, name] : names) {
    if (text == name) return value;
    if (!accepted.empty()) accepted += ", ";
    accepted += name;
  }
  // Appended, not chained with operator+: GCC 12 warns (-Wrestrict) on
  // "'" + std::string(...) inlined here, a false positive.
  std::string message = "'";
  message.append(text).append("' is not ").append(what);
  return Status::Config(message.append(" (").append(accepted).append(")"));
}

}  // namespace

const char* CacheInitName(CacheInit v) { return NameOf(kInitNames, v); }
Result<CacheInit> ParseCacheInit(std::string_view text) {
  return Parse(kInitNames, text, "a cache init strategy");
}

const char* DeviceCacheInitName(DeviceCacheInit v) { return NameOf(kDeviceInitNames, v); }
Result<DeviceCacheInit> ParseDeviceCacheInit(std::string_view text) {
  return Parse(kDeviceInitNames, text, "a device cache init");
}

const char* ChangeDetectionName(ChangeDetection v) { return NameOf(kChangeNames, v); }
Result<ChangeDetection> ParseChangeDetection(std::string_view text) {
  return Parse(kChangeNames, text, "a change detection mode");
}

const char* CaptureModeName(CaptureMode v) { return NameOf(kCaptureNames, v); }
Result<CaptureMode> ParseCaptureMode(std::string_view text) {
  return Parse(kCaptureNames, text, "a capture mode");
}

const char* WriteProtectModeName(WriteProtectMode v) { return NameOf(kWriteProtectNames, v); }
Result<WriteProtectMode> ParseWriteProtectMode(std::string_view text) {
  return Parse(kWriteProtectNames, text, "a write protection");
}

const char* L3CodeName(L3Code v) { return NameOf(kL3CodeNames, v); }
int EffectiveL3Parity(L3Code code, int parity) {
  if (parity > 0) return parity;
  return code == L3Code::kRs ? 2 : 1;
}
Result<L3Code> ParseL3Code(std::string_view text) {
  return Parse(kL3CodeNames, text, "an L3 code");
}

}  // namespace cairn
