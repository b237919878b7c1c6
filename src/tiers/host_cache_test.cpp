#include "tiers/host_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "engine/stages/initializer.hpp"
#include "engine/node_follower.hpp"
#include "os/mem/numa.hpp"

namespace cairn::core {
namespace {

TEST(HostCache, RoundsDownToWholeChunksAndRejectsTooSmall) {
  auto cache = HostCache::Create(10 * 65536 + 100, 65536, {});
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->chunk_count(), 10u);
  EXPECT_EQ(cache->capacity_bytes(), 10u * 65536);

  auto tiny = HostCache::Create(65536, 65536, {});
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), Code::kConfig);
  EXPECT_NE(tiny.status().message().find("at least 2 blocks"), std::string::npos);
}

TEST(HostCache, AllocatesLowestFirstAndReusesFreedChunks) {
  auto cache = HostCache::Create(4 * 4096, 4096, {});
  ASSERT_TRUE(cache.ok());
  std::set<uint32_t> got;
  for (int i = 0; i < 4; ++i) {
    auto c = cache->Allocate();
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(*c, static_cast<uint32_t>(i));  // lowest address first
    got.insert(*c);
  }
  EXPECT_FALSE(cache->Allocate().has_value());
  EXPECT_EQ(cache->free_count(), 0u);
  cache->Free(2);
  cache->Free(1);
  EXPECT_EQ(cache->Allocate(), std::optional<uint32_t>(1));
  EXPECT_EQ(cache->Allocate(), std::optional<uint32_t>(2));
}

TEST(HostCache, ChunksDoNotOverlap) {
  auto cache = HostCache::Create(3 * 4096, 4096, {.populate = true});
  ASSERT_TRUE(cache.ok());
  for (uint32_t c = 0; c < 3; ++c) std::memset(cache->data(c), static_cast<int>('a' + c), 4096);
  for (uint32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(cache->data(c)[0], 'a' + c);
    EXPECT_EQ(cache->data(c)[4095], 'a' + c);
  }
  EXPECT_EQ(cache->data(1) - cache->data(0), 4096);
}

TEST(HostCache, PrefersTouchedChunksAndTracksTouchProgress) {
  auto cache = HostCache::Create(4 * 8192, 8192, {});
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->touched_count(), 0u);
  EXPECT_FALSE(cache->fully_touched());

  // The initializer claims the lowest untouched chunk; nobody else gets it.
  auto claim = cache->ClaimForTouch();
  ASSERT_EQ(claim, std::optional<uint32_t>(0));
  EXPECT_FALSE(cache->ClaimForTouch().has_value()) << "one claim at a time";
  EXPECT_EQ(cache->free_count(), 3u);
  bool was_touched = true;
  EXPECT_EQ(cache->Allocate(&was_touched), std::optional<uint32_t>(1));  // skips the claimed chunk
  EXPECT_FALSE(was_touched);
  EXPECT_EQ(cache->touched_count(), 1u) << "a chunk given to a writer counts as touched";

  // A paused touch keeps its progress and stays untouched.
  cache->ReleaseClaim(0, 4096);
  EXPECT_EQ(cache->touch_progress(0), 4096u);
  EXPECT_EQ(cache->free_touched_count(), 0u);
  claim = cache->ClaimForTouch();
  ASSERT_EQ(claim, std::optional<uint32_t>(0));
  cache->ReleaseClaim(0, 8192);
  EXPECT_EQ(cache->free_touched_count(), 1u);

  // Touched chunk 0 is preferred over untouched chunk 2.
  EXPECT_EQ(cache->Allocate(&was_touched), std::optional<uint32_t>(0));
  EXPECT_TRUE(was_touched);
  EXPECT_EQ(cache->Allocate(&was_touched), std::optional<uint32_t>(2));
  EXPECT_FALSE(was_touched);
  cache->Free(2);  // freed chunks come back touched
  EXPECT_EQ(cache->free_touched_count(), 1u);
  EXPECT_EQ(cache->Allocate(), std::optional<uint32_t>(2));
  EXPECT_EQ(cache->Allocate(), std::optional<uint32_t>(3));
  EXPECT_TRUE(cache->fully_touched());
  EXPECT_FALSE(cache->ClaimForTouch().has_value());
}

