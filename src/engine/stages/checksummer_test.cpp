// The Checksummer driven without a pipeline: a fake owner holds the chunk
// memory, counts pins and wake-ups.
#include "engine/stages/checksummer.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "testing/entry_state.hpp"
#include "util/crc32c.hpp"

namespace cairn::core {
namespace {

// The owner's side: its mutex, its progress condition, a fake host cache.
struct FakeOwner final : Checksummer::Owner {
  Mutex mu;
  std::condition_variable_any done;
  std::vector<std::vector<uint8_t>> chunks;
  int unpins CAIRN_GUARDED_BY(mu) = 0;
  int wakeups CAIRN_GUARDED_BY(mu) = 0;
  // What the unpin saw: a pin held, and the checksum already published.
  bool pinned_at_unpin CAIRN_GUARDED_BY(mu) = true;
  bool ready_at_unpin CAIRN_GUARDED_BY(mu) = true;
  bool released CAIRN_GUARDED_BY(mu) = false;  // a consumed entry's last unpin
  std::map<const Entry*, int> entry_unpins CAIRN_GUARDED_BY(mu);

  int unpins_of_entry(const EntryPtr& e) CAIRN_REQUIRES(mu) { return entry_unpins[e.get()]; }

  // What a test changes: a hook run before the chunk's bytes are handed
  // out, and whether the checksummer is paused.
  std::function<void()> before_chunk_data;
  std::function<bool()> paused;

  Checksummer::Owner* Interface() { return this; }
  const uint8_t* ChunkData(uint32_t c) override CAIRN_REQUIRES(mu) {
    if (before_chunk_data) before_chunk_data();
    return chunks.at(c).data();
  }
  void Pin(const EntryPtr& e) override CAIRN_REQUIRES(mu) { ++test::StateOf(*e).pins; }
  void Unpin(const EntryPtr& e) override CAIRN_REQUIRES(mu) {
    ++unpins;
    ++entry_unpins[e.get()];
    pinned_at_unpin = pinned_at_unpin && e->pins() > 0;
    // The n-th unpin comes after n checksums were published.
    int ready = 0;
    for (const BlockState& bs : e->blocks()) ready += bs.crc_ready ? 1 : 0;
    ready_at_unpin = ready_at_unpin && ready >= unpins_of_entry(e);
    if (--test::StateOf(*e).pins == 0 && e->consumed()) released = true;
  }
  void Checksummed(const EntryPtr& e, uint32_t b, uint32_t crc) override CAIRN_REQUIRES(mu) {
    test::StateOf(*e).blocks[b].crc = crc;
    test::StateOf(*e).blocks[b].crc_ready = true;
    ++wakeups;
  }
  bool Paused() override CAIRN_REQUIRES(mu) { return paused && paused(); }

  // An entry whose block k lies in chunk chunk_of[k] (-1: not resident), with
  // `length` bytes of a pattern per block.
  EntryPtr MakeEntry(const std::vector<int32_t>& chunk_of, uint32_t length) {
    auto e = std::make_shared<Entry>();
    for (size_t k = 0; k < chunk_of.size(); ++k) {
      e->layout.blocks.push_back({.region = 0, .offset = 4096 * k, .length = length});
      BlockState bs;
      bs.chunk = chunk_of[k];
      bs.sealed = chunk_of[k] >= 0;
      test::StateOf(*e).blocks.push_back(bs);
      if (chunk_of[k] < 0) continue;
      if (chunks.size() <= static_cast<size_t>(chunk_of[k])) chunks.resize(chunk_of[k] + 1);
      auto& c = chunks[chunk_of[k]];
      c.resize(length + 64, 0xEE);  // bytes past the block must not count
      for (uint32_t i = 0; i < length; ++i) c[i] = static_cast<uint8_t>(i * 7 + k * 13 + 1);
    }
    return e;
  }
};

void WaitIdle(FakeOwner& o, Checksummer& c) {
  MutexLock l(&o.mu);
  o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return c.Idle(); });
}

