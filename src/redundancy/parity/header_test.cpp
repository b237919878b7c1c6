// The XOR parity file's header (header.hpp): what an encoded header parses
// back to, and a clean kCorrupt for each way a file can be wrong.
#include "redundancy/parity/header.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace cairn::parity::impl {
namespace {

// A set of 3 whose largest bundle is 1000 bytes: chunks of 500.
Header Three() {
  return Header{.version = 12,
                .position = 1,
                .chunk = 500,
                .members = {{.rank = 0, .bytes = 1000, .crc = 7},
                            {.rank = 4, .bytes = 10, .crc = 8},
                            {.rank = 8, .bytes = 0, .crc = 0}}};
}

uint64_t FileSize(const Header& h) { return h.FileSize(); }

// A Reed-Solomon set of 4 with 2 parity rows whose largest bundle is 1000
// bytes: k = 2 data chunks of 500, two rows of 500.
Header FourRs() {
  return Header{.code = L3Code::kRs,
                .parity = 2,
                .version = 3,
                .position = 2,
                .chunk = 500,
                .members = {{.rank = 0, .bytes = 1000, .crc = 1},
                            {.rank = 1, .bytes = 999, .crc = 2},
                            {.rank = 2, .bytes = 0, .crc = 0},
                            {.rank = 3, .bytes = 7, .crc = 4}}};
}

template <typename T>
void Set(std::vector<uint8_t>* m, size_t at, T v) {
  std::memcpy(m->data() + at, &v, sizeof v);
}

::testing::AssertionResult Corrupt(const std::vector<uint8_t>& m, uint64_t file_size,
                                   const std::string& why,
                                   const std::vector<int>* members = nullptr) {
  auto h = ParseHeader(m.data(), m.size(), file_size, "p.cairn", members);
  if (h.ok()) return ::testing::AssertionFailure() << "parsed";
  if (h.status().code() != Code::kCorrupt)
    return ::testing::AssertionFailure() << h.status().ToString();
  const std::string text = h.status().message();
  if (text.find("p.cairn") == std::string::npos || text.find(why) == std::string::npos) {
    return ::testing::AssertionFailure() << text;
  }
  return ::testing::AssertionSuccess();
}

TEST(ParityHeaderTest, ParsesBackToWhatWasEncoded) {
  const Header h = Three();
  const std::vector<uint8_t> m = EncodeHeader(h);
  const std::vector<int> set{0, 4, 8};
  auto back = ParseHeader(m.data(), m.size(), FileSize(h), "p.cairn", &set);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->version, 12);
  EXPECT_EQ(back->position, 1u);
  EXPECT_EQ(back->chunk, 500u);
  ASSERT_EQ(back->members.size(), 3u);
  EXPECT_EQ(back->members[1].rank, 4);
  EXPECT_EQ(back->members[0].bytes, 1000);
  EXPECT_EQ(EncodeHeader(*back), m);
  // Empty bundles still make chunks of one byte.
  Header empty = h;
  for (Member& p : empty.members) p.bytes = 0;
  empty.chunk = 1;
  const std::vector<uint8_t> e = EncodeHeader(empty);
  EXPECT_TRUE(ParseHeader(e.data(), e.size(), FileSize(empty), "p.cairn").ok());
}