TEST(HostCache, GrowsWithinItsReservationAsFreeUntouchedChunks) {
  auto cache = HostCache::Create(4 * 4096, 4096, {}, nullptr, 10 * 4096);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->chunk_count(), 4u);
  EXPECT_EQ(cache->reserved_count(), 10u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cache->Allocate().has_value());
  EXPECT_FALSE(cache->Allocate().has_value());
  EXPECT_EQ(cache->Grow(6), 2u);
  EXPECT_EQ(cache->capacity_bytes(), 6u * 4096);
  EXPECT_FALSE(cache->fully_touched());
  bool touched = true;
  auto c = cache->Allocate(&touched);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, 4u);
  EXPECT_FALSE(touched) << "a new chunk starts untouched";
  std::memset(cache->data(*c), 0xab, 4096);  // inside the mapping
  EXPECT_EQ(cache->Grow(50), 4u) << "up to the reservation";
  EXPECT_EQ(cache->chunk_count(), 10u);
  EXPECT_EQ(cache->Grow(8), 0u) << "never shrinks";
  EXPECT_EQ(cache->free_count(), 5u);

  auto populated = HostCache::Create(4 * 4096, 4096, {.populate = true}, nullptr, 10 * 4096);
  ASSERT_TRUE(populated.ok());
  EXPECT_EQ(populated->reserved_count(), 4u) << "a populated cache reserves nothing more";
  EXPECT_EQ(populated->Grow(6), 0u);
  EXPECT_TRUE(populated->fully_touched());
}

TEST(HostCache, PopulatedCacheStartsFullyTouched) {
  auto cache = HostCache::Create(4 * 8192, 8192, {.populate = true, .huge_pages = true});
  ASSERT_TRUE(cache.ok());
  EXPECT_TRUE(cache->fully_touched());
  EXPECT_EQ(cache->free_touched_count(), 4u);
}


// host_cache.numa (docs/design.md, "Placement") on a simulated machine.
os::Topology Nodes(int n) {
  os::Topology t;
  for (int k = 0; k < n; ++k) t.node_cpus.push_back({2 * k, 2 * k + 1});
  return t;
}

TEST(HostCacheNuma, ChunksAreBoundInOneRangePerNode) {
  os::FakeNuma numa(Nodes(4));
  auto cache = HostCache::Create(8 * 65536, 65536, {}, &numa);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const auto base = reinterpret_cast<uintptr_t>(cache->base());
  const std::vector<os::FakeNuma::BindCall> want = {
      {base, 2 * 65536, 0}, {base + 2 * 65536, 2 * 65536, 1}, {base + 4 * 65536, 2 * 65536, 2},
      {base + 6 * 65536, 2 * 65536, 3}};
  EXPECT_EQ(numa.binds(), want);
  for (uint32_t c = 0; c < 8; ++c) EXPECT_EQ(cache->node_of(c), static_cast<int>(c / 2)) << c;
}

TEST(HostCacheNuma, UnevenSplitAndMoreNodesThanChunks) {
  os::FakeNuma three(Nodes(3));
  auto cache = HostCache::Create(7 * 65536, 65536, {}, &three);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->nodes().begin, (std::vector<uint32_t>{0, 2, 4, 7}));
  os::FakeNuma four(Nodes(4));
  auto small = HostCache::Create(2 * 65536, 65536, {}, &four);  // nodes 0 and 2 get none
  ASSERT_TRUE(small.ok());
  ASSERT_EQ(four.binds().size(), 2u);
  EXPECT_EQ(four.binds()[0].node, 1);
  EXPECT_EQ(four.binds()[1].node, 3);
}

