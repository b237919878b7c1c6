#include "testing/fs/fault_fs.hpp"

#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn::test {
namespace {

class FaultFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "cairn_fault_fs_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << std::strerror(errno);
    dir_ = templ;
    ASSERT_TRUE(fs_.CreateDirs(Path("local"), 0700).ok());
    ASSERT_TRUE(fs_.CreateDirs(Path("persistent"), 0700).ok());
    fs_.Reset();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return os::JoinPath(dir_, name); }

  std::unique_ptr<os::File> OpenWrite(const std::string& name) {
    os::OpenOptions o;
    o.write = true;
    auto f = fs_.Open(Path(name), o);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }
  uint64_t SizeOnDisk(const std::string& name) {
    auto st = os::FileSystem::Default()->Stat(Path(name));
    return st.ok() ? st->size : ~uint64_t{0};
  }

  FaultFs fs_;
  std::string dir_;
};

TEST_F(FaultFsTest, PassesThroughAndCounts) {
  auto f = OpenWrite("local/a");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->WriteAt("hello", 5, 0).ok());
  ASSERT_TRUE(f->Sync().ok());
  char buf[5];
  ASSERT_TRUE(f->ReadAt(buf, 5, 0).ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_TRUE(fs_.Rename(Path("local/a"), Path("local/b")).ok());
  ASSERT_TRUE(fs_.SyncDir(Path("local")).ok());
  EXPECT_EQ(fs_.calls(FaultOp::kOpen), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kWrite), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kRead), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kSync), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kRename), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kSyncDir), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kStat), 0u);
  EXPECT_EQ(fs_.bytes_written(), 5u);
  EXPECT_EQ(fs_.bytes_read(), 5u);
  EXPECT_EQ(fs_.faults_fired(), 0u);
  EXPECT_EQ(SizeOnDisk("local/b"), 5u);
  EXPECT_EQ(fs_.base(), os::FileSystem::Default());
}

TEST_F(FaultFsTest, WriteBudgetBehavesLikeAFullDisk) {
  fs_.SetWriteBudget(10);
  auto f = OpenWrite("local/a");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->WriteAt("123456", 6, 0).ok());
  // Crosses the budget: the 4 bytes that fit are written, then ENOSPC.
  Status s = f->WriteAt("abcdefgh", 8, 6);
  EXPECT_EQ(s.code(), Code::kNoSpace);
  EXPECT_NE(s.message().find("write " + Path("local/a")), std::string::npos) << s.message();
  EXPECT_EQ(SizeOnDisk("local/a"), 10u);
  char buf[10];
  ASSERT_TRUE(f->ReadAt(buf, 10, 0).ok());
  EXPECT_EQ(std::string(buf, 10), "123456abcd");
  // Full: nothing more is written.
  EXPECT_EQ(f->WriteAt("z", 1, 10).code(), Code::kNoSpace);
  EXPECT_EQ(SizeOnDisk("local/a"), 10u);
  EXPECT_EQ(fs_.bytes_written(), 10u);
  EXPECT_EQ(fs_.faults_fired(), 2u);
  // Freeing the budget lets writes through again.
  fs_.ClearWriteBudget();
  EXPECT_TRUE(f->WriteAt("z", 1, 10).ok());
}

TEST_F(FaultFsTest, WriteBudgetOnlyForFilteredPaths) {
  fs_.SetWriteBudget(4, "/persistent/");
  auto local = OpenWrite("local/a");
  auto pers = OpenWrite("persistent/a");
  ASSERT_NE(local, nullptr);
  ASSERT_NE(pers, nullptr);
  std::string big(1000, 'x');
  EXPECT_TRUE(local->WriteAt(big.data(), big.size(), 0).ok());
  EXPECT_EQ(pers->WriteAt(big.data(), big.size(), 0).code(), Code::kNoSpace);
  EXPECT_EQ(SizeOnDisk("local/a"), 1000u);
  EXPECT_EQ(SizeOnDisk("persistent/a"), 4u);
}

