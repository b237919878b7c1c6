#include "util/hash128.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cairn {
namespace {

using HashFn = Hash128 (*)(const void*, size_t);

// Every single-bit flip of every byte changes the hash, for lengths around
// the stripe (64 B) and word (8 B) boundaries and a 64 KiB chunk.
void ExpectEveryBitFlipChangesTheHash(HashFn hash, const char* name) {
  std::mt19937 rng(1);
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{64}, size_t{65}, size_t{200},
                   size_t{65536}}) {
    std::vector<uint8_t> data(n);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const Hash128 h = hash(data.data(), n);
    EXPECT_EQ(hash(data.data(), n), h);  // deterministic
    const size_t step = n > 1024 ? 97 : 1;  // the 64 KiB case: a sample of bytes
    for (size_t i = 0; i < n; i += step) {
      for (int bit : {0, 7}) {
        data[i] ^= static_cast<uint8_t>(1 << bit);
        EXPECT_NE(hash(data.data(), n), h) << name << ": length " << n << ", byte " << i << ", bit " << bit;
        data[i] ^= static_cast<uint8_t>(1 << bit);
      }
    }
  }
}

TEST(Hash128, EveryBitFlipChangesTheHash) {
  ExpectEveryBitFlipChangesTheHash(HashBytes, HashName());
  ExpectEveryBitFlipChangesTheHash(HashBytesBuiltin, "builtin-128");
}

// Zero-filled inputs differ only in length (the built-in hash zero-pads).
TEST(Hash128, LengthsOfZerosAllDiffer) {
  const std::vector<uint8_t> zeros(300, 0);
  for (HashFn hash : {HashBytes, HashBytesBuiltin}) {
    std::set<std::pair<uint64_t, uint64_t>> seen;
    for (size_t n = 0; n <= zeros.size(); ++n) {
      const Hash128 h = hash(zeros.data(), n);
      EXPECT_TRUE(seen.insert({h.lo, h.hi}).second) << "length " << n;
    }
  }
}

// No two of many similar inputs (a counter in 16 bytes) share either half.
TEST(Hash128, NoCollisionsInEitherHalfOverACounter) {
  for (HashFn hash : {HashBytes, HashBytesBuiltin}) {
    std::set<uint64_t> lo, hi;
    for (uint64_t i = 0; i < 100000; ++i) {
      const uint64_t in[2] = {i, 0};
      const Hash128 h = hash(in, sizeof in);
      EXPECT_TRUE(lo.insert(h.lo).second) << i;
      EXPECT_TRUE(hi.insert(h.hi).second) << i;
    }
  }
}

// The build's choice is the real XXH3-128 (known value of the empty input),
// or the built-in hash.
TEST(Hash128, TheChosenFunction) {
  const std::string name = HashName();
  if (name.rfind("xxh3-128", 0) == 0) {
    const Hash128 h = HashBytes("", 0);
    EXPECT_EQ(h.lo, 0x6001C324468D497Full);
    EXPECT_EQ(h.hi, 0x99AA06D3014798D8ull);
  } else {
    EXPECT_EQ(name, "builtin-128");
    const uint8_t data[3] = {1, 2, 3};
    EXPECT_EQ(HashBytes(data, 3), HashBytesBuiltin(data, 3));
  }
}

}  // namespace
}  // namespace cairn
