// Reed-Solomon sets end to end on four in-process members
// (test::LoopbackGroup, one thread each; mpi.l3_code = rs, e = 2): each
// parity row is the code's row over its stripe's chunks (docs/format.md
// 3.9), any two lost members come back byte for byte with their parity
// encoded again, three lost are a note and nothing written, and a damaged
// survivor refuses the rebuild rather than writing wrong data. Skipped
// without ISA-L.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/parity/parity_set_test_util.hpp"
#include "redundancy/parity/rs_code.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"
#include "redundancy/redundancy.hpp"
#include "testing/test_util.hpp"
#include "util/crc32c.hpp"

namespace cairn {
namespace {

using namespace test;

class RsParityTest : public ParitySetTest {
 protected:
  explicit RsParityTest(const Sizes& sizes = kSmall)
      : ParitySetTest("rs_parity", L3Code::kRs, 11, sizes) {}

  void SetUp() override {
    if (!parity::impl::HaveReedSolomon()) GTEST_SKIP() << "built without ISA-L (CAIRN_WITH_ISAL)";
    ParitySetTest::SetUp();
  }

  void EncodeAll() {
    for (const auto& r : OnEveryMember<std::string>(
             [&](Group&group, const parity::Sets&sets, int r) -> Result<std::string> {
               CAIRN_ASSIGN_OR_RETURN(uint64_t bytes,
                                      parity::Encode(group, sets, configs_[r], "sim", 1));
               return std::to_string(bytes);
             }))
      ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Recover's parity steps on every member: offers, then the fetch of v by
  // the members that lack it. A member's result: what it got back, or
  // "offers: none" when the set offered it nothing; notes in notes_[r].
  std::vector<Result<std::string>> RecoverAll(const std::vector<int>& lost) {
    return OnEveryMember<std::string>(
        [&](Group& group, const parity::Sets& sets, int r) -> Result<std::string> {
          MpiStats times;
          auto level = parity::MakeLevel(group, sets, configs_[r], &times);
          CAIRN_ASSIGN_OR_RETURN(auto offers, level->Offers("sim", INT64_MAX, -1));
          const bool need = std::find(lost.begin(), lost.end(), r) != lost.end();
          // Every member fetches together (the lost ones ask for version 1).
          CAIRN_ASSIGN_OR_RETURN(std::string got, level->Fetch("sim", 1, need && !offers.empty()));
          notes_[r] = level->Notes();
          if (need && offers.empty()) return std::string("offers: none");
          return got;
        });
  }

  // Member r's node is gone: its local files and its parity.
  void Lose(int r) { std::filesystem::remove_all(configs_[r].scratch_dir); }

  // Row t of member j's parity file = row t of the code over the chunks of
  // stripe (j - t) mod 4, each member's chunk i being bytes [i c, (i + 1) c)
  // of its bundle, zero-padded (docs/format.md 3.9).
  void ExpectEachRowIsTheCode() {
    EncodeAll();
    const parity::impl::Stripes st{.m = kMembers, .e = 2};
    auto rs = parity::impl::ReedSolomon::Create(st.k(), st.e);
    ASSERT_TRUE(rs.ok());
    size_t longest = 0;
    for (const auto& b : bundles_) longest = std::max(longest, b.size());
    const uint64_t c = (longest + st.k() - 1) / st.k();
    ASSERT_GT(c, 2 * parity::impl::WindowOf(c)) << "the encoding streams several rounds";
    for (int j = 0; j < kMembers; ++j) {
      const std::vector<uint8_t> file = Slurp(ParityPath(j));
      const size_t head = parity::impl::kFixed + parity::impl::kPerMember * kMembers;
      ASSERT_EQ(file.size(), head + 2 * c + parity::impl::kCrc);
      for (size_t t = 0; t < st.e; ++t) {
        const size_t s = st.StripeOfRow(j, t);
        std::vector<std::vector<uint8_t>> chunks(st.k(), std::vector<uint8_t>(c, 0));
        std::vector<const uint8_t*> data;
        for (size_t i = 0; i < st.k(); ++i) {
          const std::vector<uint8_t>& b = bundles_[st.Holder(s, i)];
          for (uint64_t x = 0; x < c && i * c + x < b.size(); ++x) chunks[i][x] = b[i * c + x];
          data.push_back(chunks[i].data());
        }
        std::vector<uint8_t> want(c);
        rs->EncodeRow(t, data.data(), want.data(), c);
        EXPECT_TRUE(
            std::equal(want.begin(), want.end(), file.begin() + static_cast<long>(head + t * c)))
            << "member " << j << " row " << t;
      }
      EXPECT_EQ(crc32c::Value(file.data(), file.size() - parity::impl::kCrc),
                format::le::Get32(&file[file.size() - parity::impl::kCrc]));
    }
  }

  std::vector<std::string> notes_[kMembers];
};

// Each row is the code over its stripe's chunks.
TEST_F(RsParityTest, EachRowIsTheCodeOverItsStripesChunks) { ExpectEachRowIsTheCode(); }

// A chunk longer than a row's write: each row is written in several pieces
// (of whole windows), and it is the same code.
class RsParityLargeTest : public RsParityTest {
 protected:
  RsParityLargeTest() : RsParityTest(kLarge) {}
};

TEST_F(RsParityLargeTest, ARowWrittenInSeveralPiecesIsTheSameCode) {
  const uint64_t c = (kLarge[1] + 1) / 2;  // k = 2 data chunks per stripe
  ASSERT_GT(c, parity::impl::kRowWriteBytes) << "each row goes out in several writes";
  ExpectEachRowIsTheCode();
}

// Every pair of members, and each single one: lost with their nodes, they
// get their bundles back byte for byte, and their parity files are back as
// they were.
TEST_F(RsParityTest, AnyTwoLostMembersComeBack) {
  EncodeAll();
  std::vector<uint8_t> parity[kMembers];
  for (int r = 0; r < kMembers; ++r) parity[r] = Slurp(ParityPath(r));
  const std::vector<std::vector<int>> cases = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}, {2}};
  for (const std::vector<int>& lost : cases) {
    for (int r : lost) Lose(r);
    auto out = RecoverAll(lost);
    for (int r = 0; r < kMembers; ++r) {
      ASSERT_TRUE(out[r].ok()) << r << ": " << out[r].status().ToString();
      const bool was_lost = std::find(lost.begin(), lost.end(), r) != lost.end();
      if (was_lost) {
        EXPECT_NE(out[r]->find("rebuilt from the Reed-Solomon parity"), std::string::npos)
            << *out[r];
        EXPECT_NE(out[r]->find("encoded again"), std::string::npos) << *out[r];
      } else {
        EXPECT_EQ(*out[r], "");
      }
      auto back = redundancy::Bundle(configs_[r], configs_[r].scratch_dir, "sim", 1);
      ASSERT_TRUE(back.ok()) << r << ": " << back.status().ToString();
      EXPECT_EQ(*back, bundles_[r]) << "member " << r << " after losing " << lost.size();
      EXPECT_EQ(Slurp(ParityPath(r)), parity[r]) << "member " << r << "'s parity";
    }
  }
}

// Three lost members of a set of four with e = 2: nothing is offered or
// written, and the lost ranks' note says why.
TEST_F(RsParityTest, ThreeLostMembersAreANote) {
  EncodeAll();
  for (int r : {0, 1, 3}) Lose(r);
  auto out = RecoverAll({0, 1, 3});
  for (int r : {0, 1, 3}) {
    ASSERT_TRUE(out[r].ok()) << out[r].status().ToString();
    EXPECT_EQ(*out[r], "offers: none");
    EXPECT_FALSE(redundancy::Bundle(configs_[r], configs_[r].scratch_dir, "sim", 1).ok());
  }
  bool said = false;
  for (const auto& n : notes_[2])
    said = said || n.find("rebuilds 2 lost member(s) per set, not 3") != std::string::npos;
  EXPECT_TRUE(said) << "no note on rank 2";
}

// A survivor's parity row damaged after the encoding: the lost member
// whose data decodes from it refuses it (its CRC differs) and writes
// nothing, and the damaged survivor names its own file.
TEST_F(RsParityTest, ADamagedSurvivorIsRefusedAndNamed) {
  EncodeAll();
  // Member 3's second row (stripe 2, from which lost member 1's chunk 0,
  // data rather than padding, decodes), near its start.
  std::vector<uint8_t> file = Slurp(ParityPath(3));
  ASSERT_FALSE(file.empty());
  const size_t head = parity::impl::kFixed + parity::impl::kPerMember * kMembers;
  const size_t c = (file.size() - head - parity::impl::kCrc) / 2;
  file[head + c + 10] ^= 0x40;
  {
    auto f = os::FileSystem::Default()->Open(ParityPath(3), os::OpenOptions{.write = true});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->WriteAt(file.data(), file.size(), 0).ok());
  }
  for (int r : {0, 1}) Lose(r);
  auto out = RecoverAll({0, 1});
  // Member 1's chunk 0 decodes from the damaged row: refused, nothing
  // written. Member 0's data decodes from intact symbols (the damaged row
  // gives only its padding): back, and checked against its CRC.
  ASSERT_TRUE(out[1].ok()) << out[1].status().ToString();
  EXPECT_EQ(*out[1], "");
  EXPECT_FALSE(redundancy::Bundle(configs_[1], configs_[1].scratch_dir, "sim", 1).ok());
  ASSERT_TRUE(out[0].ok()) << out[0].status().ToString();
  auto back = redundancy::Bundle(configs_[0], configs_[0].scratch_dir, "sim", 1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, bundles_[0]);
  EXPECT_EQ(out[0]->find("encoded again"), std::string::npos) << "re-encoded without member 1";
  bool named = false;
  for (const auto& n : notes_[3])
    named = named || n.find("checksum does not match") != std::string::npos;
  EXPECT_TRUE(named) << "rank 3 did not name its damaged parity file";
}

}  // namespace
}  // namespace cairn
