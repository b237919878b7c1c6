// The Prefetcher driven without a pipeline: a fake owner holds the catalog
// and a small BlockStore and books what the prefetcher reports; the steps'
// files are in a temp dir behind a FaultFs.
// The tests synchronise on the walks the prefetcher makes (each calls the
// owner's catalog()), never on time.
#include "engine/stages/prefetcher.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "format/file_writer.hpp"
#include "testing/entry_state.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/store_owner.hpp"
#include "testing/test_util.hpp"
#include "util/crc32c.hpp"

namespace cairn::core {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr auto kStep = format::EntryKind::kHistoryStep;

struct FakeOwner final : test::StoreOwner, Prefetcher::Owner {
  test::TempDir tmp{"prefetcher"};
  test::FaultFs fs;
  tiers::FileTier tier{
      Level::kLocal, tmp.path(), &fs, {.direct = false, .fsync = false, .mode = 0600}};
  Catalog entries CAIRN_GUARDED_BY(mu);
  int walks CAIRN_GUARDED_BY(mu) = 0;  // catalog() calls: one per look for work
  int acquired CAIRN_GUARDED_BY(mu) = 0;
  int unpins CAIRN_GUARDED_BY(mu) = 0;
  int finished CAIRN_GUARDED_BY(mu) = 0;
  MemoryMovers movers;                               // the file reads count as background I/O
  std::vector<int64_t> loaded CAIRN_GUARDED_BY(mu);  // steps, in load order

  explicit FakeOwner(uint32_t nchunks) : StoreOwner(nchunks, kBlock) {}

  uint32_t free_count() CAIRN_REQUIRES(mu) { return store.cache().free_count(); }
  // Blocks the prefetcher made evictable.
  int clean_blocks(const Entry& e) const CAIRN_REQUIRES(mu) {
    int n = 0;
    for (const BlockState& bs : e.blocks()) n += bs.clean ? 1 : 0;
    return n;
  }
  std::vector<uint8_t> ChunkBytes(int32_t chunk) CAIRN_REQUIRES(mu) {
    const uint8_t* p = store.data(static_cast<uint32_t>(chunk));
    return {p, p + kBlock};
  }

  Prefetcher::Owner* Interface() { return this; }
  const Catalog& catalog() override CAIRN_REQUIRES(mu) {
    ++walks;
    done.notify_all();
    return entries;
  }
  std::optional<uint32_t> AcquireChunk(const Entry& e, uint32_t n) override CAIRN_REQUIRES(mu) {
    std::optional<uint32_t> c = store.TryAcquire(n, nullptr, e.seq, -1);
    if (c) ++acquired;
    return c;
  }
  void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(mu) { --test::StateOf(*e).pins, ++unpins; }
  void Loaded(const EntryPtr& e, Prefetcher::TimePoint) override CAIRN_REQUIRES(mu) {
    EXPECT_GT(e->pins(), 0);  // before the unpin
    loaded.push_back(e->number);
  }
  void Finished() override CAIRN_REQUIRES(mu) { ++finished; }

  static std::vector<uint8_t> Pattern(int64_t step, uint32_t b) {
    return test::SplitMixPattern(kBlock, step, b);
  }

  // A captured, committed step of `nblocks` whose file holds Pattern(step,
  // b) per block, evicted from the cache (no block resident).
  EntryPtr AddStep(const std::string& name, int64_t step, uint32_t nblocks, bool committed = true) {
    auto e = std::make_shared<Entry>();
    e->kind = kStep;
    e->name = name;
    e->number = step;
    e->layout = format::Layout::Make(
        {{.id = 1, .memory = MemoryKind::kHost, .bytes = uint64_t{nblocks} * kBlock}}, kBlock);
    test::StateOf(*e).blocks.resize(nblocks);
    EXPECT_TRUE(tier.EnsureNameDir(name).ok());
    auto w = format::FileWriter::Create(&fs, tier.EntryPath(name, kStep, step),
                                        {.kind = kStep, .name = name, .number = step}, e->layout,
                                        tier.writer_options());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (uint32_t b = 0; b < nblocks; ++b) {
      const auto data = Pattern(step, b);
      EXPECT_TRUE((*w)->WriteBlock(b, data.data(), crc32c::Value(data.data(), kBlock)).ok());
      test::StateOf(*e).blocks[b].sealed = test::StateOf(*e).blocks[b].written =
          true;  // sealed stays after an eviction
    }
    EXPECT_TRUE((*w)->Commit().ok());
    test::StateOf(*e).capture.sealed_blocks = nblocks;
    test::StateOf(*e).capture.done = true;
    test::StateOf(*e).local.committed = committed;
    MutexLock l(&mu);
    entries.OpenHistory(name);
    entries.Add(e);
    return e;
  }

