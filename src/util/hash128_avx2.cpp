// XXH3-128 compiled for AVX2 (this file alone gets -mavx2; hash128.cpp calls
// it only on CPUs that have AVX2). It includes nothing but xxhash.h, whose
// functions are static here (XXH_INLINE_ALL), so no AVX2 code can stand in
// for an inline function of another translation unit.
#if CAIRN_HAVE_XXHASH_AVX2
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#include "util/hash128.hpp"

namespace cairn {

Hash128 HashBytesXxh3Avx2(const void* data, size_t n) {
  const XXH128_hash_t h = XXH3_128bits(data, n);
  return Hash128{h.low64, h.high64};
}

}  // namespace cairn
#endif
