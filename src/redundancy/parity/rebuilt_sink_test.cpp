// A rebuilt bundle placed window by window in any order (rebuilt_sink.hpp):
// a full version goes straight into its file and a chain through an
// unlinked spool; either commits the files byte for byte, bases first, and
// leaves nothing when dropped uncommitted or when the bundle is malformed.
#include "redundancy/parity/rebuilt_sink.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "redundancy/bundle_stream.hpp"
#include "testing/chain_files.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

class RebuiltSinkTest : public ScratchDirTest {
 protected:
  RebuiltSinkTest() : ScratchDirTest("rebuilt_sink") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    config_ = MakeConfig();
    ChainFiles chain{.fs = os::FileSystem::Default(), .dir = Src(), .bytes = 300 * kKiB + 5};
    chain.WriteChain(1, 2);  // v1 full, v2 and v3 layered on it
  }
  std::string Src() const { return config_.scratch_dir + "/src"; }
  std::string Dst() const { return config_.scratch_dir + "/dst/ckpt"; }
  static std::string File(int64_t v) {
    return "/" + format::EntryFileName(format::EntryKind::kCheckpoint, v);
  }

  std::vector<uint8_t> BundleOf(int64_t v) {
    auto r = redundancy::BundleReader::Open(config_, Src(), "ckpt", v);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<uint8_t> b((*r)->size());
    EXPECT_TRUE((*r)->Read(0, b.data(), b.size()).ok());
    return b;
  }
  // Places `bundle` in windows of 7000 bytes, shuffled (the first one
  // first: Begin needs it).
  Status PlaceShuffled(parity::impl::Sink& sink, int64_t v, const std::vector<uint8_t>& bundle) {
    constexpr uint64_t kPiece = 7000;
    CAIRN_RETURN_IF_ERROR(sink.Begin(config_, Dst(), v, bundle.data(),
                                     std::min<uint64_t>(kPiece, bundle.size()), bundle.size()));
    std::vector<uint64_t> at;
    for (uint64_t a = 0; a < bundle.size(); a += kPiece) at.push_back(a);
    std::shuffle(at.begin() + 1, at.end(), std::mt19937(3));
    for (uint64_t a : at)
      CAIRN_RETURN_IF_ERROR(
          sink.Place(bundle.data() + a, a, std::min<uint64_t>(kPiece, bundle.size() - a)));
    return Status::Ok();
  }
  std::vector<std::string> DstEntries() const {
    std::vector<std::string> names;
    auto list = os::FileSystem::Default()->List(Dst());
    if (list.ok())
      for (const auto& e : *list) names.push_back(e.name);
    return names;
  }

  Config config_;
};

TEST_F(RebuiltSinkTest, AChainGoesThroughItsSpoolIntoItsFiles) {
  const std::vector<uint8_t> bundle = BundleOf(3);
  parity::impl::Sink sink;
  ASSERT_TRUE(PlaceShuffled(sink, 3, bundle).ok());
  EXPECT_TRUE(DstEntries().empty()) << "the spool is unlinked, nothing is committed yet";
  ASSERT_TRUE(sink.Commit(config_, Dst(), "the test").ok());
  EXPECT_EQ(DstEntries().size(), 3u);
  for (int64_t v = 1; v <= 3; ++v)
    EXPECT_TRUE(Slurp(Dst() + File(v)) == Slurp(Src() + "/ckpt" + File(v))) << v;
}

TEST_F(RebuiltSinkTest, AFullVersionGoesStraightIntoItsFile) {
  const std::vector<uint8_t> bundle = BundleOf(1);
  parity::impl::Sink sink;
  ASSERT_TRUE(PlaceShuffled(sink, 1, bundle).ok());
  ASSERT_TRUE(sink.Commit(config_, Dst(), "the test").ok());
  EXPECT_EQ(DstEntries().size(), 1u);
  EXPECT_TRUE(Slurp(Dst() + File(1)) == Slurp(Src() + "/ckpt" + File(1)));
}

TEST_F(RebuiltSinkTest, DroppedOrMalformedLeavesNothing) {
  std::vector<uint8_t> bundle = BundleOf(3);
  {
    parity::impl::Sink sink;
    ASSERT_TRUE(PlaceShuffled(sink, 3, bundle).ok());
  }  // dropped uncommitted
  EXPECT_TRUE(DstEntries().empty());
  // The second file's head says it is longer than the bundle.
  const auto v3 = Slurp(Src() + "/ckpt" + File(3));
  const int64_t huge = int64_t{1} << 40;
  std::memcpy(bundle.data() + 24 + v3.size() + 8, &huge, sizeof huge);
  parity::impl::Sink sink;
  ASSERT_TRUE(PlaceShuffled(sink, 3, bundle).ok());
  const Status s = sink.Commit(config_, Dst(), "the test");
  EXPECT_EQ(s.code(), Code::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("from the test"), std::string::npos) << s.ToString();
  EXPECT_TRUE(DstEntries().empty()) << "no file of the chain is committed";
}

}  // namespace
}  // namespace cairn