TEST_F(FaultFsTest, DirectWritePrefixIsAligned) {
  fs_.SetWriteBudget(os::kDirectIoAlignment + 100);
  os::OpenOptions o;
  o.write = true;
  o.direct = true;
  auto f = fs_.Open(Path("local/d"), o);
  if (!f.ok() && f.status().code() == Code::kUnsupported) GTEST_SKIP() << "no O_DIRECT here";
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, os::kDirectIoAlignment, 2 * os::kDirectIoAlignment), 0);
  std::memset(buf, 1, 2 * os::kDirectIoAlignment);
  Status s = (*f)->WriteAt(buf, 2 * os::kDirectIoAlignment, 0);
  std::free(buf);
  EXPECT_EQ(s.code(), Code::kNoSpace) << s.ToString();
  EXPECT_EQ(SizeOnDisk("local/d"), os::kDirectIoAlignment);
}

TEST_F(FaultFsTest, NthSyncFailsOnce) {
  fs_.Inject({.op = FaultOp::kSync, .err = EIO, .nth = 2});
  auto f = OpenWrite("local/a");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->Sync().ok());
  Status s = f->Sync();
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find(std::strerror(EIO)), std::string::npos) << s.message();
  EXPECT_TRUE(f->Sync().ok());  // times = 1
  EXPECT_EQ(fs_.faults_fired(), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kSync), 3u);
}

TEST_F(FaultFsTest, FailedWriteWritesNothing) {
  fs_.Inject({.op = FaultOp::kWrite, .err = EIO, .nth = 1, .times = 0});
  auto f = OpenWrite("local/a");
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f->WriteAt("abc", 3, 0).code(), Code::kIo);
  EXPECT_EQ(SizeOnDisk("local/a"), 0u);
  EXPECT_EQ(fs_.bytes_written(), 0u);
  EXPECT_EQ(fs_.faults_fired(), 3u);
}

TEST_F(FaultFsTest, WriteFaultWithEnospcErrno) {
  fs_.Inject({.op = FaultOp::kWrite, .err = EDQUOT});
  auto f = OpenWrite("local/a");
  EXPECT_EQ(f->WriteAt("abc", 3, 0).code(), Code::kNoSpace);
  EXPECT_TRUE(f->WriteAt("abc", 3, 0).ok());
}

TEST_F(FaultFsTest, RenameFailsAndLeavesFilesAlone) {
  ASSERT_NE(OpenWrite("persistent/tmp"), nullptr);
  fs_.Inject({.op = FaultOp::kRename, .err = EIO, .path_filter = "/persistent/"});
  ASSERT_NE(OpenWrite("local/tmp"), nullptr);
  EXPECT_TRUE(fs_.Rename(Path("local/tmp"), Path("local/final")).ok());  // filter: not matched
  Status s = fs_.Rename(Path("persistent/tmp"), Path("persistent/final"));
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find("rename"), std::string::npos);
  EXPECT_EQ(SizeOnDisk("persistent/tmp"), 0u);  // still there
  EXPECT_EQ(SizeOnDisk("persistent/final"), ~uint64_t{0});
}

TEST_F(FaultFsTest, RenameFilterMatchesDestination) {
  ASSERT_NE(OpenWrite("local/tmp"), nullptr);
  fs_.Inject({.op = FaultOp::kRename, .err = EXDEV, .path_filter = "/persistent/"});
  EXPECT_EQ(fs_.Rename(Path("local/tmp"), Path("persistent/x")).code(), Code::kIo);
}

