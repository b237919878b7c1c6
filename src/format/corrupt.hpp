// The codecs' damage messages (docs/format.md 2.6): kCorrupt from a printf
// format, and the casts that make uint64_t/int64_t printable with %llu/%lld
// on every ABI. Shared by the v1 and v2 codecs.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "cairn/status.hpp"

namespace cairn::format {

[[gnu::format(printf, 1, 2)]] inline Status CorruptF(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status::Corrupt(buf);
}

inline unsigned long long U(uint64_t v) { return static_cast<unsigned long long>(v); }
inline long long I(int64_t v) { return static_cast<long long>(v); }

}  // namespace cairn::format
