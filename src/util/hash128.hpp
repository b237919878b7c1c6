// A fast 128-bit non-cryptographic hash of a byte range, for change detection
// (capture/changes.hpp): the hash of a chunk is compared with the hash of the
// same chunk at the previous version, and equal hashes mean "unchanged".
//
// XXH3-128 (xxHash 0.8, header-only: no run-time dependency) when CMake found
// xxhash.h (Debian's libxxhash-dev), with an AVX2 build picked at run time on
// CPUs that have it; otherwise a built-in 128-bit hash (two independent
// 64-bit multiply-rotate streams, xxHash64's round) that is slower and less
// studied but keeps `checkpoint.changes = hash` working everywhere. The two
// give different values: hashes are never stored in files, only compared
// within one process, so which one a build uses does not matter to the
// format. docs/design.md ("Change detection") gives the collision risk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn {

struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
};

// The hash of [data, data + n).
Hash128 HashBytes(const void* data, size_t n);

// "xxh3-128-avx2", "xxh3-128" or "builtin-128": the function HashBytes uses.
const char* HashName();

// Internal: the built-in hash, whatever the build (tests compare it).
Hash128 HashBytesBuiltin(const void* data, size_t n);

}  // namespace cairn