TEST_F(FaultFsTest, OpenSyncDirReadAndOtherFaults) {
  ASSERT_NE(OpenWrite("local/a"), nullptr);
  fs_.Inject({.op = FaultOp::kOpen, .err = ENOSPC, .nth = 1, .times = 1, .path_filter = "/local/b"});
  fs_.Inject({.op = FaultOp::kSyncDir, .err = EIO});
  fs_.Inject({.op = FaultOp::kRead, .err = EIO});
  fs_.Inject({.op = FaultOp::kStat, .err = ENOENT});
  fs_.Inject({.op = FaultOp::kList, .err = EACCES});
  fs_.Inject({.op = FaultOp::kCreateDirs, .err = ENOSPC});
  fs_.Inject({.op = FaultOp::kRemove, .err = EIO});
  os::OpenOptions w;
  w.write = true;
  EXPECT_EQ(fs_.Open(Path("local/b"), w).status().code(), Code::kNoSpace);
  EXPECT_EQ(SizeOnDisk("local/b"), ~uint64_t{0});  // never created
  auto f = fs_.Open(Path("local/a"), os::OpenOptions{});
  ASSERT_TRUE(f.ok());
  char c;
  EXPECT_EQ((*f)->ReadAt(&c, 1, 0).code(), Code::kIo);
  EXPECT_EQ(fs_.SyncDir(Path("local")).code(), Code::kIo);
  EXPECT_TRUE(fs_.SyncDir(Path("local")).ok());
  EXPECT_EQ(fs_.Stat(Path("local/a")).status().code(), Code::kNotFound);
  EXPECT_EQ(fs_.List(Path("local")).status().code(), Code::kIo);
  EXPECT_EQ(fs_.CreateDirs(Path("local/x"), 0700).code(), Code::kNoSpace);
  EXPECT_EQ(fs_.Remove(Path("local/a")).code(), Code::kIo);
  EXPECT_EQ(SizeOnDisk("local/a"), 0u);  // not removed
  EXPECT_EQ(fs_.faults_fired(), 7u);
}

TEST_F(FaultFsTest, CorruptReadsFlipsFirstByte) {
  auto f = OpenWrite("local/a");
  ASSERT_TRUE(f->WriteAt("abc", 3, 0).ok());
  fs_.CorruptReads("/local/");
  char buf[3];
  ASSERT_TRUE(f->ReadAt(buf, 3, 0).ok());
  EXPECT_NE(buf[0], 'a');
  EXPECT_EQ(buf[1], 'b');
  fs_.Reset();
  ASSERT_TRUE(f->ReadAt(buf, 3, 0).ok());
  EXPECT_EQ(buf[0], 'a');
}

TEST_F(FaultFsTest, ResetClearsEverything) {
  fs_.Inject({.op = FaultOp::kSync, .err = EIO, .times = 0});
  fs_.SetWriteBudget(0);
  auto f = OpenWrite("local/a");
  EXPECT_FALSE(f->Sync().ok());
  EXPECT_FALSE(f->WriteAt("x", 1, 0).ok());
  fs_.Reset();
  EXPECT_EQ(fs_.calls(FaultOp::kSync), 0u);
  EXPECT_EQ(fs_.calls(FaultOp::kOpen), 0u);
  EXPECT_EQ(fs_.faults_fired(), 0u);
  EXPECT_TRUE(f->Sync().ok());
  EXPECT_TRUE(f->WriteAt("x", 1, 0).ok());
}

