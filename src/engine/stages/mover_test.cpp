// The Mover driven without a pipeline: committed files are made with the
// format's writer in a temp dir; a fake owner books copies and answers
// retention.
#include "engine/stages/mover.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "format/chain.hpp"
#include "format/file_reader.hpp"
#include "format/file_writer.hpp"
#include "testing/chain_files.hpp"
#include "testing/entry_state.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/test_util.hpp"
#include "util/crc32c.hpp"

namespace cairn::core {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr auto kCkpt = format::EntryKind::kCheckpoint;

class MoverTest : public ::testing::Test, public Mover::Owner {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp.path().empty());
    mover.Start(nullptr);
  }

  // The test fixture is the mover's owner.
  Mover::Owner* Interface() { return this; }
  void Copied(const EntryPtr& e, const Status& s, Mover::TimePoint, double seconds) override
      CAIRN_REQUIRES(mu) {
    EXPECT_GE(seconds, 0.0);
    copies.push_back(s);
    if (s.ok()) test::StateOf(*e).persist.committed = true;
  }
  bool MayRetire(const std::string&, int64_t v, bool in_local) override CAIRN_REQUIRES(mu) {
    asked.insert({v, in_local});
    return !keep_anyway.contains(v);
  }
  void RemoveNameDir(const std::string& name) override CAIRN_REQUIRES(mu) {
    // The chore queued after the deletions runs after them.
    removed_dir_saw.push_back(Committed(local));
    closed.push_back(name);
  }

  // A committed local file of version v (bytes of a pattern), and its entry.
  EntryPtr Commit(int64_t v, uint64_t bytes) {
    auto e = std::make_shared<Entry>();
    e->kind = kCkpt;
    e->name = "ckpt";
    e->number = v;
    e->layout =
        format::Layout::Make({{.id = 1, .memory = MemoryKind::kHost, .bytes = bytes}}, kBlock);
    EXPECT_OK(local.EnsureNameDir(e->name));
    auto w = format::FileWriter::Create(&fs, local.EntryPath(e->name, kCkpt, v),
                                        {.kind = kCkpt, .name = e->name, .number = v}, e->layout,
                                        local.writer_options());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (uint32_t b = 0; b < e->layout.blocks.size(); ++b) {
      const auto data = test::SplitMixPattern(format::AlignUp(kBlock), static_cast<uint64_t>(v), b);
      EXPECT_OK(
          (*w)->WriteBlock(b, data.data(), crc32c::Value(data.data(), e->layout.blocks[b].length)));
    }
    EXPECT_OK((*w)->Commit());
    return e;
  }

  void WaitIdle() {
    MutexLock l(&mu);
    done.wait(l, [&]() CAIRN_REQUIRES(mu) { return mover.Idle(); });
  }
  std::vector<int64_t> Committed(const tiers::FileTier& t) {
    auto r = t.ListCommitted("ckpt", kCkpt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::vector<int64_t>(r->begin(), r->end()) : std::vector<int64_t>{};
  }

  // Layered versions (format v2) written into the local tier.
  test::ChainFiles Chains() {
    return {.fs = &fs, .dir = local.dir(), .name = "ckpt", .bytes = 5 * kBlock + 100};
  }
  static EntryPtr EntryOf(int64_t v) {
    auto e = std::make_shared<Entry>();
    e->kind = kCkpt;
    e->name = "ckpt";
    e->number = v;
    return e;
  }

  test::TempDir tmp{"mover"};
  test::FaultFs fs;
  const format::WriterOptions opts{.direct = false, .fsync = false, .mode = 0600};
  tiers::FileTier local{Level::kLocal, tmp.path() + "/local", &fs, opts};
  tiers::FileTier persistent{Level::kPersistent, tmp.path() + "/persistent", &fs, opts};
  Mutex mu;
  std::condition_variable_any done;
  std::vector<Status> copies CAIRN_GUARDED_BY(mu);
  std::set<std::pair<int64_t, bool>> asked CAIRN_GUARDED_BY(mu);
  std::set<int64_t> keep_anyway CAIRN_GUARDED_BY(mu);
  std::vector<std::string> closed CAIRN_GUARDED_BY(mu);  // RemoveNameDir's names
  std::vector<std::vector<int64_t>> removed_dir_saw CAIRN_GUARDED_BY(mu);
  // The owner's entries: empty (retention reads the files) but for the
  // versions a test marks as being persisted.
  Catalog catalog CAIRN_GUARDED_BY(mu);
  Mover mover{&mu,        &done, &local, &persistent, kBlock, /*keep=*/2, {.catalog = &catalog},
              Interface()};
};

