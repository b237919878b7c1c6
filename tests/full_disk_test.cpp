// A full disk (ENOSPC), a failing fsync, a failing rename and a failing
// directory fsync during a flush, injected with test::FaultFs. The failing
// version reports a clear error from Wait(), earlier versions stay intact, no
// temp file remains, and the application keeps checkpointing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/file_reader.hpp"
#include "os/fs/fs.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/test_memory.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

constexpr size_t kBytes = 300 * kKiB + 11;
const char* const kName = "disk";

// This file's data pattern: the content of version v.
std::vector<uint8_t> VersionData(int64_t v) { return LcgPattern(kBytes, static_cast<uint64_t>(v), 99); }

class FullDiskTest : public ScratchDirTest {
 protected:
  FullDiskTest() : ScratchDirTest("full_disk") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    if (HasFatalFailure()) return;
    config_ = MakeConfig(1 * kMiB, 64 * kKiB);
    config_.keep_versions = 10;
    config_.fs = &faults_;
    ConfigureFor(kind_, config_);
    auto c = Client::Open(config_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    buf_ = std::make_unique<TestBuffer>(kind_, kBytes);
    ASSERT_OK(client_->Protect(7, buf_->data(), buf_->size()));
  }
  void TearDown() override {
    faults_.Reset();
    if (client_) (void)client_->Close();
    client_.reset();
  }

  std::string NameDir() const { return config_.scratch_dir + "/" + kName; }

  Status CheckpointAndWait(int64_t v) {
    buf_->Write(VersionData(v));
    CAIRN_RETURN_IF_ERROR(client_->Checkpoint(kName, v));
    return client_->Wait(kName, v, Level::kLocal);
  }

  // Versions 1 and 2 committed normally.
  void CommitTwo() {
    for (int64_t v = 1; v <= 2; ++v) {
      Status s = CheckpointAndWait(v);
      ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
    }
  }

  void ExpectNoTempFiles() {
    for (const auto& f : Files(NameDir())) {
      EXPECT_EQ(f.find(".tmp"), std::string::npos) << "temp file left: " << f;
    }
  }

  // The first `op` on version 3's file fails with EIO: Wait(3) reports it
  // naming the file, no file or temp file of version 3 is left, Latest stays
  // at 2, and version 4 commits.
  void ExpectOneEioFailsVersion3(test::FaultOp op) {
    faults_.Inject({.op = op, .err = EIO, .nth = 1, .times = 1, .path_filter = VersionFileName(3)});
    Status s = CheckpointAndWait(3);
    EXPECT_EQ(s.code(), Code::kIo) << s.ToString();
    EXPECT_NE(s.message().find(VersionFileName(3)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::strerror(EIO)), std::string::npos) << s.message();
    EXPECT_EQ(faults_.faults_fired(), 1u);
    ExpectNoTempFiles();
    EXPECT_FALSE(fs::exists(NameDir() + "/" + VersionFileName(3)));
    auto latest = client_->Latest(kName);
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    EXPECT_EQ(*latest, 2);
    s = CheckpointAndWait(4);
    EXPECT_TRUE(s.ok()) << s.ToString();
    ASSERT_OK(client_->Close());
    ExpectOnDisk({1, 2, 4}, {3}, 4);
  }