TEST_F(FaultFsTest, BudgetIsExactUnderConcurrency) {
  constexpr int kThreads = 8, kWrites = 200, kChunk = 100;
  constexpr uint64_t kBudget = 123456;
  fs_.SetWriteBudget(kBudget);
  std::atomic<uint64_t> ok_bytes{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto f = OpenWrite("local/t" + std::to_string(t));
      std::string chunk(kChunk, 'q');
      for (int i = 0; i < kWrites; ++i) {
        Status s = f->WriteAt(chunk.data(), chunk.size(), static_cast<uint64_t>(i) * kChunk);
        if (s.ok()) {
          ok_bytes += kChunk;
        } else {
          EXPECT_EQ(s.code(), Code::kNoSpace);
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  // 160000 bytes attempted; exactly kBudget land, and exactly one write was cut.
  EXPECT_EQ(fs_.bytes_written(), kBudget);
  EXPECT_EQ(ok_bytes.load(), kBudget / kChunk * kChunk);
  EXPECT_EQ(failures.load(), uint64_t{kThreads} * kWrites - kBudget / kChunk);
  EXPECT_EQ(fs_.calls(FaultOp::kWrite), uint64_t{kThreads} * kWrites);
}

// --- Power loss (testing/fs/power_loss.hpp) ------------------------------------

class PowerLossTest : public FaultFsTest {
 protected:
  void SetUp() override {
    FaultFsTest::SetUp();
    ASSERT_TRUE(fs_.TrackPowerLoss(dir_).ok());
  }
  // The file's content on disk, or "<absent>".
  std::string Content(const std::string& name) {
    std::error_code ec;
    if (!std::filesystem::exists(Path(name), ec)) return "<absent>";
    auto f = os::FileSystem::Default()->Open(Path(name), os::OpenOptions{});
    if (!f.ok()) return "<" + f.status().ToString() + ">";
    auto size = (*f)->Size();
    std::string s(size.ok() ? *size : 0, '\0');
    if (!s.empty() && !(*f)->ReadAt(s.data(), s.size(), 0).ok()) return "<read failed>";
    return s;
  }
  // Creates `name` with `data`, fsynced, and its directory entry fsynced.
  void MakeDurable(const std::string& name, const std::string& data) {
    auto f = OpenWrite(name);
    ASSERT_NE(f, nullptr);
    ASSERT_TRUE(f->WriteAt(data.data(), data.size(), 0).ok());
    ASSERT_TRUE(f->Sync().ok());
    ASSERT_TRUE(f->Close().ok());
    ASSERT_TRUE(fs_.SyncDir(Path("local")).ok());
  }
};

TEST_F(PowerLossTest, WhatExistedWhenTrackingStartedIsDurable) {
  // SetUp made local/ and persistent/ before tracking started.
  Status s = fs_.PowerLoss();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::filesystem::is_directory(Path("local")));
  EXPECT_TRUE(std::filesystem::is_directory(Path("persistent")));
}

TEST_F(PowerLossTest, DataWithoutFsyncIsLost) {
  auto f = OpenWrite("local/a");
  ASSERT_TRUE(fs_.SyncDir(Path("local")).ok());  // the name is durable, the data not
  ASSERT_TRUE(f->WriteAt("hello", 5, 0).ok());
  EXPECT_EQ(Content("local/a"), "hello");  // in the "page cache"
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("local/a"), "");

  MakeDurable("local/a", "hello");
  f = OpenWrite("local/a");  // O_TRUNC, not synced: the old content survives
  ASSERT_TRUE(f->WriteAt("bye", 3, 0).ok());
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("local/a"), "hello");
}

TEST_F(PowerLossTest, FsyncOfAFileDoesNotPersistItsName) {
  auto f = OpenWrite("local/a");
  ASSERT_TRUE(f->WriteAt("hello", 5, 0).ok());
  ASSERT_TRUE(f->Sync().ok());
  EXPECT_GT(fs_.unsynced_changes(), 0u);
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("local/a"), "<absent>");
}

TEST_F(PowerLossTest, RenameAndUnlinkNeedADirectoryFsync) {
  MakeDurable("local/tmp", "data");
  EXPECT_EQ(fs_.unsynced_changes(), 0u);
  ASSERT_TRUE(fs_.Rename(Path("local/tmp"), Path("local/final")).ok());
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("local/final"), "<absent>");  // the rename is undone,
  EXPECT_EQ(Content("local/tmp"), "data");        // the data stays with the file

  ASSERT_TRUE(fs_.Rename(Path("local/tmp"), Path("local/final")).ok());
  ASSERT_TRUE(fs_.SyncDir(Path("local")).ok());
  ASSERT_TRUE(fs_.Remove(Path("local/final")).ok());
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("local/tmp"), "<absent>");
  EXPECT_EQ(Content("local/final"), "data");  // the unlink is undone

  // A directory fsync covers only its own entries.
  ASSERT_TRUE(fs_.Rename(Path("local/final"), Path("persistent/final")).ok());
  ASSERT_TRUE(fs_.SyncDir(Path("persistent")).ok());
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("persistent/final"), "data");
  EXPECT_EQ(Content("local/final"), "data");  // its removal from local/ was not synced
}