TEST(ChecksummerTest, ChecksumsEachQueuedBlockOfItsChunk) {
  FakeOwner o;
  EntryPtr e = o.MakeEntry({2, 0, 1}, 1000);
  Checksummer c(&o.mu, &o.done, o.Interface());
  c.Start(nullptr);
  {
    MutexLock l(&o.mu);
    for (uint32_t b = 0; b < 3; ++b) c.Push(e, b);
  }
  WaitIdle(o, c);
  MutexLock l(&o.mu);
  for (uint32_t b = 0; b < 3; ++b) {
    EXPECT_TRUE(e->blocks()[b].crc_ready) << b;
    EXPECT_EQ(e->blocks()[b].crc, crc32c::Value(o.chunks[e->blocks()[b].chunk].data(), 1000)) << b;
  }
  // Distinct data: a checksum of the wrong chunk would not match above.
  EXPECT_NE(e->blocks()[0].crc, e->blocks()[1].crc);
  EXPECT_EQ(e->pins(), 0);
  EXPECT_EQ(o.unpins, 3);
  EXPECT_EQ(o.wakeups, 3);  // the flusher hears of every block
  EXPECT_TRUE(o.pinned_at_unpin);
  EXPECT_TRUE(o.ready_at_unpin);
}

TEST(ChecksummerTest, SkipsConsumedEntriesAndBlocksNoLongerCached) {
  FakeOwner o;
  EntryPtr popped = o.MakeEntry({0}, 512);
  EntryPtr evicted = o.MakeEntry({1, -1}, 512);
  Checksummer c(&o.mu, &o.done, o.Interface());
  c.Start(nullptr);
  {
    MutexLock l(&o.mu);
    test::StateOf(*popped).consumed = true;
    c.Push(popped, 0);
    c.Push(evicted, 1);
    c.Push(evicted, 0);  // the one block it checksums
  }
  WaitIdle(o, c);
  MutexLock l(&o.mu);
  EXPECT_FALSE(popped->blocks()[0].crc_ready);
  EXPECT_FALSE(evicted->blocks()[1].crc_ready);
  EXPECT_TRUE(evicted->blocks()[0].crc_ready);
  EXPECT_EQ(o.unpins, 1);
  EXPECT_EQ(o.wakeups, 1);
  EXPECT_FALSE(o.released);
}

TEST(ChecksummerTest, AnEntryConsumedDuringTheChecksumIsReleasedAtTheUnpin) {
  // The pin keeps the chunk alive while the lock is dropped: a pop that
  // consumes the entry meanwhile leaves the release to the checksummer's
  // unpin. The fake's chunk_data runs after the pin is taken, under the
  // lock; the consume happens there, as if a pop ran during the CRC.
  FakeOwner o;
  EntryPtr e = o.MakeEntry({0}, 4096);
  o.before_chunk_data = [e] { test::StateOf(*e).consumed = true; };
  Checksummer c(&o.mu, &o.done, o.Interface());
  c.Start(nullptr);
  {
    MutexLock l(&o.mu);
    c.Push(e, 0);
  }
  WaitIdle(o, c);
  MutexLock l(&o.mu);
  EXPECT_TRUE(o.released);
  EXPECT_EQ(e->pins(), 0);
}

TEST(ChecksummerTest, TakesNoBlockWhilePausedAndResumesWhenWoken) {
  // The owner pauses it while a capture copies (capture precedence). The
  // fake's `paused` notifies `done` each time it is asked, so the test waits
  // for the thread to have looked at its queue and declined, not for time.
  FakeOwner o;
  EntryPtr e = o.MakeEntry({0, 1}, 1000);
  bool paused = true;  // guarded by o.mu
  int declined = 0;    // guarded by o.mu
  o.paused = [&]() CAIRN_REQUIRES(o.mu) {
    if (paused) ++declined;
    o.done.notify_all();
    return paused;
  };
  Checksummer c(&o.mu, &o.done, o.Interface());
  c.Start(nullptr);
  {
    MutexLock l(&o.mu);
    c.Push(e, 0);
    c.Push(e, 1);
    const int before = declined;
    // Either the thread declined the queued blocks, or (wrongly) took one.
    o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return declined > before || o.unpins > 0; });
    EXPECT_FALSE(e->blocks()[0].crc_ready);
    EXPECT_FALSE(e->blocks()[1].crc_ready);
    EXPECT_EQ(o.unpins, 0);
    EXPECT_FALSE(c.Idle());
    paused = false;
    c.Wake();  // what the owner does when the pause ends
  }
  WaitIdle(o, c);
  MutexLock l(&o.mu);
  EXPECT_TRUE(e->blocks()[0].crc_ready);
  EXPECT_TRUE(e->blocks()[1].crc_ready);
  EXPECT_EQ(o.wakeups, 2);
}

}  // namespace
}  // namespace cairn::core
