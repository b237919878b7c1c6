#include "tiers/tier_cache.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "testing/entry_state.hpp"

namespace cairn::core {
namespace {

// A storage of `n` units, and a policy over the host fields of BlockState:
// the template is driven without a pipeline, a HostCache or a GPU.
struct FakeStorage {
  std::vector<bool> used;
  bool may_evict = true;
  std::optional<uint32_t> Allocate() {
    for (uint32_t u = 0; u < used.size(); ++u) {
      if (!used[u]) {
        used[u] = true;
        return u;
      }
    }
    return std::nullopt;
  }
  void Free(uint32_t u) {
    ASSERT_TRUE(used.at(u)) << "unit " << u << " freed twice";
    used[u] = false;
  }
};

struct FakeTier {
  using Storage = FakeStorage;
  static constexpr int32_t BlockState::*kUnit = &BlockState::chunk;
  static constexpr bool BlockState::*kListed = &BlockState::clean;
  static constexpr const char* kEvictSpan = "evict";
  static bool Busy(const Entry& e) { return e.pins() > 0; }
  static bool MayEvict(const Storage& s) { return s.may_evict; }
  static void OnReleased(Entry& e, uint32_t block) {
    if (e.blocks()[block].sealed) --test::StateOf(e).capture.resident_blocks;
  }
};

EntryPtr MakeEntry(uint64_t seq, uint32_t blocks) {
  auto e = std::make_shared<Entry>();
  e->seq = seq;
  e->name = "e" + std::to_string(seq);
  test::StateOf(*e).blocks.resize(blocks);
  e->layout.blocks.resize(blocks);
  for (auto& b : e->layout.blocks) b.length = 100;
  return e;
}

// Puts every block of e into a unit of s, sealed and resident.
void Fill(FakeStorage& s, Entry& e) {
  for (auto& b : test::StateOf(e).blocks) {
    b.chunk = static_cast<int32_t>(*s.Allocate());
    b.sealed = true;
    ++test::StateOf(e).capture.resident_blocks;
  }
}

struct TierCacheTest : ::testing::Test {
  FakeStorage storage{.used = std::vector<bool>(4, false)};
  uint64_t evictions = 0;
  TierCache<FakeTier> tier{&evictions, nullptr};
  void SetUp() override { tier.Attach(&storage); }
  std::optional<uint32_t> Acquire() {
    return tier.TryAcquire([](FakeStorage& s) { return s.Allocate(); });
  }
};

TEST_F(TierCacheTest, EvictsOnlyCleanBlocksOldestFirst) {
  auto older = MakeEntry(1, 2), newer = MakeEntry(2, 2);
  Fill(storage, *older);
  Fill(storage, *newer);
  EXPECT_FALSE(tier.EvictOne(UINT64_MAX));  // nothing clean yet
  tier.MarkClean(*newer, 0);
  tier.MarkClean(*older, 1);
  const int32_t older_unit = older->blocks()[1].chunk;
  ASSERT_TRUE(tier.EvictOne(UINT64_MAX));
  EXPECT_EQ(older->blocks()[1].chunk, -1);  // the older entry's block went first
  EXPECT_FALSE(older->blocks()[1].clean);
  EXPECT_EQ(older->capture().resident_blocks, 1u);
  EXPECT_FALSE(storage.used[static_cast<uint32_t>(older_unit)]);
  EXPECT_EQ(evictions, 1u);
  EXPECT_FALSE(tier.EvictOne(/*below_seq=*/2));  // newer ranks at 2: not below
  EXPECT_TRUE(tier.EvictOne(UINT64_MAX));
  EXPECT_EQ(newer->blocks()[0].chunk, -1);
  EXPECT_EQ(evictions, 2u);
}

TEST_F(TierCacheTest, BusyEntriesAreSkipped) {
  auto a = MakeEntry(1, 1), b = MakeEntry(2, 1);
  Fill(storage, *a);
  Fill(storage, *b);
  tier.MarkClean(*a, 0);
  tier.MarkClean(*b, 0);
  test::StateOf(*a).pins = 1;
  EXPECT_EQ(tier.CountEvictableFor(*MakeEntry(3, 1), 5), 1u);
  ASSERT_TRUE(tier.EvictOne(UINT64_MAX));
  EXPECT_GE(a->blocks()[0].chunk, 0);  // pinned: kept
  EXPECT_EQ(b->blocks()[0].chunk, -1);
}

TEST_F(TierCacheTest, HasRoomForCountsFreeThenEvictableBelow) {
  auto old = MakeEntry(1, 2), self = MakeEntry(2, 1), young = MakeEntry(3, 1);
  Fill(storage, *old);
  Fill(storage, *self);
  Fill(storage, *young);
  tier.MarkClean(*old, 0);
  tier.MarkClean(*young, 0);  // ranked above self: not room for it
  tier.MarkClean(*self, 0);   // self's own: not room for it either
  EXPECT_TRUE(tier.HasRoomFor(*self, /*free=*/2, /*missing=*/2));
  EXPECT_TRUE(tier.HasRoomFor(*self, 1, 2));   // one free + old's block
  EXPECT_FALSE(tier.HasRoomFor(*self, 0, 2));  // only old's block
  tier.MarkClean(*old, 1);
  EXPECT_TRUE(tier.HasRoomFor(*self, 0, 2));
}

TEST_F(TierCacheTest, TryAcquireBelowSeqEvictsOnlyOlderEntries) {
  auto old = MakeEntry(1, 2), young = MakeEntry(3, 2);
  Fill(storage, *old);
  Fill(storage, *young);
  tier.MarkClean(*young, 0);
  auto alloc = [](FakeStorage& s) { return s.Allocate(); };
  EXPECT_FALSE(tier.TryAcquire(alloc, /*below_seq=*/2));  // young ranks above 2
  tier.MarkClean(*old, 1);
  ASSERT_TRUE(tier.TryAcquire(alloc, 2));
  EXPECT_EQ(old->blocks()[1].chunk, -1);
  EXPECT_GE(young->blocks()[0].chunk, 0);
}

TEST_F(TierCacheTest, TryAcquireEvictsWhenFullAndAllowed) {
  auto e = MakeEntry(1, 4);
  Fill(storage, *e);
  EXPECT_FALSE(Acquire());  // full, nothing clean
  tier.MarkClean(*e, 2);
  storage.may_evict = false;
  EXPECT_FALSE(Acquire());  // the policy forbids eviction now
  EXPECT_GE(e->blocks()[2].chunk, 0);
  storage.may_evict = true;
  auto unit = Acquire();
  ASSERT_TRUE(unit);
  EXPECT_EQ(e->blocks()[2].chunk, -1);
  EXPECT_TRUE(storage.used[*unit]);
  EXPECT_EQ(evictions, 1u);
}

TEST_F(TierCacheTest, DropUnlistsAndFreesOnce) {
  auto e = MakeEntry(1, 2);
  Fill(storage, *e);
  tier.MarkClean(*e, 0);
  EXPECT_EQ(tier.listed(), 1u);
  EXPECT_TRUE(tier.Drop(*e, 0));
  EXPECT_EQ(tier.listed(), 0u);
  EXPECT_FALSE(tier.Drop(*e, 0));  // no unit any more: nothing freed twice
  EXPECT_TRUE(tier.Drop(*e, 1));   // dirty blocks are dropped too
  EXPECT_EQ(e->capture().resident_blocks, 0u);
  EXPECT_EQ(evictions, 0u);  // drops are not evictions
  EXPECT_FALSE(tier.EvictOne(UINT64_MAX));
}

TEST_F(TierCacheTest, MarkCleanIgnoresBlocksNotInTheTier) {
  auto e = MakeEntry(1, 1);
  tier.MarkClean(*e, 0);  // chunk -1
  EXPECT_EQ(tier.listed(), 0u);
  EXPECT_FALSE(e->blocks()[0].clean);
}

TEST(TierPolicies, DeviceAndHostUseTheirOwnFields) {
  auto e = MakeEntry(1, 1);
  test::StateOf(*e).blocks[0].chunk = 3;
  test::StateOf(*e).blocks[0].sealed = true;
  test::StateOf(*e).capture.resident_blocks = 1;
  test::StateOf(*e).blocks[0].slot = 5;
  test::StateOf(*e).blocks[0].dsealed = true;
  DeviceTier::OnReleased(*e, 0);
  EXPECT_FALSE(e->blocks()[0].dsealed);
  EXPECT_EQ(e->capture().resident_blocks, 1u);  // the host copy is untouched
  HostTier::OnReleased(*e, 0);
  EXPECT_EQ(e->capture().resident_blocks, 0u);
  test::StateOf(*e).reads.prefetching = true;
  EXPECT_TRUE(HostTier::Busy(*e));
  EXPECT_FALSE(DeviceTier::Busy(*e));
  test::StateOf(*e).reads.device_prefetching = true;
  EXPECT_TRUE(DeviceTier::Busy(*e));
}

}  // namespace
}  // namespace cairn::core
