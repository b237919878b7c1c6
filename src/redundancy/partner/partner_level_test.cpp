// The partner level on four in-process members (test::LoopbackGroup, one
// thread each, one member per node: member r's partner is r + 1): the
// copies of the collective path (Replicate) are each source's chain byte
// for byte; after a lost node, Recover brings the lost member's version
// back from its partner and sends the copies the lost node held again
// (Refill), in windows (redundancy::ExchangeBundles).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/member_chains_test_util.hpp"
#include "redundancy/partner/partner.hpp"
#include "redundancy/redundancy.hpp"

namespace cairn {
namespace {

using namespace test;

class PartnerLevelTest : public MemberChainsTest {
 protected:
  PartnerLevelTest() : MemberChainsTest("partner_level") {}

  void SetUp() override {
    MemberChainsTest::SetUp();
    for (int r = 0; r < kMembers; ++r) maps_[r] = partner::MapFromNodes({0, 1, 2, 3}, r);
  }
  std::vector<Status> OnEveryMember(const std::function<Status(Group&, int)>& step) {
    LoopbackHub hub(kMembers);
    return MemberChainsTest::OnEveryMember<Status>(hub, step);
  }
  std::string Copy(int holder, int source) const {
    return partner::CopyDir(configs_[holder], source) + "/ckpt";
  }

  partner::Map maps_[kMembers];
};

TEST_F(PartnerLevelTest, ReplicateThenRecoverALostNodeFromThePartner) {
  for (const Status& s : OnEveryMember(
           [&](Group&g, int r) { return partner::Replicate(g, maps_[r], configs_[r], "ckpt", 3); }))
    ASSERT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < kMembers; ++r) ExpectSameChain(Own(r), Copy((r + 1) % kMembers, r));

  // Member 1's node is lost: its own chain and the copies of member 0 it held.
  const std::vector<uint8_t> v3 =
      Slurp(Own(1) + "/" + format::EntryFileName(format::EntryKind::kCheckpoint, 3));
  std::filesystem::remove_all(configs_[1].scratch_dir);
  std::vector<std::string> served(kMembers), notes(kMembers);
  for (const Status& s : OnEveryMember([&](Group&g, int r) -> Status {
         auto level = partner::MakeLevel(g, maps_[r], configs_[r]);
         const std::vector<int64_t> intact =
             r == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{3, 2, 1};
         CAIRN_ASSIGN_OR_RETURN(auto got, redundancy::Recover(g, configs_[r], {level.get()}, "ckpt",
                                                              intact, INT64_MAX, -1));
         if (got.version != 3) return Status::Internal("agreed on " + std::to_string(got.version));
         served[r] = got.served;
         for (const std::string& n : got.notes) notes[r] += n + "\n";
         return Status::Ok();
       }))
    ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(served[1].find("from its partner copy on rank 2"), std::string::npos) << served[1];
  EXPECT_TRUE(Slurp(Own(1) + File(3)) == v3);
  EXPECT_TRUE(
      format::Chain::Open(os::FileSystem::Default(), configs_[1].scratch_dir, "ckpt", 3).ok())
      << "its chain came back with it, bases first";
  // Member 0's copy at member 1 was sent again.
  EXPECT_NE(notes[0].find("sent again to rank 1"), std::string::npos) << notes[0];
  ExpectSameChain(Own(0), Copy(1, 0));
}

}  // namespace
}  // namespace cairn
