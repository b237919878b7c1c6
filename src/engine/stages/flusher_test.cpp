// The Flusher driven without a pipeline: a fake owner holds a small
// BlockStore and books what the flusher reports; files go to a temp dir
// through a FaultFs.
#include "engine/stages/flusher.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "format/file_reader.hpp"
#include "testing/entry_state.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/store_owner.hpp"
#include "testing/test_util.hpp"
#include "util/crc32c.hpp"

namespace cairn::core {
namespace {

constexpr uint32_t kBlock = 4096;

struct FakeOwner final : test::StoreOwner, Flusher::Owner {
  test::TempDir tmp{"flusher"};
  test::FaultFs fs;
  tiers::FileTier tier{
      Level::kLocal, tmp.path(), &fs, {.direct = false, .fsync = false, .mode = 0600}};
  std::set<std::string> dirs CAIRN_GUARDED_BY(mu);  // name directories known to exist
  // Directories the flushes created (FaultFs counts the calls).
  uint64_t dirs_made() const { return fs.calls(test::FaultOp::kCreateDirs); }
  int unpins CAIRN_GUARDED_BY(mu) = 0;
  MemoryMovers movers;  // the block writes count as background I/O
  // What the unpins saw: every block write's transition came first.
  bool marked_before_unpin CAIRN_GUARDED_BY(mu) = true;
  FlushMarks marks;  // the flusher's (a persister's differ)
  std::vector<Status> fails CAIRN_GUARDED_BY(mu);
  int skipped CAIRN_GUARDED_BY(mu) = 0;
  int committed CAIRN_GUARDED_BY(mu) = 0;
  int flushed CAIRN_GUARDED_BY(mu) = 0;
  std::map<const Entry*, int> entry_unpins CAIRN_GUARDED_BY(mu);

  explicit FakeOwner(FlushMarks m = {}) : StoreOwner(16, kBlock), marks(m) {}

  // Blocks of e with the flusher's written mark.
  int Marked(const Entry& e) const {
    int n = 0;
    for (const BlockState& bs : e.blocks()) n += marks.Written(bs) ? 1 : 0;
    return n;
  }
  uint8_t* Chunk(const Entry& e, uint32_t b) CAIRN_REQUIRES(mu) {
    return store.data(static_cast<uint32_t>(e.blocks()[b].chunk));
  }

  Flusher::Owner* Interface() { return this; }
  void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(mu) {
    // One pin per block write, unpinned after the block is marked.
    ++entry_unpins[e.get()];
    marked_before_unpin = marked_before_unpin && Marked(*e) >= entry_unpins[e.get()];
    --test::StateOf(*e).pins, ++unpins;
  }
  void Fail(const EntryPtr& e, const Status& s) override CAIRN_REQUIRES(mu) {
    test::StateOf(*e).local.error = s;
    fails.push_back(s);
  }
  void Skipped() override CAIRN_REQUIRES(mu) { ++skipped; }
  void Committed(const EntryPtr& e, Flusher::TimePoint, double io_s) override CAIRN_REQUIRES(mu) {
    EXPECT_GE(io_s, 0.0);
    test::StateOf(*e).local.committed = true;
    ++committed;
  }
  void Flushed(const EntryPtr&) override CAIRN_REQUIRES(mu) { ++flushed; }