TEST(ParityHeaderTest, MalformedHeadersAreCorruptNamingTheFile) {
  const Header h = Three();
  const std::vector<uint8_t> good = EncodeHeader(h);
  const uint64_t size = FileSize(h);
  EXPECT_TRUE(Corrupt(std::vector<uint8_t>(good.begin(), good.begin() + 39), size, "too short"));
  EXPECT_TRUE(Corrupt(good, kFixed + kCrc - 1, "too short"));
  std::vector<uint8_t> m = good;
  m[3] ^= 1;
  EXPECT_TRUE(Corrupt(m, size, "magic"));
  m = good;
  Set<uint32_t>(&m, 8, 2);
  EXPECT_TRUE(Corrupt(m, size, "layout version"));
  m = good;
  Set<uint32_t>(&m, 20, 1);
  EXPECT_TRUE(Corrupt(m, size, "reserved"));
  m = good;
  Set<uint32_t>(&m, kFixed + kPerMember + 20, 1);
  EXPECT_TRUE(Corrupt(m, size, "reserved"));
  m = good;
  Set<uint32_t>(&m, 12, 1);
  EXPECT_TRUE(Corrupt(m, size, "member count"));
  m = good;
  Set<uint32_t>(&m, 16, 3);
  EXPECT_TRUE(Corrupt(m, size, "position"));
  m = good;
  Set<int64_t>(&m, 24, -1);
  EXPECT_TRUE(Corrupt(m, size, "negative version"));
  // A count too large for the bytes given or the file: never read past them.
  m = good;
  Set<uint32_t>(&m, 12, std::numeric_limits<uint32_t>::max());
  Set<uint32_t>(&m, 16, 0);
  EXPECT_TRUE(Corrupt(m, size, "member table"));
  EXPECT_TRUE(Corrupt(std::vector<uint8_t>(good.begin(), good.end() - 1), size, "member table"));
  // The chunk must be what the file has left for it, and what the sizes give.
  EXPECT_TRUE(Corrupt(good, size + 1, "size does not match"));
  m = good;
  Set<uint64_t>(&m, 32, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(Corrupt(m, size, "size does not match"));
  Header h2 = Three();
  h2.chunk = 400;  // 1000 bytes need chunks of 500 in a set of 3
  EXPECT_TRUE(Corrupt(EncodeHeader(h2), FileSize(h2), "chunk size"));
  h2 = Three();
  h2.members[2].bytes = -5;
  EXPECT_TRUE(Corrupt(EncodeHeader(h2), FileSize(h2), "negative"));
  h2 = Three();
  h2.members[0].rank = -1;
  EXPECT_TRUE(Corrupt(EncodeHeader(h2), FileSize(h2), "negative"));
  h2 = Three();
  h2.members[0].bytes = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(Corrupt(EncodeHeader(h2), FileSize(h2), "chunk size"));
}

TEST(ParityHeaderTest, ReedSolomonHeadersCarryTheirRows) {
  const Header h = FourRs();
  const std::vector<uint8_t> m = EncodeHeader(h);
  EXPECT_TRUE(std::equal(std::begin(kRsMagic), std::end(kRsMagic), m.begin()));
  auto back = ParseHeader(m.data(), m.size(), FileSize(h), "p.cairn");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->code, L3Code::kRs);
  EXPECT_EQ(back->parity, 2u);
  EXPECT_EQ(back->chunk, 500u);
  EXPECT_EQ(FileSize(*back), h.Size() + 1000 + kCrc);
  EXPECT_EQ(EncodeHeader(*back), m);
  // Rows out of range, a size of one row, a chunk of XOR's (m - 1) split.
  std::vector<uint8_t> bad = m;
  Set<uint32_t>(&bad, 20, 0);
  EXPECT_TRUE(Corrupt(bad, FileSize(h), "parity row count"));
  Set<uint32_t>(&bad, 20, 4);
  EXPECT_TRUE(Corrupt(bad, FileSize(h), "parity row count"));
  EXPECT_TRUE(Corrupt(m, FileSize(h) - 500, "size does not match"));
  EXPECT_TRUE(Corrupt(m, FileSize(h) + 1, "size does not match"));
  Header xor_chunk = h;
  xor_chunk.chunk = 334;  // ceil(1000 / 3): the chunk of an XOR set of 4
  EXPECT_TRUE(Corrupt(EncodeHeader(xor_chunk), FileSize(xor_chunk), "chunk size"));
}

TEST(ParityHeaderTest, AnotherSetsFileIsNotThisRanks) {
  const Header h = Three();
  const std::vector<uint8_t> m = EncodeHeader(h);
  const std::vector<int> other{0, 4, 9}, bigger{0, 4, 8, 12};
  EXPECT_TRUE(Corrupt(m, FileSize(h), "members are not this rank's set", &other));
  EXPECT_TRUE(Corrupt(m, FileSize(h), "not this rank's set", &bigger));
}

}  // namespace
}  // namespace cairn::parity::impl