TEST_F(MoverTest, CopiesACommittedFileVerifiedAndBooksIt) {
  EntryPtr e = Commit(1, 3 * kBlock - 10);
  {
    MutexLock l(&mu);
    mover.Copy(e);
  }
  WaitIdle();
  {
    MutexLock l(&mu);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_OK(copies[0]);
    EXPECT_TRUE(e->persist().committed);
  }
  auto r = format::FileReader::Open(&fs, persistent.EntryPath("ckpt", kCkpt, 1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_OK((*r)->VerifyAll());
  EXPECT_EQ((*r)->layout().payload_bytes, 3 * kBlock - 10);
}

TEST_F(MoverTest, ADamagedLocalFileIsNotPropagated) {
  EntryPtr e = Commit(4, 2 * kBlock);
  fs.CorruptReads("/local/");
  {
    MutexLock l(&mu);
    mover.Copy(e);
  }
  WaitIdle();
  MutexLock l(&mu);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].code(), Code::kCorrupt) << copies[0].ToString();
  EXPECT_NE(copies[0].message().find("copy of 'ckpt' 4 to the persistent tier"), std::string::npos)
      << copies[0].ToString();
  EXPECT_FALSE(std::filesystem::exists(persistent.EntryPath("ckpt", kCkpt, 4)));
}

TEST_F(MoverTest, RetentionKeepsTheNewestAndWhatItsOwnerStillNeeds) {
  for (int64_t v = 1; v <= 5; ++v) Commit(v, kBlock);
  {
    MutexLock l(&mu);
    keep_anyway.insert(2);  // say, not yet persisted
    mover.Retain("ckpt");
  }
  WaitIdle();
  EXPECT_EQ(Committed(local), (std::vector<int64_t>{2, 4, 5}));
  MutexLock l(&mu);
  EXPECT_TRUE(asked.contains({1, true}) && asked.contains({3, true}));
  EXPECT_FALSE(asked.contains({4, true}) || asked.contains({5, true}));  // the newest two
}

// In an MPI job, the newest `keep` versions up to the name's global commit
// stay too (a restart agrees on one of them), read from the owner's record.
TEST_F(MoverTest, RetentionAlsoKeepsTheNewestUpToTheGlobalCommit) {
  CommitRecord commits;
  Mover job{&mu,        &done,
            &local,     &persistent,
            kBlock,
            /*keep=*/2, {.catalog = &catalog, .commits = &commits},
            Interface()};
  job.Start(nullptr);
  for (int64_t v = 1; v <= 6; ++v) Commit(v, kBlock);
  {
    MutexLock l(&mu);
    commits.RaiseGlobal("ckpt", 3, 3);
    job.Retain("ckpt");
    done.wait(l, [&]() CAIRN_REQUIRES(mu) { return job.Idle(); });
  }
  EXPECT_EQ(Committed(local), (std::vector<int64_t>{2, 3, 5, 6}));
}

// A kept layered version needs its bases: v1 and v2 are older than the two
// newest, but v3 reads them. Once nothing kept reads the chain, it goes whole.
TEST_F(MoverTest, RetentionKeepsTheChainsOfKeptVersions) {
  Chains().WriteChain(1, 2);  // v1 full, v2 on v1, v3 on v2
  Commit(4, kBlock);          // full (version 1 of the format)
  {
    MutexLock l(&mu);
    mover.Retain("ckpt");
  }
  WaitIdle();
  EXPECT_EQ(Committed(local), (std::vector<int64_t>{1, 2, 3, 4}));
  auto chain = format::Chain::Open(&fs, local.dir(), "ckpt", 3);
  EXPECT_TRUE(chain.ok()) << chain.status().ToString();
  Commit(5, kBlock);
  {
    MutexLock l(&mu);
    mover.Retain("ckpt");
  }
  WaitIdle();
  EXPECT_EQ(Committed(local), (std::vector<int64_t>{4, 5}));
}

