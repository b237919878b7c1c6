// A client in a group of one (OpenInGroup over an in-process Group, no MPI):
// what its collective waits write to the global manifests (docs/format.md
// 3.6, docs/mpi.md), counted through a file system wrapper, and retention
// keeping the newest global commit (docs/mpi.md, "Retention").
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redundancy/solo_group.hpp"
#include "cairn/cairn.hpp"
#include "cairn/group.hpp"
#include "os/fs/fs.hpp"
#include "testing/test_util.hpp"
#include "util/mutex.hpp"

namespace cairn {
namespace {

using namespace test;

// Forwards to the default file system, counting the opens for writing of a
// manifest (its temp file or, in place, the file itself).
class CountingFs final : public os::FileSystem {
 public:
  int manifest_writes() const CAIRN_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return writes_;
  }
  Result<std::unique_ptr<os::File>> Open(const std::string& path, const os::OpenOptions& o) override {
    const std::string file = path.substr(path.rfind('/') + 1);
    if (o.write && (file == "global" || file.starts_with(".global."))) {
      MutexLock lock(&mu_);
      ++writes_;
    }
    return base_->Open(path, o);
  }
  Status Rename(const std::string& a, const std::string& b) override { return base_->Rename(a, b); }
  Status Remove(const std::string& p) override { return base_->Remove(p); }
  Status CreateDirs(const std::string& p, uint32_t m) override { return base_->CreateDirs(p, m); }
  Status RemoveDir(const std::string& p) override { return base_->RemoveDir(p); }
  Status SyncDir(const std::string& p) override { return base_->SyncDir(p); }
  Result<std::vector<os::DirEntry>> List(const std::string& p) override { return base_->List(p); }
  Result<os::FileInfo> Stat(const std::string& p) override { return base_->Stat(p); }

 private:
  os::FileSystem* const base_ = os::FileSystem::Default();
  mutable Mutex mu_;
  int writes_ CAIRN_GUARDED_BY(mu_) = 0;
};

// A group of one that runs a hook inside each of its reductions: a test's
// view from within a collective call.
class ObservedGroup final : public Group {
 public:
  std::function<void()> on_reduce;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int node() const override { return 0; }
  bool simulated_nodes() const override { return false; }
  int ranks_per_node() const override { return 0; }
  Status AllReduce(Op, int64_t*, size_t) override {
    if (on_reduce) on_reduce();
    return Status::Ok();
  }
  Status Exchange(const std::vector<Outgoing>& sends, const std::vector<int>& from,
                  std::vector<std::vector<uint8_t>>* received) override {
    return solo_.Exchange(sends, from, received);
  }

 private:
  SoloGroup solo_;
};

class GlobalRecordTest : public ScratchDirTest {
 protected:
  GlobalRecordTest() : ScratchDirTest("global_record") {}

  std::unique_ptr<Client> OpenSolo(Config c) {
    c.fs = &fs_;
    auto client = OpenInGroup(c, std::make_unique<SoloGroup>());
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }
  bool Has(const Config& c, int64_t v) const {
    return std::filesystem::exists(c.scratch_dir + "/rank0/sim/" + VersionFileName(v));
  }

  CountingFs fs_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(100 * kKiB, 7);
};

// An L4 turn waits for the persistent copy first, then records committed and
// persistent at once: one write per manifest (scratch, persistent), not a
// second one of the scratch manifest. A wait for a version already recorded
// writes nothing.
TEST_F(GlobalRecordTest, AWaitWritesEachManifestOnce) {
  Config c = MakeConfig();
  c.l4_every = 1;  // mpi.l4_every: a key of the Config (CAIRN_L4_EVERY is read by LoadConfig only)
  c.persistent_dir = tmp_.path() + "/persistent";
  auto client = OpenSolo(c);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Protect(1, buf_.data(), buf_.size()));
  for (int64_t v = 1; v <= 2; ++v) {
    SCOPED_TRACE("version " + std::to_string(v));
    const int before = fs_.manifest_writes();
    ASSERT_OK(client->Checkpoint("sim", v));
    ASSERT_OK(client->Wait("sim", v, Level::kLocal));
    EXPECT_EQ(fs_.manifest_writes() - before, 2);
    ASSERT_OK(client->Wait("sim", v, Level::kLocal));
    ASSERT_OK(client->Wait("sim", v, Level::kPersistent));
    EXPECT_EQ(fs_.manifest_writes() - before, 2);
  }
  ASSERT_OK(client->Close());
}

