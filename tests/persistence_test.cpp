// The persistent tier through a Client (docs/design.md, "Persistence"): a
// checkpoint reaches it from the host cache, concurrently with the local
// flush, without reading the local file back; when a capture needs the
// cache's room first, the persister gives the version up and the mover copies
// the committed local file instead. Either way every version waited for at
// kPersistent restores from the persistent tier alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr uint64_t kBlock = 256 * kKiB;

class PersistenceTest : public ScratchDirTest {
 protected:
  PersistenceTest() : ScratchDirTest("persistence") {}

  Config PersistentConfig(uint64_t cache, os::FileSystem* fs) {
    Config c = MakeConfig(cache, kBlock);
    c.persistent_dir = tmp_.path() + "/persistent";
    c.fs = fs;
    return c;
  }

  // Checkpoints version v of `buf` (filled with pattern v first).
  static Status CheckpointVersion(Client& client, std::vector<uint8_t>& buf, int64_t v) {
    FillSplitMix(buf.data(), buf.size(), static_cast<uint64_t>(v), /*salt=*/11);
    return client.Checkpoint("state", v);
  }

  // With the scratch directory gone (the node died with its disk), a new
  // client restores each of `versions` from the persistent tier alone.
  void ExpectRestorableFromPersistentOnly(const std::vector<int64_t>& versions, size_t bytes) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_.path() + "/scratch", ec);
    ASSERT_FALSE(ec) << ec.message();
    auto client = OpenClient(PersistentConfig(4 * kMiB, nullptr));
    ASSERT_TRUE(client);
    std::vector<uint8_t> buf(bytes);
    ASSERT_OK(client->Protect(1, buf.data(), buf.size()));
    for (int64_t v : versions) {
      ASSERT_OK(client->Restore("state", v));
      EXPECT_TRUE(SameBytes(buf, SplitMixPattern(bytes, static_cast<uint64_t>(v), 11))) << "version " << v;
    }
    ASSERT_OK(client->Close());
  }
};

TEST_F(PersistenceTest, CopiesFromTheCacheWithoutReadingTheLocalFile) {
  GateFs fs("", /*gate_reads=*/false, /*armed=*/false);  // counts reads only
  auto client = OpenClient(PersistentConfig(8 * kMiB, &fs));
  ASSERT_TRUE(client);
  std::vector<uint8_t> buf(1 * kMiB + 1000);  // five blocks, the last one short
  ASSERT_OK(client->Protect(1, buf.data(), buf.size()));
  for (int64_t v = 1; v <= 3; ++v) {
    ASSERT_OK(CheckpointVersion(*client, buf, v));
    ASSERT_OK(client->Wait("state", v, Level::kPersistent));
  }
  const Stats st = client->GetStats();
  ASSERT_OK(client->Close());
  EXPECT_EQ(fs.bytes_read("/scratch/"), 0u) << "the persistent copy read the local file back";
  EXPECT_EQ(st.persist_file_copies, 0u);
  EXPECT_EQ(st.flush_persistent.ops, 3u);
  EXPECT_EQ(st.flush_persistent.bytes, 3 * buf.size());
  EXPECT_EQ(st.failed_flushes, 0u);
  ExpectRestorableFromPersistentOnly({2, 3}, buf.size());  // keep_versions = 2
}

TEST_F(PersistenceTest, ACaptureTakesTheRoomBackAndTheFileCopyTakesOver) {
  // The persister stops at its first file open in the persistent tier.
  GateFs fs("/persistent/");
  auto client = OpenClient(PersistentConfig(1 * kMiB, &fs));  // four chunks
  ASSERT_TRUE(client);
  GateRelease release{&fs};  // after the client: runs first at scope exit
  std::vector<uint8_t> buf(1 * kMiB);  // one version fills the cache
  ASSERT_OK(client->Protect(1, buf.data(), buf.size()));
  ASSERT_OK(CheckpointVersion(*client, buf, 1));
  ASSERT_OK(client->Wait("state", 1, Level::kLocal));
  ASSERT_TRUE(fs.WaitBlocked(std::chrono::seconds(60))) << "the persister never opened its file";
  // Version 1's blocks are written locally but held for the persister: the
  // capture of version 2 takes them back instead of waiting for it.
  ASSERT_OK(CheckpointVersion(*client, buf, 2));
  ASSERT_OK(client->Wait("state", 2, Level::kLocal));
  Stats st = client->GetStats();
  EXPECT_GE(st.persist_holds_released, 1u);
  EXPECT_EQ(st.flush_persistent.ops, 0u);

  fs.Release();
  ASSERT_OK(client->Wait("state", 1, Level::kPersistent));
  ASSERT_OK(client->Wait("state", 2, Level::kPersistent));
  st = client->GetStats();
  ASSERT_OK(client->Close());
  // Version 1 was evicted before the persister got to it: copied from its
  // local file, verified on the way.
  EXPECT_GE(st.persist_file_copies, 1u);
  EXPECT_GT(fs.bytes_read("/scratch/"), 0u);
  EXPECT_EQ(st.flush_persistent.ops, 2u);
  ExpectRestorableFromPersistentOnly({1, 2}, buf.size());
}

TEST_F(PersistenceTest, APersistentWriteErrorIsReportedAndTheLocalVersionStands) {
  FaultFs fs;
  fs.Inject({.op = FaultOp::kWrite, .err = EIO, .nth = 2, .path_filter = "/persistent/"});
  auto client = OpenClient(PersistentConfig(4 * kMiB, &fs));
  ASSERT_TRUE(client);
  std::vector<uint8_t> buf(1 * kMiB);
  ASSERT_OK(client->Protect(1, buf.data(), buf.size()));
  ASSERT_OK(CheckpointVersion(*client, buf, 1));
  ASSERT_OK(client->Wait("state", 1, Level::kLocal));
  Status s = client->Wait("state", 1, Level::kPersistent);
  EXPECT_EQ(s.code(), Code::kIo) << s.ToString();
  EXPECT_NE(s.message().find("persistent"), std::string::npos) << s.ToString();
  // The next version is not affected.
  ASSERT_OK(CheckpointVersion(*client, buf, 2));
  ASSERT_OK(client->Wait("state", 2, Level::kPersistent));
  ASSERT_OK(client->Restore("state", 1));  // from the cache or the local file
  EXPECT_TRUE(SameBytes(buf, SplitMixPattern(buf.size(), 1, 11)));
  ASSERT_OK(client->Close());
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/persistent/state/" + VersionFileName(1)));
}

}  // namespace
}  // namespace cairn