  // A checkpoint of `bytes` whose blocks are sealed in chunks of their own,
  // with their CRCs computed but not yet published (crc_ready unset).
  EntryPtr MakeEntry(const std::string& name, int64_t number, uint64_t bytes) {
    auto e = std::make_shared<Entry>();
    e->kind = format::EntryKind::kCheckpoint;
    e->name = name;
    e->number = number;
    e->layout =
        format::Layout::Make({{.id = 1, .memory = MemoryKind::kHost, .bytes = bytes}}, kBlock);
    test::StateOf(*e).blocks.resize(e->layout.blocks.size());
    MutexLock l(&mu);
    for (uint32_t b = 0; b < e->blocks().size(); ++b) {
      const uint32_t len = e->layout.blocks[b].length;
      const std::optional<uint32_t> chunk = store.TryAcquire(kBlock, nullptr, 0, -1);
      EXPECT_TRUE(chunk.has_value());
      if (!chunk) break;
      const std::vector<uint8_t> data = test::SplitMixPattern(kBlock, number, b);
      std::copy(data.begin(), data.end(), store.data(*chunk));
      BlockState& bs = test::StateOf(*e).blocks[b];
      bs.chunk = static_cast<int32_t>(*chunk);
      bs.sealed = true;
      bs.crc = crc32c::Value(data.data(), len);
      EXPECT_TRUE(store.Captured(*e, b));  // dirty until written
    }
    test::StateOf(*e).capture.done = true;
    return e;
  }
  // Publishes block b's checksum, as the checksummer does.
  void Ready(Flusher& f, const EntryPtr& e, uint32_t b) CAIRN_REQUIRES(mu) {
    test::StateOf(*e).blocks[b].crc_ready = true;
    f.Wake();
  }
  void WaitIdle(Flusher& f) {
    MutexLock l(&mu);
    done.wait(l, [&]() CAIRN_REQUIRES(mu) { return f.Idle(); });
  }
  std::string Path(const EntryPtr& e) const { return tier.EntryPath(e->name, e->kind, e->number); }
  // Files left in the entry's name directory (a temp file counts).
  size_t FilesIn(const EntryPtr& e) const {
    std::error_code ec;
    size_t n = 0;
    for (auto it = std::filesystem::directory_iterator(tier.NameDir(e->name), ec);
         !ec && it != std::filesystem::directory_iterator(); ++it) {
      ++n;
    }
    return n;
  }
};

// A started Flusher over a fresh fake owner.
class FlusherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(o.tmp.path().empty());
    f.Start(nullptr);
  }
  FakeOwner o;
  Flusher f{&o.mu,
            &o.done,
            &o.store,
            &o.movers,
            {.checkpoints = &o.tier, .steps = &o.tier, .known_dirs = &o.dirs},
            o.Interface()};
};

TEST_F(FlusherTest, WritesBlocksAsTheirChecksumsBecomeReadyThenCommits) {
  EntryPtr e = o.MakeEntry("ckpt", 3, 3 * kBlock - 100);
  {
    MutexLock l(&o.mu);
    f.Push(e);
    o.Ready(f, e, 2);  // the last block first (a device block drained late, say)
    o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return e->blocks()[2].written; });
    EXPECT_FALSE(e->blocks()[0].written);  // not ready: not written
    EXPECT_FALSE(e->blocks()[1].written);
    EXPECT_TRUE(e->blocks()[2].clean);   // written: evictable
    EXPECT_FALSE(e->blocks()[0].clean);  // dirty
    EXPECT_EQ(o.committed, 0);
    o.Ready(f, e, 0);
    o.Ready(f, e, 1);
  }
  o.WaitIdle(f);
  {
    MutexLock l(&o.mu);
    for (uint32_t b = 0; b < 3; ++b)
      EXPECT_TRUE(e->blocks()[b].written && e->blocks()[b].clean) << b;
    EXPECT_EQ(o.store.dirty_bytes(), 0u);
    EXPECT_TRUE(o.marked_before_unpin);
    EXPECT_EQ(o.committed, 1);
    EXPECT_EQ(o.flushed, 1);
    EXPECT_TRUE(o.fails.empty());
    EXPECT_EQ(o.dirs_made(), 1u);
    EXPECT_EQ(o.dirs.size(), 1u);
    EXPECT_EQ(o.unpins, 3);
    EXPECT_EQ(e->pins(), 0);
    EXPECT_EQ(o.movers.now(MemoryMovers::Kind::kBackgroundIo), 0);
  }
  // The committed file holds every block, verified against its CRCs.
  auto r = format::FileReader::Open(&o.fs, o.Path(e));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->VerifyAll().ok());
  for (uint32_t b = 0; b < 3; ++b) {
    std::vector<uint8_t> got(e->layout.blocks[b].length);
    ASSERT_TRUE((*r)->ReadBlock(b, got.data()).ok()) << b;
    MutexLock l(&o.mu);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), o.Chunk(*e, b))) << b;
  }
  EXPECT_EQ(o.FilesIn(e), 1u);  // no temp file left
}