TEST_F(PowerLossTest, ANewDirectoryNeedsItsParentFsynced) {
  ASSERT_TRUE(fs_.CreateDirs(Path("local/a/b"), 0700).ok());
  auto f = OpenWrite("local/a/b/x");
  ASSERT_TRUE(f->WriteAt("x", 1, 0).ok());
  ASSERT_TRUE(f->Sync().ok());
  ASSERT_TRUE(fs_.SyncDir(Path("local/a/b")).ok());
  ASSERT_TRUE(fs_.SyncDir(Path("local/a")).ok());
  ASSERT_TRUE(fs_.PowerLoss().ok());  // local/ was not synced: a/ is gone, with all below
  EXPECT_FALSE(std::filesystem::exists(Path("local/a")));

  ASSERT_TRUE(fs_.CreateDirs(Path("local/a/b"), 0700).ok());
  f = OpenWrite("local/a/b/x");
  ASSERT_TRUE(f->WriteAt("x", 1, 0).ok());
  ASSERT_TRUE(f->Sync().ok());
  for (const char* d : {"local/a/b", "local/a", "local"}) ASSERT_TRUE(fs_.SyncDir(Path(d)).ok());
  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_EQ(Content("local/a/b/x"), "x");
}

TEST_F(PowerLossTest, TearKeepsAnOlderPartAndKeepKeepsAll) {
  MakeDurable("local/a", "");
  auto f = OpenWrite("local/a");
  ASSERT_TRUE(f->WriteAt("aaaa", 4, 0).ok());
  ASSERT_TRUE(f->WriteAt("bbbb", 4, 4).ok());
  ASSERT_TRUE(f->WriteAt("cccc", 4, 8).ok());
  ASSERT_TRUE(fs_.Rename(Path("local/a"), Path("local/b")).ok());
  ASSERT_TRUE(fs_.Rename(Path("local/b"), Path("local/c")).ok());
  // Half the unsynced changes, the last of them torn: the truncation by
  // O_TRUNC and the first write cut in half; one of two renames.
  ASSERT_TRUE(fs_.PowerLoss(Unsynced::kTear).ok());
  EXPECT_EQ(Content("local/a"), "<absent>");
  EXPECT_EQ(Content("local/b"), "aa");
  EXPECT_EQ(Content("local/c"), "<absent>");

  f = OpenWrite("local/b");
  ASSERT_TRUE(f->WriteAt("xyz", 3, 0).ok());
  ASSERT_TRUE(fs_.Rename(Path("local/b"), Path("local/c")).ok());
  ASSERT_TRUE(fs_.PowerLoss(Unsynced::kKeep).ok());  // like SIGKILL: nothing lost
  EXPECT_EQ(Content("local/b"), "<absent>");
  EXPECT_EQ(Content("local/c"), "xyz");
}

TEST_F(PowerLossTest, ArmedCutFailsTheNthMutationAndAllLaterCalls) {
  fs_.ArmPowerCut(3);
  auto f = OpenWrite("local/a");                 // 1
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->WriteAt("hello", 5, 0).ok());   // 2
  EXPECT_FALSE(fs_.power_cut());
  Status s = f->Sync();                          // 3: the power is gone
  EXPECT_EQ(s.code(), Code::kIo) << s.ToString();
  EXPECT_TRUE(fs_.power_cut());
  EXPECT_FALSE(f->WriteAt("x", 1, 0).ok());
  char c;
  EXPECT_FALSE(f->ReadAt(&c, 1, 0).ok());
  EXPECT_FALSE(fs_.Stat(Path("local/a")).ok());
  EXPECT_FALSE(fs_.List(Path("local")).ok());
  EXPECT_FALSE(fs_.SyncDir(Path("local")).ok());
  EXPECT_FALSE(fs_.SyncDir(dir_).ok());
  EXPECT_EQ(Content("local/a"), "hello");  // nothing reached the disk after the cut
  EXPECT_EQ(fs_.tracked_mutations(), 3u);  // calls after the cut are not counted
  // Paths outside the tracked tree are another disk.
  EXPECT_TRUE(fs_.Stat(::testing::TempDir()).ok());

  ASSERT_TRUE(fs_.PowerLoss().ok());
  EXPECT_FALSE(fs_.power_cut());
  EXPECT_EQ(fs_.tracked_mutations(), 0u);
  EXPECT_EQ(Content("local/a"), "<absent>");
  f = OpenWrite("local/a");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->WriteAt("x", 1, 0).ok());
  EXPECT_EQ(fs_.tracked_mutations(), 2u);
}

}  // namespace
}  // namespace cairn::test