// A version its owner still needs stays with its chain.
TEST_F(MoverTest, RetentionKeepsTheChainOfAVersionItsOwnerNeeds) {
  Chains().WriteChain(1, 1);  // v1 full, v2 on v1
  Commit(3, kBlock);
  Commit(4, kBlock);
  {
    MutexLock l(&mu);
    keep_anyway.insert(2);
    mover.Retain("ckpt");
  }
  WaitIdle();
  EXPECT_EQ(Committed(local), (std::vector<int64_t>{1, 2, 3, 4}));
}

// The persistent tier gets the base before the layer, and a base already
// there (same content id) is not copied again.
TEST_F(MoverTest, CopiesAChainBaseFirst) {
  Chains().WriteChain(1, 2);
  const uint64_t b0 = fs.bytes_written();
  {
    MutexLock l(&mu);
    mover.Copy(EntryOf(2));
  }
  WaitIdle();
  EXPECT_EQ(Committed(persistent), (std::vector<int64_t>{1, 2}));
  const uint64_t b1 = fs.bytes_written();
  {
    MutexLock l(&mu);
    mover.Copy(EntryOf(3));
  }
  WaitIdle();
  EXPECT_EQ(Committed(persistent), (std::vector<int64_t>{1, 2, 3}));
  auto chain = format::Chain::Open(&fs, persistent.dir(), "ckpt", 3);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_OK(chain->VerifyAll());
  EXPECT_LT(fs.bytes_written() - b1, b1 - b0);  // v3 only, not v1 and v2 again
  MutexLock l(&mu);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_OK(copies[0]);
  EXPECT_OK(copies[1]);
}

// A base its owner is still persisting delays the layer until Resume.
TEST_F(MoverTest, ALayerWaitsForItsBaseBeingPersisted) {
  Chains().WriteChain(1, 1);
  {
    MutexLock l(&mu);
    EntryPtr base = EntryOf(1);
    test::StateOf(*base).persist.pending = true;  // the persister is still writing it
    catalog.Add(base);
    mover.Copy(EntryOf(2));
  }
  WaitIdle();
  EXPECT_TRUE(Committed(persistent).empty());
  {
    MutexLock l(&mu);
    EXPECT_TRUE(copies.empty());
    test::StateOf(*catalog.Find(kCkpt, "ckpt", 1)).persist.pending = false;
    mover.Resume("ckpt");
  }
  WaitIdle();
  EXPECT_EQ(Committed(persistent), (std::vector<int64_t>{1, 2}));
}

// A broken local chain copies nothing and names the link.
TEST_F(MoverTest, ABrokenLocalChainIsNotCopied) {
  Chains().WriteChain(1, 2);
  ASSERT_OK(local.RemoveEntry("ckpt", kCkpt, 2));
  {
    MutexLock l(&mu);
    mover.Copy(EntryOf(3));
  }
  WaitIdle();
  EXPECT_TRUE(Committed(persistent).empty());
  MutexLock l(&mu);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_NE(copies[0].message().find("v3 -> base v2: missing"), std::string::npos)
      << copies[0].ToString();
}

TEST_F(MoverTest, RemovesAnEntrysFileAndRunsTasksInOrder) {
  Commit(7, kBlock);
  Commit(8, kBlock);
  {
    MutexLock l(&mu);
    mover.HistoryClosed("first");
    mover.Remove(&local, "ckpt", kCkpt, 7);
    mover.HistoryClosed("second");
  }
  WaitIdle();
  MutexLock l(&mu);
  EXPECT_EQ(closed, (std::vector<std::string>{"first", "second"}));
  // The first ran before the deletion, the second after it.
  EXPECT_EQ(removed_dir_saw, (std::vector<std::vector<int64_t>>{{7, 8}, {8}}));
}

TEST_F(MoverTest, RemoveAllDeletesEveryCommittedVersionAfterTheCopiesQueuedBefore) {
  EntryPtr e = Commit(1, 2 * kBlock);
  Commit(2, kBlock);
  {
    MutexLock l(&mu);
    mover.Copy(e);  // reads the local file: the deletion waits for it
    mover.RemoveAll(&local, "ckpt", kCkpt);
  }
  WaitIdle();
  EXPECT_TRUE(Committed(local).empty());
  MutexLock l(&mu);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_OK(copies[0]);
  EXPECT_EQ(Committed(persistent), std::vector<int64_t>{1});
}

}  // namespace
}  // namespace cairn::core
