#include "core/host_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

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

TEST(HostCache, PopulatedCacheStartsFullyTouched) {
  auto cache = HostCache::Create(4 * 8192, 8192, {.populate = true, .huge_pages = true});
  ASSERT_TRUE(cache.ok());
  EXPECT_TRUE(cache->fully_touched());
  EXPECT_EQ(cache->free_touched_count(), 4u);
}

}  // namespace
}  // namespace cairn::core
