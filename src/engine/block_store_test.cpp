// BlockStore on its own: a small host cache, entries made by hand, and the
// transitions' effect on what is dirty, evictable and held.
#include "engine/block_store.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>

#include "os/mem/memory.hpp"

namespace cairn::core {
namespace {

constexpr uint32_t kBlock = 4096;

class BlockStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<HostCache> cache = HostCache::Create(4 * kBlock, kBlock, os::MapOptions{});
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    store_.Adopt(std::move(cache).value());
  }

  // A checkpoint of `blocks` blocks, each captured into a chunk of its own.
  EntryPtr Capture(uint64_t seq, uint32_t blocks) {
    auto e = std::make_shared<Entry>();
    e->seq = seq;
    e->layout = format::Layout::Make(
        {{.id = 1, .memory = MemoryKind::kHost, .bytes = blocks * kBlock}}, kBlock);
    store_.SizeBlocks(*e);
    for (uint32_t b = 0; b < blocks; ++b) {
      const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, seq, -1);
      EXPECT_TRUE(chunk.has_value());
      if (!chunk) return e;
      store_.Place(*e, b, *chunk);
      store_.Sealed(*e, b);
      EXPECT_TRUE(store_.Captured(*e, b));
    }
    store_.CaptureEnded(*e);
    return e;
  }

  uint64_t evictions_ = 0;
  uint64_t holds_released_ = 0;
  std::condition_variable_any room_;
  BlockStore store_{
      {.evictions = &evictions_, .holds_released = &holds_released_}, nullptr, &room_};
};

TEST_F(BlockStoreTest, DirtyBlocksAreNeverEvicted) {
  EntryPtr e = Capture(1, 4);
  EXPECT_EQ(store_.dirty_bytes(), 4 * kBlock);
  EXPECT_EQ(store_.cache().free_count(), 0u);
  // Full, and nothing is written: no room, even for a later capture.
  EXPECT_FALSE(store_.TryAcquire(kBlock, nullptr, 2, -1).has_value());
  Entry later;
  later.seq = 2;
  EXPECT_FALSE(store_.HasRoomFor(later, 1));
  EXPECT_EQ(evictions_, 0u);
}

TEST_F(BlockStoreTest, WrittenLocallyMakesABlockEvictableForLaterCaptures) {
  EntryPtr e = Capture(1, 4);
  store_.WrittenLocally(*e, 1);
  EXPECT_EQ(store_.dirty_bytes(), 3 * kBlock);
  EXPECT_TRUE(e->blocks()[1].clean);
  // Only for an entry ranked after e.
  EXPECT_FALSE(store_.TryAcquire(kBlock, nullptr, 1, -1).has_value());
  const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, 2, -1);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(evictions_, 1u);
  EXPECT_EQ(e->blocks()[1].chunk, -1);
  EXPECT_EQ(e->capture().resident_blocks, 3u);
}

TEST_F(BlockStoreTest, AHeldBlockWaitsForThePersisterOrARelease) {
  EntryPtr e = Capture(1, 2);
  store_.Hold(e);
  EXPECT_TRUE(e->persist().hold);
  store_.WrittenLocally(*e, 0);
  EXPECT_FALSE(e->blocks()[0].clean);  // held: the persister has not written it
  store_.WrittenPersistently(*e, 0);
  EXPECT_TRUE(e->blocks()[0].clean);  // in both files now

  store_.WrittenLocally(*e, 1);
  EXPECT_FALSE(e->blocks()[1].clean);
  EXPECT_TRUE(store_.ReleaseOldestHold());  // a capture needs the room
  EXPECT_EQ(holds_released_, 1u);
  EXPECT_FALSE(e->persist().hold);
  EXPECT_TRUE(e->blocks()[1].clean);
  EXPECT_FALSE(store_.ReleaseOldestHold());  // nothing held any more
  EXPECT_EQ(holds_released_, 1u);
}

TEST_F(BlockStoreTest, APersistedBlockNotWrittenLocallyStaysDirty) {
  EntryPtr e = Capture(1, 1);
  store_.WrittenPersistently(*e, 0);
  EXPECT_FALSE(e->blocks()[0].clean);
  EXPECT_EQ(store_.dirty_bytes(), kBlock);
}

TEST_F(BlockStoreTest, AFailedEntryStopsCountingAndBecomesEvictable) {
  EntryPtr e = Capture(1, 3);
  store_.WrittenLocally(*e, 0);
  store_.SetError(*e, Status::Io("disk gone"));
  store_.Failed(*e);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  for (const BlockState& bs : e->blocks()) EXPECT_TRUE(bs.clean);
  // A block of a failed entry captured after the failure is evictable at
  // once, never dirty.
  auto late = std::make_shared<Entry>();
  late->seq = 2;
  late->layout =
      format::Layout::Make({{.id = 1, .memory = MemoryKind::kHost, .bytes = kBlock}}, kBlock);
  store_.SizeBlocks(*late);
  store_.SetError(*late, Status::Io("its base failed"));
  const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, 2, -1);
  ASSERT_TRUE(chunk.has_value());
  store_.Place(*late, 0, *chunk);
  store_.Sealed(*late, 0);
  EXPECT_FALSE(store_.Captured(*late, 0));
  EXPECT_TRUE(late->blocks()[0].clean);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  store_.Close();  // unlists the entries before they go
}

