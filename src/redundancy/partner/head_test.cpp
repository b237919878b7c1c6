// The partner copy's head (head.hpp): what an encoded head parses back to,
// and a clean kCorrupt for each way a message from another rank can be wrong.
#include "redundancy/partner/head.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace cairn::partner {
namespace {

Head Files() {
  return Head{.kind = Head::Kind::kFiles,
              .version = 7,
              .name = "state",
              .total = 300,
              .files = {{.number = 7, .bytes = 100}, {.number = 5, .bytes = 200}}};
}

void SetWord(std::vector<uint8_t>* m, size_t at, int64_t v) {
  std::memcpy(m->data() + at, &v, sizeof v);
}

::testing::AssertionResult Corrupt(const std::vector<uint8_t>& m, const std::string& why) {
  auto h = ParseHead(m.data(), m.size(), "rank 3's head");
  if (h.ok()) return ::testing::AssertionFailure() << "parsed";
  if (h.status().code() != Code::kCorrupt)
    return ::testing::AssertionFailure() << h.status().ToString();
  const std::string text = h.status().message();
  if (text.find("rank 3's head") == std::string::npos || text.find(why) == std::string::npos) {
    return ::testing::AssertionFailure() << text;
  }
  return ::testing::AssertionSuccess();
}

TEST(PartnerHeadTest, EachKindParsesBackToWhatWasEncoded) {
  for (const Head& h : {Files(), Head{.kind = Head::Kind::kNothing, .version = 4, .name = "x"},
                        Head{.kind = Head::Kind::kBye, .version = -2}}) {
    const std::vector<uint8_t> m = EncodeHead(h);
    auto back = ParseHead(m.data(), m.size(), "head");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->kind, h.kind);
    EXPECT_EQ(EncodeHead(*back), m);
  }
}

TEST(PartnerHeadTest, MalformedHeadsAreCorruptNamingTheSender) {
  const std::vector<uint8_t> good = EncodeHead(Files());
  EXPECT_TRUE(Corrupt(std::vector<uint8_t>(good.begin(), good.begin() + 39), "39 bytes"));
  std::vector<uint8_t> m = good;
  m[0] ^= 1;
  EXPECT_TRUE(Corrupt(m, "magic"));
  m = good;
  SetWord(&m, 16, -3);
  EXPECT_TRUE(Corrupt(m, "file count"));
  // A count whose 16 bytes per file wrap around 2^64 must not pass the
  // size check (it would read far past the message).
  m.assign(good.begin(), good.begin() + 40);  // the fixed words, then the name alone
  m.insert(m.end(), {'s', 't', 'a', 't', 'e'});
  SetWord(&m, 16, int64_t{1} << 60);  // 40 + 16 * 2^60 + 5 = 45 (mod 2^64)
  EXPECT_TRUE(Corrupt(m, "files in"));
  m = good;
  SetWord(&m, 24, 4);
  EXPECT_TRUE(Corrupt(m, "name's length"));
  m = good;
  SetWord(&m, 32, 301);
  EXPECT_TRUE(Corrupt(m, "add up"));
  m = good;
  SetWord(&m, 32, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(Corrupt(m, "add up"));
  m = good;
  SetWord(&m, 48, -1);  // the first file's size
  EXPECT_TRUE(Corrupt(m, "file 0"));
  m = good;
  SetWord(&m, 8, -5);  // the version
  EXPECT_TRUE(Corrupt(m, "version -5"));
}

// The name becomes a directory under the holder's copies: one that climbs
// out of it, or hides, is refused.
TEST(PartnerHeadTest, ANameThatIsNotACairnNameIsRefused) {
  for (const std::string& name :
       std::vector<std::string>{"../../etc", "a/b", ".hidden", std::string("nul\0x", 5)}) {
    Head h = Files();
    h.name = name;
    EXPECT_TRUE(Corrupt(EncodeHead(h), "malformed")) << name;
  }
}

}  // namespace
}  // namespace cairn::partner
