#include "util/hash128.hpp"

#include <cstring>

#if CAIRN_HAVE_XXHASH
#define XXH_INLINE_ALL  // header-only: libcairn gains no run-time dependency
#include <xxhash.h>
#endif

namespace cairn {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
// xxHash64's round: a bijection of `acc` for a fixed input and of the input
// for a fixed `acc`, so a change confined to one word always changes its lane.
inline uint64_t Round(uint64_t acc, uint64_t in) { return Rotl(acc + in * kP2, 31) * kP1; }
inline uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  return h ^ (h >> 32);
}

#if CAIRN_HAVE_XXHASH
Hash128 Xxh3(const void* data, size_t n) {
  const XXH128_hash_t h = XXH3_128bits(data, n);
  return Hash128{h.low64, h.high64};
}
#endif

}  // namespace

#if CAIRN_HAVE_XXHASH_AVX2
Hash128 HashBytesXxh3Avx2(const void* data, size_t n);  // hash128_avx2.cpp
#endif

// Eight lanes, each fed every eighth 64-bit word (64-byte stripes), then two
// 64-bit halves that each mix all eight lanes with different rotations.
Hash128 HashBytesBuiltin(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t acc[8];
  for (int l = 0; l < 8; ++l) acc[l] = kP1 * static_cast<uint64_t>(l + 1) + kP5;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int l = 0; l < 8; ++l) acc[l] = Round(acc[l], Load64(p + i + 8 * l));
  }
  int l = 0;
  for (; i + 8 <= n; i += 8) acc[l] = Round(acc[l], Load64(p + i)), ++l;
  if (i < n) {  // zero-padded; the length below tells the lengths apart
    uint64_t last = 0;
    std::memcpy(&last, p + i, n - i);
    acc[l] = Round(acc[l], last);
  }
  uint64_t h1 = n * kP5, h2 = n * kP4;
  for (int k = 0; k < 8; ++k) {
    h1 = (h1 ^ Round(0, Rotl(acc[k], 1 + 7 * k))) * kP1 + kP4;
    h2 = (h2 ^ Round(0, Rotl(acc[7 - k], 5 + 3 * k))) * kP3 + kP2;
  }
  return Hash128{Avalanche(h1), Avalanche(h2 ^ h1)};
}

namespace {

using HashFn = Hash128 (*)(const void*, size_t);

struct Choice {
  HashFn fn;
  const char* name;
};

Choice Choose() {
#if CAIRN_HAVE_XXHASH_AVX2
  if (__builtin_cpu_supports("avx2")) return {HashBytesXxh3Avx2, "xxh3-128-avx2"};
#endif
#if CAIRN_HAVE_XXHASH
  return {Xxh3, "xxh3-128"};
#else
  return {HashBytesBuiltin, "builtin-128"};
#endif
}

const Choice& Chosen() {
  static const Choice choice = Choose();
  return choice;
}

}  // namespace

Hash128 HashBytes(const void* data, size_t n) { return Chosen().fn(data, n); }
const char* HashName() { return Chosen().name; }

}  // namespace cairn