TEST_F(FlusherTest, WritesEntriesInQueueOrderAndKnowsTheirDirectory) {
  EntryPtr a = o.MakeEntry("ckpt", 1, kBlock), b = o.MakeEntry("ckpt", 2, kBlock);
  {
    MutexLock l(&o.mu);
    f.Push(a);
    f.Push(b);
    o.Ready(f, b, 0);  // b is ready first, but a is older
    o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return a->local().started; });
    EXPECT_FALSE(b->local().started);
    o.Ready(f, a, 0);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  EXPECT_EQ(o.committed, 2);
  EXPECT_EQ(o.dirs_made(), 1u);  // the second flush knew the directory
  EXPECT_TRUE(a->local().committed && b->local().committed);
}

TEST_F(FlusherTest, AnEntryConsumedBeforeItsFlushIsSkippedWithoutAFile) {
  EntryPtr e = o.MakeEntry("hist", 5, kBlock);
  {
    MutexLock l(&o.mu);
    test::StateOf(*e).consumed = true;
    f.Push(e);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  EXPECT_EQ(o.skipped, 1);
  EXPECT_EQ(o.flushed, 1);
  EXPECT_EQ(o.committed, 0);
  EXPECT_EQ(o.dirs_made(), 0u);  // no directory, no file
  EXPECT_TRUE(o.dirs.empty());
  EXPECT_FALSE(e->local().started);
}

TEST_F(FlusherTest, AnEntryConsumedWhileWaitingForChecksumsAbortsItsFile) {
  EntryPtr e = o.MakeEntry("hist", 6, 2 * kBlock);
  {
    MutexLock l(&o.mu);
    f.Push(e);
    o.Ready(f, e, 0);
    o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return e->blocks()[0].written; });
    test::StateOf(*e).consumed = true;  // a pop took it; block 1 never gets its checksum
    f.Wake();
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  EXPECT_EQ(o.skipped, 1);
  EXPECT_EQ(o.committed, 0);
  EXPECT_TRUE(o.fails.empty());
  EXPECT_EQ(o.FilesIn(e), 0u);  // the temp file was removed
}

TEST_F(FlusherTest, AWriteErrorFailsTheEntryAndNamesIt) {
  EntryPtr e = o.MakeEntry("ckpt", 7, 2 * kBlock);
  o.fs.Inject({.op = test::FaultOp::kWrite, .err = EIO, .nth = 2, .path_filter = "ckpt"});
  {
    MutexLock l(&o.mu);
    f.Push(e);
    o.Ready(f, e, 0);
    o.Ready(f, e, 1);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  ASSERT_EQ(o.fails.size(), 1u);
  EXPECT_NE(o.fails[0].message().find("flush of 'ckpt' 7"), std::string::npos)
      << o.fails[0].ToString();
  EXPECT_EQ(o.committed, 0);
  EXPECT_EQ(e->pins(), 0);
  EXPECT_EQ(o.movers.now(MemoryMovers::Kind::kBackgroundIo), 0);
  EXPECT_EQ(o.FilesIn(e), 0u);  // aborted: no temp file, no final file
}

TEST_F(FlusherTest, ACommitErrorFailsTheEntryAndLeavesNoFile) {
  EntryPtr e = o.MakeEntry("ckpt", 8, kBlock);
  o.fs.Inject({.op = test::FaultOp::kRename, .err = EIO, .path_filter = "ckpt"});
  {
    MutexLock l(&o.mu);
    f.Push(e);
    o.Ready(f, e, 0);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  ASSERT_EQ(o.fails.size(), 1u);
  EXPECT_NE(o.fails[0].message().find("commit of 'ckpt' 8"), std::string::npos)
      << o.fails[0].ToString();
  EXPECT_EQ(o.committed, 0);
  EXPECT_FALSE(std::filesystem::exists(o.Path(e)));
}

// The persister: a Flusher with the persistent tier's marks, verifying each
// chunk against the CRC taken at capture.
class PersisterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(o.tmp.path().empty());
    f.Start(nullptr);
  }
  static constexpr FlushMarks kMarks{.persistent = true};
  FakeOwner o{kMarks};
  Flusher f{&o.mu,
            &o.done,
            &o.store,
            &o.movers,
            {.checkpoints = &o.tier, .steps = &o.tier, .known_dirs = &o.dirs},
            o.Interface(),
            kMarks,
            /*verify=*/true};
};

