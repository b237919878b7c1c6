#include "redundancy/partner/messages.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace cairn::partner {
namespace {

std::vector<uint8_t> Chunk(size_t n, int64_t index) {
  std::vector<uint8_t> m(n + kTrailer);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<uint8_t>(i * 7 + 3);
  PutTrailer(m.data(), n, index);
  return m;
}

template <typename A>
const uint8_t* Bytes(const A& a) {
  return reinterpret_cast<const uint8_t*>(a.data());
}

TEST(PartnerMessagesTest, AChunkIsIntactOnlyAsItsSourceSentIt) {
  std::vector<uint8_t> m = Chunk(100, 4);
  auto c = ParseChunk(m.data(), m.size(), "chunk 4");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->payload, 100u);
  EXPECT_EQ(c->index, 4);
  EXPECT_TRUE(c->intact);
  m[100] ^= 1;  // the index: the CRC covers it
  EXPECT_FALSE(ParseChunk(m.data(), m.size(), "chunk 4")->intact);
  m[100] ^= 1;
  m[10] ^= 1;
  EXPECT_FALSE(ParseChunk(m.data(), m.size(), "chunk 4")->intact);  // payload damaged
  m[10] ^= 1;
  m[m.size() - 1] = 1;  // the pad
  EXPECT_FALSE(ParseChunk(m.data(), m.size(), "chunk 4")->intact);
  std::vector<uint8_t> withdrawn = Chunk(0, kWithdrawn);
  auto w = ParseChunk(withdrawn.data(), withdrawn.size(), "a withdrawal");
  EXPECT_TRUE(w->intact);
  EXPECT_EQ(w->index, kWithdrawn);
}

TEST(PartnerMessagesTest, AChunkWithoutRoomForATrailerIsMalformed) {
  const std::vector<uint8_t> m(kTrailer - 1, 0);
  auto c = ParseChunk(m.data(), m.size(), "chunk 0 from rank 3");
  ASSERT_EQ(c.status().code(), Code::kCorrupt);
  EXPECT_NE(c.status().message().find("chunk 0 from rank 3: 15 bytes, no trailer"),
            std::string::npos);
}

TEST(PartnerMessagesTest, AnAnswerCarriesTheVersionAndAKnownCode) {
  const Answer stored = EncodeAnswer(9, Code::kOk);
  EXPECT_EQ(ParseAnswer(Bytes(stored), sizeof stored, 9, "rank 1").value(), Code::kOk);
  const Answer full = EncodeAnswer(9, Code::kNoSpace);
  EXPECT_EQ(ParseAnswer(Bytes(full), sizeof full, 9, "rank 1").value(), Code::kNoSpace);
  auto other = ParseAnswer(Bytes(stored), sizeof stored, 8, "rank 1");
  ASSERT_EQ(other.status().code(), Code::kCorrupt);
  EXPECT_NE(other.status().message().find("rank 1: an answer to version 9, expected 8"),
            std::string::npos);
  EXPECT_EQ(ParseAnswer(Bytes(stored), sizeof stored - 1, 9, "rank 1").status().code(),
            Code::kCorrupt);
  const Answer unknown{9, -999};
  auto bad = ParseAnswer(Bytes(unknown), sizeof unknown, 9, "rank 1");
  ASSERT_EQ(bad.status().code(), Code::kCorrupt);
  EXPECT_NE(bad.status().message().find("unknown code -999"), std::string::npos);
}

TEST(PartnerMessagesTest, AnAbortNoticeCarriesAnError) {
  const AbortNotice io = EncodeAbort(Code::kIo);
  EXPECT_EQ(ParseAbort(Bytes(io), sizeof io, "rank 2").value(), Code::kIo);
  const AbortNotice magic{1, static_cast<int64_t>(Code::kIo)};
  auto m = ParseAbort(Bytes(magic), sizeof magic, "rank 2");
  ASSERT_EQ(m.status().code(), Code::kCorrupt);
  EXPECT_NE(m.status().message().find("rank 2: an abort notice with a bad magic"),
            std::string::npos);
  AbortNotice ok = EncodeAbort(Code::kIo);
  ok[1] = 0;  // "no error" is not a reason to stop
  EXPECT_EQ(ParseAbort(Bytes(ok), sizeof ok, "rank 2").status().code(), Code::kCorrupt);
  ok[1] = 12345;
  EXPECT_EQ(ParseAbort(Bytes(ok), sizeof ok, "rank 2").status().code(), Code::kCorrupt);
  EXPECT_EQ(ParseAbort(Bytes(io), 8, "rank 2").status().code(), Code::kCorrupt);
}

}  // namespace
}  // namespace cairn::partner