TEST(HostCacheNuma, AllocatesOnTheAskedNodeFirstThenAnywhere) {
  os::FakeNuma numa(Nodes(4));
  auto cache = HostCache::Create(8 * 65536, 65536, {}, &numa);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, 2), std::optional<uint32_t>(4));
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, 2), std::optional<uint32_t>(5));
  // Node 2 is full: the lowest free chunk anywhere (touched first).
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, 2), std::optional<uint32_t>(0));
  cache->Free(5);  // touched now: node 2's touched chunk before anything else
  bool touched = false;
  EXPECT_EQ(cache->Allocate(&touched, UINT32_MAX, 2), std::optional<uint32_t>(5));
  EXPECT_TRUE(touched);
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, 3), std::optional<uint32_t>(6));
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, -1), std::optional<uint32_t>(1));  // no preference
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, 9), std::optional<uint32_t>(2));   // no such node: any
}

TEST(HostCacheNuma, WithoutNumaNothingIsPartitioned) {
  auto cache = HostCache::Create(8 * 65536, 65536, {});
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(cache->nodes().partitioned());
  EXPECT_EQ(cache->node_of(5), -1);
  EXPECT_EQ(cache->Allocate(nullptr, UINT32_MAX, 3), std::optional<uint32_t>(0));  // node ignored
}

TEST(HostCacheNuma, ConfigAutoBindsOnlyOnSeveralNodes) {
  os::FakeNuma one(Nodes(1)), four(Nodes(4));
  Config c = DefaultConfig();
  c.numa = &one;
  EXPECT_EQ(CacheNuma(c), nullptr) << "auto on one node: nothing bound";
  c.host_cache_numa = "on";
  EXPECT_EQ(CacheNuma(c), &one);
  c.numa = &four;
  c.host_cache_numa = "auto";
  EXPECT_EQ(CacheNuma(c), &four);
  c.host_cache_numa = "off";
  EXPECT_EQ(CacheNuma(c), nullptr);
  c.host_cache_numa = "maybe";
  Status s = c.Validate();
  EXPECT_EQ(s.code(), Code::kConfig);
  EXPECT_NE(s.message().find("host_cache.numa"), std::string::npos) << s.ToString();
}

// For real on this machine's node 0: `on` binds the mapping through mbind
// and the memory is usable (eager populates after binding).
TEST(HostCacheNuma, RealBindOnNodeZero) {
  auto cache = HostCache::Create(4 * 65536, 65536, {.populate = true}, &os::RealNuma());
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_TRUE(cache->nodes().partitioned());
  std::memset(cache->data(3), 1, 65536);
  void* page = cache->data(3);
  int node = -2;
  ASSERT_TRUE(os::RealNuma().QueryNodes({&page, 1}, {&node, 1}).ok());
  EXPECT_EQ(node, os::RealNuma().topology().nodes() == 1 ? 0 : cache->node_of(3));
}

TEST(NodeFollower, MovesToTheChunksNodeOncePerChange) {
  os::FakeNuma numa(Nodes(4));
  auto cache = HostCache::Create(8 * 65536, 65536, {}, &numa);
  ASSERT_TRUE(cache.ok());
  NodeFollower f(&numa, *cache);
  f.Follow(cache->data(5) + 100);
  f.Follow(cache->data(4));  // same node: no call
  f.Follow(cache->data(1));
  const auto sets = numa.affinity_sets();
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].first, os::CurrentTid());
  EXPECT_EQ(sets[0].second, (std::vector<int>{4, 5}));
  EXPECT_EQ(sets[1].second, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.node(), 0);

  auto plain = HostCache::Create(8 * 65536, 65536, {});
  ASSERT_TRUE(plain.ok());
  NodeFollower none(&numa, *plain);
  none.Follow(plain->data(7));
  EXPECT_EQ(numa.affinity_sets().size(), 2u) << "an unpartitioned cache moves no thread";
}

}  // namespace
}  // namespace cairn::core