  // The versions in `good` are on disk, verify, and restore exactly in a new
  // client without faults; those in `absent` have no file. Latest is `latest`.
  void ExpectOnDisk(const std::vector<int64_t>& good, const std::vector<int64_t>& absent,
                    int64_t latest) {
    for (int64_t v : good) {
      const std::string path = NameDir() + "/" + VersionFileName(v);
      auto reader = format::FileReader::Open(os::FileSystem::Default(), path);
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      Status s = (*reader)->VerifyAll();
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    for (int64_t v : absent)
      EXPECT_FALSE(fs::exists(NameDir() + "/" + VersionFileName(v))) << "version " << v;
    Config plain = config_;
    plain.fs = nullptr;
    auto c = Client::Open(plain);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    TestBuffer buf(kind_, kBytes);
    ASSERT_OK((*c)->Protect(7, buf.data(), buf.size()));
    auto l = (*c)->Latest(kName);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(*l, latest);
    for (int64_t v : good) {
      Status s = (*c)->Restore(kName, v);
      ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
      EXPECT_TRUE(buf.Read() == VersionData(v)) << "version " << v << " restored wrong data";
    }
    EXPECT_OK((*c)->Close());
  }

  test::FaultFs faults_;
  Config config_;
  MemoryKind kind_ = MemoryKind::kHost;  // of the protected region
  std::unique_ptr<TestBuffer> buf_;     // before client_: outlives it
  std::unique_ptr<Client> client_;      // after faults_: closed before it goes
};

// Storage failures while checkpointing host, device or managed regions
// (testing/test_memory.hpp) keep the committed versions restorable.
class FullDiskKindTest : public FullDiskTest, public ::testing::WithParamInterface<MemoryKind> {
 protected:
  FullDiskKindTest() { kind_ = GetParam(); }
};
INSTANTIATE_TEST_SUITE_P(Kinds, FullDiskKindTest, ::testing::ValuesIn(MemoryKindsUnderTest()),
                         MemoryKindTestName);

TEST_P(FullDiskKindTest, NoSpaceDuringFlush) {
  CommitTwo();
  if (HasFatalFailure()) return;
  // About a third of version 3's file fits.
  faults_.SetWriteBudget(100 * kKiB, config_.scratch_dir);
  buf_->Write(VersionData(3));
  Status s = client_->Checkpoint(kName, 3);
  ASSERT_TRUE(s.ok()) << "Checkpoint only copies to the cache: " << s.ToString();
  s = client_->Wait(kName, 3, Level::kLocal);
  EXPECT_EQ(s.code(), Code::kNoSpace) << s.ToString();
  EXPECT_NE(s.message().find(VersionFileName(3)), std::string::npos)
      << "does not name the file: " << s.message();
  EXPECT_NE(s.message().find(std::strerror(ENOSPC)), std::string::npos) << s.message();
  EXPECT_GT(faults_.faults_fired(), 0u);
  ExpectNoTempFiles();
  EXPECT_FALSE(fs::exists(NameDir() + "/" + VersionFileName(3)));
  auto latest = client_->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 2);
  for (int64_t v : {1, 2}) {
    s = client_->Restore(kName, v);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(buf_->Read() == VersionData(v)) << "version " << v;
  }
  EXPECT_GE(client_->GetStats().failed_flushes, 1u);

  // Still full: more checkpoints (more than the cache holds) return, and
  // fail at Wait.
  for (int64_t v = 10; v < 16; ++v) {
    buf_->Write(VersionData(v));
    s = client_->Checkpoint(kName, v);
    ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
  }
  for (int64_t v = 10; v < 16; ++v) {
    s = client_->Wait(kName, v, Level::kLocal);
    EXPECT_EQ(s.code(), Code::kNoSpace) << "version " << v << ": " << s.ToString();
  }
  ExpectNoTempFiles();

  // Space again: version 4 commits.
  faults_.ClearWriteBudget();
  s = CheckpointAndWait(4);
  ASSERT_TRUE(s.ok()) << s.ToString();
  latest = client_->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 4);
  buf_->Fill(0);
  ASSERT_OK(client_->Restore(kName, 4));
  EXPECT_TRUE(buf_->Read() == VersionData(4));
  // Every error was reported by a Wait: Close has nothing left to report.
  s = client_->Close();
  EXPECT_TRUE(s.ok()) << s.ToString();
  ExpectOnDisk({1, 2, 4}, {3, 10, 11, 12, 13, 14, 15}, 4);
  EXPECT_EQ(Files(NameDir()),
            (std::vector<std::string>{VersionFileName(1), VersionFileName(2), VersionFileName(4)}))
      << Join(Files(NameDir()));
}

// The budget runs out on the tables/footer at commit time instead.
TEST_P(FullDiskKindTest, NoSpaceAtCommit) {
  CommitTwo();
  if (HasFatalFailure()) return;
  // Header + all data blocks of version 3 fit, the table area does not.
  const uint64_t data_bytes = 4096 + (kBytes + 4095) / 4096 * 4096;
  faults_.SetWriteBudget(data_bytes, config_.scratch_dir);
  buf_->Write(VersionData(3));
  ASSERT_OK(client_->Checkpoint(kName, 3));
  Status s = client_->Wait(kName, 3, Level::kLocal);
  EXPECT_EQ(s.code(), Code::kNoSpace) << s.ToString();
  EXPECT_NE(s.message().find(VersionFileName(3)), std::string::npos) << s.message();
  ExpectNoTempFiles();
  faults_.ClearWriteBudget();
  ASSERT_OK(client_->Close());
  ExpectOnDisk({1, 2}, {3}, 2);
}

// Nobody waits for the failing version: Close reports the error.
TEST_F(FullDiskTest, CloseReportsUnwaitedFailure) {
  CommitTwo();
  if (HasFatalFailure()) return;
  faults_.SetWriteBudget(0, config_.scratch_dir);
  buf_->Write(VersionData(3));
  ASSERT_OK(client_->Checkpoint(kName, 3));
  Status s = client_->Close();
  EXPECT_EQ(s.code(), Code::kNoSpace) << s.ToString();
  EXPECT_TRUE(client_->Close().ok()) << "the error is reported once";
  ExpectNoTempFiles();
  faults_.Reset();
  ExpectOnDisk({1, 2}, {3}, 2);
}

