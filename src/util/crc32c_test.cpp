#include "util/crc32c.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cairn::crc32c {
namespace {

// RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, Rfc3720Vectors) {
  unsigned char buf[32];
  std::memset(buf, 0, sizeof buf);
  EXPECT_EQ(0x8A9136AAu, Value(buf, sizeof buf));
  EXPECT_EQ(0x8A9136AAu, ExtendPortable(0, buf, sizeof buf));

  std::memset(buf, 0xff, sizeof buf);
  EXPECT_EQ(0x62A8AB43u, Value(buf, sizeof buf));
  EXPECT_EQ(0x62A8AB43u, ExtendPortable(0, buf, sizeof buf));

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(0x46DD794Eu, Value(buf, sizeof buf));
  EXPECT_EQ(0x46DD794Eu, ExtendPortable(0, buf, sizeof buf));

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(0x113FDB5Cu, Value(buf, sizeof buf));
  EXPECT_EQ(0x113FDB5Cu, ExtendPortable(0, buf, sizeof buf));
}

TEST(Crc32c, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(0xE3069283u, Value(s, 9));
  EXPECT_EQ(0xE3069283u, ExtendPortable(0, s, 9));
}

TEST(Crc32c, EmptyInputLeavesCrcUnchanged) {
  EXPECT_EQ(0u, Value(nullptr, 0));
  EXPECT_EQ(0x12345678u, Extend(0x12345678u, "x", 0));
}

TEST(Crc32c, DifferentDataDifferentCrc) {
  std::string a(1000, 'a');
  std::string b = a;
  b[500] ^= 1;
  EXPECT_NE(Value(a.data(), a.size()), Value(b.data(), b.size()));
}

// The chosen path (ISA-L's in a build with it) and Cairn's own (SSE4.2 when
// available) must agree with slicing-by-8 for every length, including those
// that exercise the three-stream paths (>= 3*256 and >= 3*8192 bytes) and
// their tails, at every alignment.
TEST(Crc32c, HardwareMatchesPortable) {
  std::mt19937_64 rng(42);
  std::vector<unsigned char> buf(3 * 8192 * 2 + 1024);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 100; ++n) lengths.push_back(n);
  for (size_t n : {255, 256, 257, 767, 768, 769, 1000, 4096, 8191, 8192, 24575, 24576, 24577,
                   24576 + 768, 24576 + 769, 40000, 49152, 49152 + 1023}) {
    lengths.push_back(n);
  }
  for (int i = 0; i < 200; ++i) lengths.push_back(rng() % (buf.size() - 8));
  for (size_t n : lengths) {
    for (size_t align = 0; align < 8; ++align) {
      if (align + n > buf.size()) continue;
      const uint32_t seed = static_cast<uint32_t>(rng());
      const uint32_t want = ExtendPortable(seed, buf.data() + align, n);
      ASSERT_EQ(want, Extend(seed, buf.data() + align, n)) << "length " << n << " alignment " << align;
      ASSERT_EQ(want, ExtendOwn(seed, buf.data() + align, n)) << "length " << n << " alignment " << align;
    }
  }
}

TEST(Crc32c, ExtendInPiecesEqualsOneShot) {
  std::mt19937_64 rng(7);
  std::vector<unsigned char> buf(100000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  const uint32_t whole = Value(buf.data(), buf.size());
  for (int trial = 0; trial < 50; ++trial) {
    uint32_t crc = 0;
    uint32_t portable = 0;
    size_t pos = 0;
    while (pos < buf.size()) {
      size_t piece = std::min<size_t>(rng() % 30000, buf.size() - pos);
      crc = Extend(crc, buf.data() + pos, piece);
      portable = ExtendPortable(portable, buf.data() + pos, piece);
      pos += piece;
    }
    ASSERT_EQ(whole, crc);
    ASSERT_EQ(whole, portable);
  }
}

TEST(Crc32c, CombineEqualsTheCrcOfTheConcatenation) {
  std::mt19937_64 rng(11);
  std::vector<unsigned char> buf(70000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{33333}, buf.size()}) {
    const uint32_t a = Value(buf.data(), cut), b = Value(buf.data() + cut, buf.size() - cut);
    ASSERT_EQ(Value(buf.data(), buf.size()), Combine(a, b, buf.size() - cut)) << "cut at " << cut;
  }
  // A B of several MiB, in pieces, as a rebuild's chunks arrive.
  std::vector<unsigned char> zeros(1 << 20, 0);
  uint32_t whole = Value(buf.data(), 100), b = 0;
  for (int i = 0; i < 3; ++i) {
    whole = Extend(whole, zeros.data(), zeros.size());
    b = Extend(b, zeros.data(), zeros.size());
  }
  EXPECT_EQ(whole, Combine(Value(buf.data(), 100), b, uint64_t{3} << 20));
}

TEST(Crc32c, UsesHardwareWhenTheCpuHasIt) {
#if CAIRN_HAVE_ISAL
  EXPECT_TRUE(IsHardwareAccelerated()) << "ISA-L's path";
#elif defined(__x86_64__)
  EXPECT_EQ(__builtin_cpu_supports("sse4.2") != 0, IsHardwareAccelerated());
#else
  EXPECT_FALSE(IsHardwareAccelerated());
#endif
}

}  // namespace
}  // namespace cairn::crc32c
