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
    e->blocks.resize(blocks);
    for (uint32_t b = 0; b < blocks; ++b) {
      const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, seq, -1);
      EXPECT_TRUE(chunk.has_value());
      if (!chunk) return e;
      e->blocks[b].chunk = static_cast<int32_t>(*chunk);
      e->blocks[b].sealed = true;
      ++e->sealed_blocks;
      ++e->resident_blocks;
      EXPECT_TRUE(store_.Captured(*e, b));
    }
    e->capture_done = true;
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
  e->blocks[1].written = true;
  store_.WrittenLocally(*e, 1);
  EXPECT_EQ(store_.dirty_bytes(), 3 * kBlock);
  EXPECT_TRUE(e->blocks[1].clean);
  // Only for an entry ranked after e.
  EXPECT_FALSE(store_.TryAcquire(kBlock, nullptr, 1, -1).has_value());
  const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, 2, -1);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(evictions_, 1u);
  EXPECT_EQ(e->blocks[1].chunk, -1);
  EXPECT_EQ(e->resident_blocks, 3u);
}

TEST_F(BlockStoreTest, AHeldBlockWaitsForThePersisterOrARelease) {
  EntryPtr e = Capture(1, 2);
  store_.Hold(e);
  EXPECT_TRUE(e->persist_hold);
  e->blocks[0].written = true;
  store_.WrittenLocally(*e, 0);
  EXPECT_FALSE(e->blocks[0].clean);  // held: the persister has not written it
  e->blocks[0].persisted = true;
  store_.WrittenPersistently(*e, 0);
  EXPECT_TRUE(e->blocks[0].clean);  // in both files now

  e->blocks[1].written = true;
  store_.WrittenLocally(*e, 1);
  EXPECT_FALSE(e->blocks[1].clean);
  EXPECT_TRUE(store_.ReleaseOldestHold());  // a capture needs the room
  EXPECT_EQ(holds_released_, 1u);
  EXPECT_FALSE(e->persist_hold);
  EXPECT_TRUE(e->blocks[1].clean);
  EXPECT_FALSE(store_.ReleaseOldestHold());  // nothing held any more
  EXPECT_EQ(holds_released_, 1u);
}

TEST_F(BlockStoreTest, APersistedBlockNotWrittenLocallyStaysDirty) {
  EntryPtr e = Capture(1, 1);
  e->blocks[0].persisted = true;
  store_.WrittenPersistently(*e, 0);
  EXPECT_FALSE(e->blocks[0].clean);
  EXPECT_EQ(store_.dirty_bytes(), kBlock);
}

TEST_F(BlockStoreTest, AFailedEntryStopsCountingAndBecomesEvictable) {
  EntryPtr e = Capture(1, 3);
  e->blocks[0].written = true;
  store_.WrittenLocally(*e, 0);
  e->local_error = Status::Io("disk gone");
  store_.Failed(*e);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  for (const BlockState& bs : e->blocks) EXPECT_TRUE(bs.clean);
  // A block of a failed entry captured after the failure is evictable at
  // once, never dirty.
  auto late = std::make_shared<Entry>();
  late->seq = 2;
  late->layout =
      format::Layout::Make({{.id = 1, .memory = MemoryKind::kHost, .bytes = kBlock}}, kBlock);
  late->blocks.resize(1);
  late->local_error = Status::Io("its base failed");
  const std::optional<uint32_t> chunk = store_.TryAcquire(kBlock, nullptr, 2, -1);
  ASSERT_TRUE(chunk.has_value());
  late->blocks[0].chunk = static_cast<int32_t>(*chunk);
  late->blocks[0].sealed = true;
  EXPECT_FALSE(store_.Captured(*late, 0));
  EXPECT_TRUE(late->blocks[0].clean);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  store_.Close();  // unlists the entries before they go
}

TEST_F(BlockStoreTest, ReleaseFreesEveryChunkAndTheDirtyBytes) {
  EntryPtr e = Capture(1, 4);
  e->blocks[3].written = true;
  store_.WrittenLocally(*e, 3);
  e->consumed = true;
  store_.Release(*e);
  EXPECT_EQ(store_.dirty_bytes(), 0u);
  EXPECT_EQ(store_.cache().free_count(), 4u);
  for (const BlockState& bs : e->blocks) EXPECT_EQ(bs.chunk, -1);
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