  // A pop of the step: consumed, its chunks freed.
  void Pop(Prefetcher& p, const EntryPtr& e) CAIRN_REQUIRES(mu) {
    entries.FindHistory(e->name)->popping = true;
    entries.Remove(*e);
    entries.DropStep(e->name, e->number);
    test::StateOf(*e).consumed = true;
    store.Release(*e);
    p.Wake();
  }

  // Waits, after a change made under *mu and a Wake, until the prefetcher
  // has looked for work since and found none: it is then idle for good,
  // until the next change.
  void Settle(Prefetcher& p) {
    MutexLock l(&mu);
    const int before = walks;
    p.Wake();
    done.wait(l, [&]() CAIRN_REQUIRES(mu) { return walks > before && p.Idle(); });
  }

  // The step is in the cache with its file's data and checksums.
  void ExpectLoaded(const EntryPtr& e) CAIRN_REQUIRES(mu) {
    EXPECT_EQ(e->capture().resident_blocks, e->blocks().size());
    EXPECT_FALSE(e->reads().prefetching);
    EXPECT_EQ(e->pins(), 0);
    for (uint32_t b = 0; b < e->blocks().size(); ++b) {
      const BlockState& bs = test::StateOf(*e).blocks[b];
      ASSERT_GE(bs.chunk, 0) << b;
      EXPECT_TRUE(bs.sealed && bs.written && bs.crc_ready) << b;
      EXPECT_EQ(ChunkBytes(bs.chunk), Pattern(e->number, b)) << b;
      EXPECT_EQ(bs.crc, crc32c::Value(store.data(static_cast<uint32_t>(bs.chunk)), kBlock)) << b;
    }
  }
};

// A fake owner of `nchunks` chunks and a Prefetcher over it (started by Go).
class PrefetcherTest : public ::testing::Test {
 protected:
  void Go(uint32_t nchunks, int depth) {
    o.emplace(nchunks);
    ASSERT_FALSE(o->tmp.path().empty());
    p.emplace(&o->mu, &o->done, depth, &o->store, &o->movers, &o->tier, o->Interface());
  }
  void StartPopping(const std::string& name) {
    {
      MutexLock l(&o->mu);
      o->entries.FindHistory(name)->popping = true;
    }
    p->Start(nullptr);
    o->Settle(*p);
  }
  std::optional<FakeOwner> o;
  std::optional<Prefetcher> p;  // after o: stopped before it goes