// mpi.l4_every = 2: only every 2nd checkpoint goes to the persistent tier
// (full versions: exactly those files are there), a wait for another one at
// kPersistent says why it cannot be, and a restart without the scratch
// directory restores an L4 turn from the persistent tier alone. With
// layered versions an L4 turn brings its chain (checked by restoring it).
TEST_F(GlobalRecordTest, L4EveryWritesOnlyItsTurnsToThePersistentTier) {
  for (const ChangeDetection changes : {ChangeDetection::kFull, ChangeDetection::kHash}) {
    SCOPED_TRACE(ChangeDetectionName(changes));
    Config c = MakeConfig();
    c.scratch_dir = tmp_.path() + "/scratch-" + ChangeDetectionName(changes);
    c.persistent_dir = tmp_.path() + "/persistent-" + ChangeDetectionName(changes);
    c.l4_every = 2;
    c.keep_versions = 8;
    c.changes = changes;
    auto client = OpenSolo(c);
    ASSERT_NE(client, nullptr);
    ASSERT_OK(client->Protect(1, buf_.data(), buf_.size()));
    std::vector<std::vector<uint8_t>> content(5);
    for (int64_t v = 1; v <= 4; ++v) {
      buf_[static_cast<size_t>(v) * 8 * kKiB] = static_cast<uint8_t>(v);  // a change per version
      content[static_cast<size_t>(v)] = buf_;
      ASSERT_OK(client->Checkpoint("sim", v));
      ASSERT_OK(client->Wait("sim", v, Level::kLocal));  // on an L4 turn: persistent too
    }
    const Status s = client->Wait("sim", 3, Level::kPersistent);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("not an L4 turn"), std::string::npos) << s.ToString();
    ASSERT_OK(client->Wait("sim", 4, Level::kPersistent));
    EXPECT_EQ(client->GetStats().mpi.l4_waits, 2u);
    ASSERT_OK(client->Close());
    const std::string dir = c.persistent_dir + "/rank0/sim/";
    EXPECT_TRUE(std::filesystem::exists(dir + VersionFileName(2)));
    EXPECT_TRUE(std::filesystem::exists(dir + VersionFileName(4)));
    if (changes == ChangeDetection::kFull) {  // layered: 1 and 3 are in the chains of 2 and 4
      EXPECT_FALSE(std::filesystem::exists(dir + VersionFileName(1)));
      EXPECT_FALSE(std::filesystem::exists(dir + VersionFileName(3)));
    }

    std::filesystem::remove_all(c.scratch_dir);
    client = OpenSolo(c);
    ASSERT_NE(client, nullptr);
    ASSERT_OK(client->Protect(1, buf_.data(), buf_.size()));
    std::fill(buf_.begin(), buf_.end(), 0);
    ASSERT_OK(client->Restore("sim", 4));
    EXPECT_EQ(buf_, content[4]);
    ASSERT_OK(client->Close());
  }
}

// keep_versions = 1: once version 1 is recorded globally committed, the
// rank's retention keeps it while versions 2 and 3 commit (2 goes), so a
// restart still finds the version every rank agreed on; the record of a
// newer global commit lets it go.
TEST_F(GlobalRecordTest, RetentionKeepsTheNewestGlobalCommit) {
  Config c = MakeConfig();
  c.keep_versions = 1;
  auto client = OpenSolo(c);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Protect(1, buf_.data(), buf_.size()));
  ASSERT_OK(client->Checkpoint("sim", 1));
  ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
  ASSERT_OK(client->Checkpoint("sim", 2));
  ASSERT_OK(client->Checkpoint("sim", 3));
  ASSERT_OK(client->Close());  // drains the retention passes
  EXPECT_TRUE(Has(c, 1)) << "retention deleted the newest global commit";
  EXPECT_FALSE(Has(c, 2));
  EXPECT_TRUE(Has(c, 3));
  // A newer global commit lets them go (retention still bounds the files).
  client = OpenSolo(c);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Protect(1, buf_.data(), buf_.size()));
  ASSERT_OK(client->Checkpoint("sim", 4));
  ASSERT_OK(client->Wait("sim", 4, Level::kLocal));
  ASSERT_OK(client->Close());
  EXPECT_FALSE(Has(c, 1));
  EXPECT_FALSE(Has(c, 3));
  EXPECT_TRUE(Has(c, 4));
}

// A collective restore or latest is a restore the application waits on
// from its first agreement on, its recovery included (a partner copy
// fetched, a rebuild from parity: files read and written), not only while
// it reads: the cache's background touch pauses for all of it
// (Pipeline::RestoreWait), which init.restores_now shows from inside each
// of the call's reductions, and not after it.
TEST_F(GlobalRecordTest, ACollectiveRestoreIsARestoreFromItsFirstAgreement) {
  Config c = MakeConfig();
  c.fs = &fs_;
  c.init = CacheInit::kAdaptive;
  auto owned = std::make_unique<ObservedGroup>();
  ObservedGroup* group = owned.get();
  auto opened = OpenInGroup(c, std::move(owned));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Client> client = std::move(opened).value();
  ASSERT_OK(client->Protect(1, buf_.data(), buf_.size()));
  ASSERT_OK(client->Checkpoint("sim", 1));
  ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
  std::vector<uint64_t> seen;
  group->on_reduce = [&] { seen.push_back(client->GetStats().init.restores_now); };
  const std::vector<std::pair<const char*, std::function<Status()>>> calls = {
      {"RestoreLatest", [&] { return client->RestoreLatest("sim").status(); }},
      {"Restore", [&] { return client->Restore("sim", 1); }},
      {"Latest", [&] { return client->Latest("sim").status(); }},
  };
  for (const auto& [what, call] : calls) {
    SCOPED_TRACE(what);
    seen.clear();
    ASSERT_OK(call());
    ASSERT_FALSE(seen.empty()) << "no reduction seen";
    for (uint64_t n : seen) EXPECT_GE(n, 1u);
    EXPECT_EQ(client->GetStats().init.restores_now, 0u) << "still counted after the call";
  }
  group->on_reduce = nullptr;
  ASSERT_OK(client->Close());
}

}  // namespace
}  // namespace cairn