TEST_F(PersisterTest, KeepsItsOwnMarksApartFromTheLocalFlushers) {
  EntryPtr e = o.MakeEntry("ckpt", 1, 2 * kBlock);
  {
    MutexLock l(&o.mu);
    test::StateOf(*e).blocks[0].written = true;  // the local flusher wrote block 0 already
    f.Push(e);
    o.Ready(f, e, 0);
    o.Ready(f, e, 1);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  EXPECT_TRUE(e->blocks()[0].persisted && e->blocks()[1].persisted);  // block 0 too: its own mark
  EXPECT_FALSE(e->blocks()[1].written);
  EXPECT_TRUE(e->blocks()[0].clean);   // in both files: evictable
  EXPECT_FALSE(e->blocks()[1].clean);  // not yet in the local file
  EXPECT_TRUE(o.marked_before_unpin);
  EXPECT_TRUE(e->persist().started);
  EXPECT_FALSE(e->local().started);
  EXPECT_EQ(o.committed, 1);
}

TEST_F(PersisterTest, GivesAnEntryUpAtABlockThatLeftTheCache) {
  EntryPtr e = o.MakeEntry("ckpt", 2, 3 * kBlock);
  {
    MutexLock l(&o.mu);
    test::StateOf(*e).blocks[1].chunk =
        -1;  // written locally and evicted before the persister came
    f.Push(e);
    for (uint32_t b = 0; b < 3; ++b) o.Ready(f, e, b);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  EXPECT_TRUE(e->blocks()[0].persisted);  // written, then the persister met block 1
  EXPECT_FALSE(e->blocks()[1].persisted || e->blocks()[2].persisted);
  EXPECT_EQ(o.committed, 0);
  EXPECT_TRUE(o.fails.empty());  // nothing booked: its owner copies the file
  EXPECT_EQ(o.skipped, 0);
  EXPECT_EQ(o.flushed, 1);
  EXPECT_EQ(e->pins(), 0);
  EXPECT_EQ(o.FilesIn(e), 0u);  // the temp file was removed
}

TEST_F(PersisterTest, AChunkChangedAfterItsChecksumFailsTheWrite) {
  EntryPtr e = o.MakeEntry("ckpt", 3, 2 * kBlock);
  {
    MutexLock l(&o.mu);
    o.Chunk(*e, 1)[17] ^= 0x40;
    f.Push(e);
    o.Ready(f, e, 0);
    o.Ready(f, e, 1);
  }
  o.WaitIdle(f);
  MutexLock l(&o.mu);
  ASSERT_EQ(o.fails.size(), 1u);
  EXPECT_EQ(o.fails[0].code(), Code::kCorrupt) << o.fails[0].ToString();
  EXPECT_NE(o.fails[0].message().find("block 1"), std::string::npos) << o.fails[0].ToString();
  EXPECT_EQ(o.committed, 0);
  EXPECT_EQ(o.FilesIn(e), 0u);
}

}  // namespace
}  // namespace cairn::core