  void TearDown() override { p.reset(); }
};

TEST_F(PrefetcherTest, LoadsTheHighestStepsFirstWithinTheDepthAheadOfThePops) {
  Go(8, /*depth=*/2);
  std::vector<EntryPtr> s;
  for (int64_t k = 0; k <= 5; ++k) s.push_back(o->AddStep("h", k, 1));
  StartPopping("h");
  {
    MutexLock l(&o->mu);
    EXPECT_EQ(o->loaded, (std::vector<int64_t>{5, 4}));
    o->ExpectLoaded(s[5]);
    o->ExpectLoaded(s[4]);
    EXPECT_EQ(s[3]->blocks()[0].chunk, -1);  // beyond the depth
    EXPECT_EQ(o->clean_blocks(*s[5]) + o->clean_blocks(*s[4]), 2);
    EXPECT_EQ(o->unpins, 2);
    EXPECT_EQ(o->finished, 2);
    EXPECT_EQ(o->movers.now(MemoryMovers::Kind::kBackgroundIo), 0);
    o->Pop(*p, s[5]);
  }
  o->Settle(*p);
  MutexLock l(&o->mu);
  EXPECT_EQ(o->loaded, (std::vector<int64_t>{5, 4, 3}));  // one step further down
  o->ExpectLoaded(s[3]);
}

TEST_F(PrefetcherTest, LoadsNothingBeforeTheFirstPopNorPastAStepStillBeingWritten) {
  Go(8, /*depth=*/0);
  o->AddStep("a", 1, 1);  // "a" is not being popped
  o->AddStep("b", 1, 1);
  EntryPtr b2 = o->AddStep("b", 2, 1, /*committed=*/false);
  StartPopping("b");
  {
    MutexLock l(&o->mu);
    EXPECT_TRUE(o->loaded.empty());  // b2's pop will wait for it; b1 is not due
    test::StateOf(*b2).local.committed = true;
  }
  o->Settle(*p);
  MutexLock l(&o->mu);
  EXPECT_EQ(o->loaded, (std::vector<int64_t>{2, 1}));  // depth 0: no limit; never "a"
}

TEST_F(PrefetcherTest, LeavesAStepAPopIsReadingToThePop) {
  Go(8, /*depth=*/2);
  o->AddStep("h", 1, 1);
  EntryPtr s2 = o->AddStep("h", 2, 1);
  EntryPtr s3 = o->AddStep("h", 3, 1);
  {
    MutexLock l(&o->mu);
    test::StateOf(*s3).reads.pop_reading = true;
  }
  StartPopping("h");
  MutexLock l(&o->mu);
  EXPECT_EQ(o->loaded, (std::vector<int64_t>{2}));  // s3 counts towards the depth
  EXPECT_EQ(s3->blocks()[0].chunk, -1);
  o->ExpectLoaded(s2);
}

TEST_F(PrefetcherTest, WaitsForRoomWhenNoChunkIsFreeAndSkipsAStepLargerThanTheCache) {
  Go(2, /*depth=*/0);
  EntryPtr s1 = o->AddStep("h", 1, 1);
  o->AddStep("h", 2, 1);
  EntryPtr s3 = o->AddStep("h", 3, 1);
  EntryPtr big = o->AddStep("h", 4, 3);  // 3 blocks, 2 chunks
  StartPopping("h");
  {
    MutexLock l(&o->mu);
    EXPECT_EQ(o->loaded, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(o->free_count(), 0u);
    EXPECT_EQ(s1->blocks()[0].chunk, -1);
    EXPECT_FALSE(big->reads().prefetch_failed);
    EXPECT_EQ(o->acquired, 2);  // never asked for a chunk that was not there
    o->Pop(*p, s3);
  }
  o->Settle(*p);
  MutexLock l(&o->mu);
  EXPECT_EQ(o->loaded, (std::vector<int64_t>{3, 2, 1}));
  o->ExpectLoaded(s1);
}

TEST_F(PrefetcherTest, ReadsOnlyTheBlocksThatAreNotResident) {
  Go(4, /*depth=*/1);
  EntryPtr e = o->AddStep("h", 7, 3);
  int32_t resident = -1;
  {
    MutexLock l(&o->mu);
    // Block 1 stayed in the cache.
    const std::optional<uint32_t> c = o->store.TryAcquire(kBlock, nullptr, 0, -1);
    ASSERT_TRUE(c.has_value());
    resident = static_cast<int32_t>(*c);
    const std::vector<uint8_t> data = FakeOwner::Pattern(7, 1);
    std::copy(data.begin(), data.end(), o->store.data(*c));
    test::StateOf(*e).blocks[1].chunk = resident;
    test::StateOf(*e).blocks[1].crc = crc32c::Value(data.data(), kBlock);
    test::StateOf(*e).blocks[1].crc_ready = true;
    test::StateOf(*e).capture.resident_blocks = 1;
  }
  StartPopping("h");
  MutexLock l(&o->mu);
  EXPECT_EQ(o->loaded, (std::vector<int64_t>{7}));
  EXPECT_EQ(o->acquired, 2);
  EXPECT_EQ(o->clean_blocks(*e), 2);  // the read blocks only
  EXPECT_EQ(e->blocks()[1].chunk, resident);
  o->ExpectLoaded(e);
}

TEST_F(PrefetcherTest, AFailedReadGivesItsChunksBackAndTheNextStepIsLoaded) {
  Go(4, /*depth=*/1);
  EntryPtr s1 = o->AddStep("h", 1, 1);
  EntryPtr s2 = o->AddStep("h", 2, 2);
  EntryPtr s3 = o->AddStep("h", 3, 2);
  o->fs.Inject(
      {.op = test::FaultOp::kRead, .err = EIO, .path_filter = o->tier.EntryPath("h", kStep, 3)});
  o->fs.CorruptReads(o->tier.EntryPath("h", kStep, 2));
  StartPopping("h");
  MutexLock l(&o->mu);
  EXPECT_EQ(o->loaded, (std::vector<int64_t>{1}));  // failed steps do not count towards the depth
  for (const EntryPtr& e : {s3, s2}) {
    EXPECT_TRUE(e->reads().prefetch_failed) << e->number;  // the pop reads the file and reports it
    EXPECT_EQ(e->blocks()[0].chunk, -1);
    EXPECT_EQ(e->blocks()[1].chunk, -1);
    EXPECT_EQ(e->capture().resident_blocks, 0u);
    EXPECT_EQ(e->pins(), 0);
    EXPECT_FALSE(e->reads().prefetching);
  }
  o->ExpectLoaded(s1);
  EXPECT_EQ(o->free_count(), 3u);  // 4 chunks, s1 holds one
  EXPECT_EQ(o->finished, 3);
  EXPECT_EQ(o->movers.now(MemoryMovers::Kind::kBackgroundIo), 0);
}

// The walk the host and device prefetchers share, with a scripted judge.
TEST(StepWalkTest, WalksPoppedHistoriesHighestStepFirstAsTheJudgeSays) {
  Catalog catalog;
  std::map<std::pair<std::string, int64_t>, StepVerdict> verdicts;
  auto add = [&](const std::string& name, int64_t step, StepVerdict v) {
    auto e = std::make_shared<Entry>();
    e->kind = kStep;
    e->name = name;
    e->number = step;
    catalog.OpenHistory(name).popping = true;
    catalog.Add(e);
    verdicts[{name, step}] = v;
    return e;
  };
  std::vector<std::string> asked;
  auto judge = [&](const Entry& e) {
    asked.push_back(e.name + std::to_string(e.number));
    return verdicts.at({e.name, e.number});
  };
  add("a", 1, StepVerdict::kTake);
  add("a", 2, StepVerdict::kNextHistory);
  add("b", 1, StepVerdict::kTake);
  add("b", 2, StepVerdict::kAhead);
  add("b", 3, StepVerdict::kSkip);
  add("b", 4, StepVerdict::kAhead);
  EXPECT_EQ(WalkPoppedSteps(catalog, /*depth=*/2, judge), nullptr);  // b: 4 and 2 ahead
  EXPECT_EQ(asked, (std::vector<std::string>{"a2", "b4", "b3", "b2"}));
  asked.clear();
  EXPECT_EQ(WalkPoppedSteps(catalog, /*depth=*/0, judge)->number, 1);
  EXPECT_EQ(asked, (std::vector<std::string>{"a2", "b4", "b3", "b2", "b1"}));
  // A wait ends the whole walk; a consumed step is not asked about.
  verdicts[{"a", 2}] = StepVerdict::kWait;
  test::StateOf(*catalog.Find(kStep, "b", 4)).consumed = true;
  asked.clear();
  EXPECT_EQ(WalkPoppedSteps(catalog, /*depth=*/0, judge), nullptr);
  EXPECT_EQ(asked, (std::vector<std::string>{"a2"}));
  verdicts[{"a", 2}] = StepVerdict::kSkip;
  catalog.FindHistory("a")->popping = false;
  asked.clear();
  EXPECT_EQ(WalkPoppedSteps(catalog, /*depth=*/1, judge), nullptr);  // b2 is the one ahead
  EXPECT_EQ(asked, (std::vector<std::string>{"b3", "b2"}));
}

}  // namespace
}  // namespace cairn::core