TEST_F(BlockStoreTest, ReleaseFreesEveryChunkAndTheDirtyBytes) {
  EntryPtr e = Capture(1, 4);
  store_.WrittenLocally(*e, 3);
  EXPECT_TRUE(store_.Consume(*e));
  store_.Release(*e);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  EXPECT_EQ(store_.cache().free_count(), 4u);
  for (const BlockState& bs : e->blocks()) EXPECT_EQ(bs.chunk, -1);
}

TEST_F(BlockStoreTest, TheWrittenMarksAreTheTransitionsOwn) {
  EntryPtr e = Capture(1, 2);
  store_.WrittenLocally(*e, 0);
  EXPECT_TRUE(e->blocks()[0].written);
  EXPECT_FALSE(e->blocks()[0].persisted);
  store_.WrittenPersistently(*e, 1);
  EXPECT_TRUE(e->blocks()[1].persisted);
  EXPECT_FALSE(e->blocks()[1].written);
}

TEST_F(BlockStoreTest, TheLastUnpinOfAConsumedEntrySaysSoOnce) {
  EntryPtr e = Capture(1, 1);
  store_.Pin(*e);
  store_.Pin(*e);
  EXPECT_EQ(e->pins(), 2);
  EXPECT_FALSE(store_.Unpin(*e));  // not consumed: nothing to release
  EXPECT_TRUE(store_.Consume(*e));
  EXPECT_FALSE(store_.Consume(*e));  // consumed once
  EXPECT_TRUE(e->consumed());
  EXPECT_TRUE(store_.Unpin(*e));  // the last pin of a consumed entry
  EXPECT_EQ(e->pins(), 0);
}

TEST_F(BlockStoreTest, TheFirstErrorSticks) {
  EntryPtr e = Capture(1, 1);
  EXPECT_FALSE(e->failed());
  store_.SetError(*e, Status::Io("first"));
  store_.SetError(*e, Status::Corrupt("second"));
  EXPECT_TRUE(e->failed());
  EXPECT_EQ(e->local().error.code(), Code::kIo);
  store_.Failed(*e);
}

TEST_F(BlockStoreTest, APersistentCopyEndsCommittedOrFailedOrDropped) {
  Entry ok, bad, dropped;
  for (Entry* e : {&ok, &bad, &dropped}) {
    store_.BindPersist(*e);
    EXPECT_TRUE(e->persist().pending);
  }
  store_.PersistEnded(ok, Status::Ok());
  EXPECT_FALSE(ok.persist().pending);
  EXPECT_TRUE(ok.persist().committed);
  EXPECT_TRUE(ok.persist().error.ok());
  store_.PersistEnded(bad, Status::Io("disk full"));
  EXPECT_FALSE(bad.persist().pending);
  EXPECT_FALSE(bad.persist().committed);
  EXPECT_EQ(bad.persist().error.code(), Code::kIo);
  store_.PersistDropped(dropped);
  EXPECT_FALSE(dropped.persist().pending);
  EXPECT_FALSE(dropped.persist().committed);
  EXPECT_TRUE(dropped.persist().error.ok());
}

TEST_F(BlockStoreTest, AFailedPrefetchIsNotTriedAgain) {
  Entry e;
  store_.PrefetchStarted(e);
  EXPECT_TRUE(e.reads().prefetching);
  store_.PrefetchEnded(e, /*ok=*/true);
  EXPECT_FALSE(e.reads().prefetching);
  EXPECT_FALSE(e.reads().prefetch_failed);
  store_.PrefetchStarted(e);
  store_.PrefetchEnded(e, /*ok=*/false);
  EXPECT_FALSE(e.reads().prefetching);
  EXPECT_TRUE(e.reads().prefetch_failed);
  store_.DevicePrefetchStarted(e);
  EXPECT_TRUE(e.reads().device_prefetching);
  store_.DevicePrefetchEnded(e, /*ok=*/false);
  EXPECT_FALSE(e.reads().device_prefetching);
  EXPECT_TRUE(e.reads().device_prefetch_failed);
}

TEST_F(BlockStoreTest, ALoadedBlockIsCompleteWrittenAndEvictable) {
  auto e = std::make_shared<Entry>();
  e->seq = 1;
  e->layout =
      format::Layout::Make({{.id = 1, .memory = MemoryKind::kHost, .bytes = 2 * kBlock}}, kBlock);
  store_.FromCommittedFile(*e, {11, 22});  // a step known from its file, none resident
  EXPECT_TRUE(e->capture().done && e->local().committed);
  EXPECT_EQ(e->blocks()[1].crc, 22u);
  EXPECT_TRUE(e->blocks()[1].written && e->blocks()[1].crc_ready);
  const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, 1, -1);
  ASSERT_TRUE(chunk.has_value());
  store_.Place(*e, 0, *chunk);
  store_.Loaded(*e, 0, 33);
  store_.AllResident(*e);
  EXPECT_TRUE(e->in_host(0));
  EXPECT_TRUE(e->blocks()[0].clean);
  EXPECT_EQ(e->blocks()[0].crc, 33u);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  store_.Close();  // unlists it before it goes
}

TEST_F(BlockStoreTest, CloseHandsTheCacheBack) {
  EntryPtr e = Capture(1, 1);
  store_.Hold(e);
  std::optional<HostCache> cache = store_.Close();
  ASSERT_TRUE(cache.has_value());
  EXPECT_EQ(cache->chunk_count(), 4u);
  EXPECT_FALSE(store_.has_cache());
  EXPECT_FALSE(store_.ReleaseOldestHold());
}

}  // namespace
}  // namespace cairn::core