TEST_F(FullDiskTest, FailingFsync) {
  CommitTwo();
  if (HasFatalFailure()) return;
  ExpectOneEioFailsVersion3(test::FaultOp::kSync);
}

TEST_F(FullDiskTest, FailingRename) {
  CommitTwo();
  if (HasFatalFailure()) return;
  ExpectOneEioFailsVersion3(test::FaultOp::kRename);
}

TEST_P(FullDiskKindTest, FailingWriteEio) {
  CommitTwo();
  if (HasFatalFailure()) return;
  faults_.Inject({.op = test::FaultOp::kWrite,
                  .err = EIO,
                  .nth = 2,
                  .times = 1,
                  .path_filter = VersionFileName(3)});
  Status s = CheckpointAndWait(3);
  EXPECT_EQ(s.code(), Code::kIo) << s.ToString();
  EXPECT_NE(s.message().find(VersionFileName(3)), std::string::npos) << s.message();
  ExpectNoTempFiles();
  s = CheckpointAndWait(4);
  EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_OK(client_->Close());
  ExpectOnDisk({1, 2, 4}, {3}, 4);
}

// The persistent directory is full: the local level still commits, the
// persistent level reports kNoSpace naming the persistent path, and no temp
// file is left there. With space again, the next version reaches it.
TEST_F(FullDiskTest, PersistentDirectoryFull) {
  ASSERT_OK(client_->Close());
  client_.reset();
  config_.persistent_dir = tmp_.path() + "/persistent";
  auto c = Client::Open(config_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  client_ = std::move(c).value();
  ASSERT_OK(client_->Protect(7, buf_->data(), buf_->size()));
  const std::string pdir = config_.persistent_dir + "/" + kName;
  buf_->Write(VersionData(1));
  ASSERT_OK(client_->Checkpoint(kName, 1));
  ASSERT_OK(client_->Wait(kName, 1, Level::kPersistent));

  faults_.SetWriteBudget(64 * kKiB, config_.persistent_dir);
  buf_->Write(VersionData(2));
  ASSERT_OK(client_->Checkpoint(kName, 2));
  Status s = client_->Wait(kName, 2, Level::kLocal);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = client_->Wait(kName, 2, Level::kPersistent);
  EXPECT_EQ(s.code(), Code::kNoSpace) << s.ToString();
  EXPECT_NE(s.message().find(config_.persistent_dir), std::string::npos) << s.message();
  for (const auto& f : Files(pdir))
    EXPECT_EQ(f.find(".tmp"), std::string::npos) << "temp file left: " << f;
  EXPECT_FALSE(fs::exists(pdir + "/" + VersionFileName(2)));
  EXPECT_TRUE(fs::exists(NameDir() + "/" + VersionFileName(2)));
  auto latest = client_->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 2);

  faults_.ClearWriteBudget();
  buf_->Write(VersionData(3));
  ASSERT_OK(client_->Checkpoint(kName, 3));
  s = client_->Wait(kName, 3, Level::kPersistent);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(pdir + "/" + VersionFileName(3)));
  ASSERT_OK(client_->Close());
  ExpectOnDisk({1, 2, 3}, {}, 3);
}

// The directory fsync after the rename fails: Wait reports it. Whatever the
// library then decides about version 3, Latest and Restore must agree: if
// Latest names 3, Restore(3) gives its data, also once it left the cache and
// in a new client.
TEST_P(FullDiskKindTest, FailingDirectorySyncKeepsLatestAndRestoreConsistent) {
  CommitTwo();
  if (HasFatalFailure()) return;
  faults_.Inject({.op = test::FaultOp::kSyncDir,
                  .err = EIO,
                  .nth = 1,
                  .times = 1,
                  .path_filter = config_.scratch_dir});
  Status s = CheckpointAndWait(3);
  EXPECT_EQ(s.code(), Code::kIo) << s.ToString();
  EXPECT_EQ(faults_.faults_fired(), 1u);
  ExpectNoTempFiles();
  // Push version 3 out of the 1 MiB cache with other names' checkpoints.
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK(client_->Checkpoint("other", i));
    ASSERT_OK(client_->Wait("other", i, Level::kLocal));
  }
  auto latest = client_->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_TRUE(*latest == 2 || *latest == 3) << *latest;
  s = client_->Restore(kName, *latest);
  EXPECT_TRUE(s.ok()) << "Latest() gives " << *latest << " but Restore fails: " << s.ToString();
  if (s.ok()) {
    EXPECT_TRUE(buf_->Read() == VersionData(*latest));
  }
  const int64_t latest_before = *latest;
  (void)client_->Close();
  if (latest_before == 3) {
    ExpectOnDisk({1, 2, 3}, {}, 3);
  } else {
    ExpectOnDisk({1, 2}, {3}, 2);
  }
}

}  // namespace
}  // namespace cairn
