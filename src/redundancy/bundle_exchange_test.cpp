// Bundles sent in windows at a collective call (bundle_exchange.hpp), on
// four in-process members (test::LoopbackGroup, one thread each) with
// chains of different sizes, so that the members' bundles span different
// numbers of windows: a ring of copies arrives byte for byte; a sender with
// nothing, a sender whose read fails mid-way, a damaged window and a
// receiver whose disk fails each leave that copy out, nothing half-written,
// and the other copies whole.
#include "redundancy/bundle_exchange.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "redundancy/member_chains_test_util.hpp"
#include "testing/fs/fault_fs.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr size_t kWindow = 10000;  // bundles of 64 KiB .. 1 MiB: 7 to 105 windows

class BundleExchangeTest : public MemberChainsTest {
 protected:
  BundleExchangeTest() : MemberChainsTest("bundle_exchange") {}

  std::string Copies(int r, int from) const {
    return configs_[r].scratch_dir + "/copies/rank" + std::to_string(from) + "/ckpt";
  }

  // Member r sends its bundle of v3 to r + 1 (unless `skip(r)`) and
  // receives r - 1's into Copies; each member's outcome.
  template <typename Skip>
  std::vector<Result<redundancy::BundleOutcome>> Ring(LoopbackHub& hub, const Skip& skip) {
    return OnEveryMember<Result<redundancy::BundleOutcome>>(
        hub, [&](Group& group, int r) -> Result<redundancy::BundleOutcome> {
          std::vector<redundancy::BundleSend> sends(1);
          sends[0].to = (r + 1) % kMembers;
          if (!skip(r)) {
            CAIRN_ASSIGN_OR_RETURN(
                sends[0].reader,
                redundancy::BundleReader::Open(configs_[r], configs_[r].scratch_dir, "ckpt", 3));
            if (opened_) opened_(r);
          }
          const int from = (r + kMembers - 1) % kMembers;
          return redundancy::ExchangeBundles(group, configs_[r], std::move(sends),
                                             {{.from = from, .dir = Copies(r, from)}}, kWindow);
        });
  }

  // Member r holds from's chain v1..v3, byte for byte, and nothing else.
  void ExpectCopy(int r, int from) {
    EXPECT_EQ(Entries(Copies(r, from)).size(), 3u) << "member " << r;
    ExpectSameChain(Own(from), Copies(r, from));
  }

  std::function<void(int)> opened_;  // after member r opened its reader, on its thread
};

TEST_F(BundleExchangeTest, ARingOfCopiesArrivesWholeInWindows) {
  LoopbackHub hub(kMembers);
  size_t messages = 0;
  hub.damage_exchange = [&](int, int, std::vector<uint8_t>& msg) {
    ++messages;
    EXPECT_LE(msg.size(), kWindow + 1) << "one window at a time";
  };
  const auto out = Ring(hub, [](int) { return false; });
  for (int r = 0; r < kMembers; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status().ToString();
    EXPECT_TRUE(out[r]->sent[0].ok()) << out[r]->sent[0].ToString();
    EXPECT_TRUE(out[r]->received[0].ok()) << out[r]->received[0].ToString();
    ExpectCopy(r, (r + kMembers - 1) % kMembers);
  }
  // Every pair exchanged its size and then one message per round, the
  // rounds of the longest bundle (member 2's).
  const size_t longest =
      redundancy::BundleReader::Open(configs_[2], configs_[2].scratch_dir, "ckpt", 3)
          .value()
          ->size();
  EXPECT_EQ(messages, kMembers * (1 + (longest + kWindow - 1) / kWindow));
}

TEST_F(BundleExchangeTest, NothingToSendOrAFailedReadStoresNothing) {
  FaultFs fault;
  configs_[1].fs = &fault;
  // Member 1's second window read fails (its reader's opening reads come first).
  opened_ = [&](int r) {
    if (r == 1) fault.Inject({.op = FaultOp::kRead, .err = EIO, .nth = 2, .times = 0});
  };
  LoopbackHub hub(kMembers);
  const auto out = Ring(hub, [](int r) { return r == 0; });
  for (int r = 0; r < kMembers; ++r) ASSERT_TRUE(out[r].ok()) << out[r].status().ToString();
  EXPECT_EQ(out[1]->received[0].code(), Code::kNotFound) << "member 0 had nothing";
  EXPECT_NE(out[1]->received[0].message().find("rank 0 had no copy"), std::string::npos);
  EXPECT_EQ(out[1]->sent[0].code(), Code::kIo) << out[1]->sent[0].ToString();
  EXPECT_EQ(out[2]->received[0].code(), Code::kNotFound) << out[2]->received[0].ToString();
  EXPECT_NE(out[2]->received[0].message().find("rank 1 could not read"), std::string::npos);
  EXPECT_TRUE(Entries(Copies(1, 0)).empty());
  EXPECT_TRUE(Entries(Copies(2, 1)).empty()) << "no temp file is left";
  ExpectCopy(3, 2);
  ExpectCopy(0, 3);
}

TEST_F(BundleExchangeTest, ADamagedWindowIsCorruptNamingTheSenderAndStoresNothing) {
  LoopbackHub hub(kMembers);
  int from2 = 0;
  hub.damage_exchange = [&](int from, int, std::vector<uint8_t>& msg) {
    // Member 2's first window: its bundle's file count, made absurd.
    if (from == 2 && ++from2 == 2) msg[8] = 0x7f;
  };
  const auto out = Ring(hub, [](int) { return false; });
  for (int r = 0; r < kMembers; ++r) ASSERT_TRUE(out[r].ok()) << out[r].status().ToString();
  EXPECT_EQ(out[3]->received[0].code(), Code::kCorrupt);
  EXPECT_NE(out[3]->received[0].message().find("from rank 2"), std::string::npos)
      << out[3]->received[0].ToString();
  EXPECT_TRUE(Entries(Copies(3, 2)).empty());
  ExpectCopy(0, 3);
  ExpectCopy(1, 0);
  ExpectCopy(2, 1);
}

TEST_F(BundleExchangeTest, AReceiverWhoseDiskFailsKeepsNothingAndTheOthersGoOn) {
  FaultFs fault;
  configs_[2].fs = &fault;
  fault.SetWriteBudget(16 * kKiB, "copies");
  LoopbackHub hub(kMembers);
  const auto out = Ring(hub, [](int) { return false; });
  for (int r = 0; r < kMembers; ++r) ASSERT_TRUE(out[r].ok()) << out[r].status().ToString();
  EXPECT_EQ(out[2]->received[0].code(), Code::kNoSpace) << out[2]->received[0].ToString();
  EXPECT_TRUE(Entries(Copies(2, 1)).empty());
  EXPECT_TRUE(out[1]->sent[0].ok()) << "the sender's side went well";
  ExpectCopy(0, 3);
  ExpectCopy(1, 0);
  ExpectCopy(3, 2);
}

}  // namespace
}  // namespace cairn
