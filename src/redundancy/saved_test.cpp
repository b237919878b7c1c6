// Reading a saved job's ranks without MPI (saved.hpp; docs/format.md 3.6-3.8):
// a "job" of three ranks is laid out by plain clients and the manifests they
// would have written, then read back by a client that is in no group, the
// way a serial post-processing tool would. Also the manifest parser and the
// partner map (partner.hpp), which the mpirun tests reach only in one shape.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "redundancy/collective.hpp"
#include "redundancy/partner/partner.hpp"
#include "cairn/cairn.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr int kRanks = 3;
constexpr size_t kBytes = 200 * kKiB + 17;

class SavedTest : public ScratchDirTest {
 protected:
  SavedTest() : ScratchDirTest("saved") {}

  // Saved rank r's data of version v.
  static std::vector<uint8_t> Data(int r, int64_t v) {
    std::vector<uint8_t> d(kBytes);
    FillSplitMix(d.data(), d.size(), static_cast<uint64_t>(v), static_cast<uint64_t>(r));
    return d;
  }

  // Versions 1..versions of every rank in <scratch>/rank<r>, and manifests
  // recording `committed` (real nodes: ranks_per_node 0).
  void Save(int64_t versions, int64_t committed) {
    for (int r = 0; r < kRanks; ++r) {
      Config c = MakeConfig();
      c.scratch_dir = MakeConfig().scratch_dir + "/rank" + std::to_string(r);
      auto client = Client::Open(c);
      ASSERT_TRUE(client.ok()) << client.status().ToString();
      std::vector<uint8_t> buf;
      for (int64_t v = 1; v <= versions; ++v) {
        buf = Data(r, v);
        ASSERT_TRUE((*client)->Protect(7, buf.data(), buf.size()).ok());
        ASSERT_TRUE((*client)->Checkpoint("sim", v).ok());
        ASSERT_TRUE((*client)->Wait("sim", v, Level::kLocal).ok());
      }
      ASSERT_TRUE((*client)->Close().ok());
      const collective::Manifest shape{.ranks = kRanks, .ranks_per_node = 0};
      ASSERT_TRUE(
          collective::RecordGlobal(nullptr, c, c.scratch_dir, "sim", shape, committed, -1).ok());
    }
  }
};

TEST_F(SavedTest, AClientInNoGroupReadsEverySavedRank) {
  Save(3, 2);  // version 3 exists on every rank but was never globally committed
  auto reader = Client::Open(MakeConfig());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto latest = (*reader)->SavedLatest("sim");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->version, 2);
  EXPECT_EQ(latest->ranks, kRanks);
  for (int r = 0; r < kRanks; ++r) {
    auto size = (*reader)->SavedRegionSize("sim", 2, r, 7);
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, kBytes);
    std::vector<uint8_t> got(1000);
    ASSERT_TRUE(
        (*reader)->ReadSavedRegion("sim", 2, r, 7, 64 * kKiB - 300, got.data(), got.size()).ok());
    const std::vector<uint8_t> want = Data(r, 2);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + 64 * kKiB - 300)) << "rank " << r;
  }
  Status s = (*reader)->ReadSavedRegion("sim", 3, 0, 7, 0, nullptr, 0);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("not globally committed"), std::string::npos) << s.ToString();
  auto n = (*reader)->SavedRanks("sim", 3);
  EXPECT_EQ(n.status().code(), Code::kNotFound) << n.status().ToString();
}

TEST_F(SavedTest, AMissingRankFileMakesTheVersionNotSaved) {
  Save(2, 2);
  std::filesystem::remove(MakeConfig().scratch_dir + "/rank1/sim/v00000000000000000002.cairn");
  auto reader = Client::Open(MakeConfig());
  ASSERT_TRUE(reader.ok());
  auto n = (*reader)->SavedRanks("sim", 2);
  EXPECT_EQ(n.status().code(), Code::kNotFound);
  EXPECT_NE(n.status().message().find("saved rank 1"), std::string::npos) << n.status().ToString();
  auto latest = (*reader)->SavedLatest("sim");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->version, 1);
}

TEST(ManifestTest, ParsesWithAndWithoutRanksPerNode) {
  auto m = collective::ParseManifest(
      "cairn-global 1\nranks 4\ncommitted 3\npersistent 2\nranks_per_node 2\n", "m");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->ranks, 4);
  EXPECT_EQ(m->committed, 3);
  EXPECT_EQ(m->persistent, 2);
  EXPECT_EQ(m->ranks_per_node, 2);
  auto old = collective::ParseManifest("cairn-global 1\nranks 4\ncommitted 3\npersistent 2\n", "m");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->ranks_per_node, 0);
  auto bad = collective::ParseManifest("cairn-global 1\nranks 4\ncommitted 3\n", "m");
  EXPECT_EQ(bad.status().code(), Code::kCorrupt);
}

// docs/format.md 3.8: rank i of node n -> rank i mod |n+1| of node n+1.
TEST(PartnerMapTest, NextNodeSameIndexAndUnevenNodes) {
  const std::vector<int> even{0, 0, 1, 1};  // k = 2
  for (int r = 0; r < 4; ++r) EXPECT_EQ(partner::MapFromNodes(even, r).partner, (r + 2) % 4) << r;
  EXPECT_EQ(partner::MapFromNodes(even, 2).sources, std::vector<int>{0});
  const std::vector<int> uneven{0, 0, 0, 1};  // node 0: ranks 0-2, node 1: rank 3
  EXPECT_EQ(partner::MapFromNodes(uneven, 0).partner, 3);
  EXPECT_EQ(partner::MapFromNodes(uneven, 2).partner, 3);
  EXPECT_EQ(partner::MapFromNodes(uneven, 3).partner, 0);
  EXPECT_EQ(partner::MapFromNodes(uneven, 3).sources, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(partner::MapFromNodes(std::vector<int>{0, 0}, 0).partner, -1);  // one node
}

}  // namespace
}  // namespace cairn
