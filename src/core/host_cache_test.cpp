#include "core/host_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace cairn::core {
namespace {

TEST(HostCache, RoundsDownToWholeChunksAndRejectsTooSmall) {
  auto cache = HostCache::Create(10 * 65536 + 100, 65536, false);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->chunk_count(), 10u);
  EXPECT_EQ(cache->capacity_bytes(), 10u * 65536);

  auto tiny = HostCache::Create(65536, 65536, false);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), Code::kConfig);
  EXPECT_NE(tiny.status().message().find("at least 2 blocks"), std::string::npos);
}

TEST(HostCache, AllocatesLowestFirstAndReusesFreedChunks) {
  auto cache = HostCache::Create(4 * 4096, 4096, false);
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
  auto cache = HostCache::Create(3 * 4096, 4096, true);
  ASSERT_TRUE(cache.ok());
  for (uint32_t c = 0; c < 3; ++c) std::memset(cache->data(c), static_cast<int>('a' + c), 4096);
  for (uint32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(cache->data(c)[0], 'a' + c);
    EXPECT_EQ(cache->data(c)[4095], 'a' + c);
  }
  EXPECT_EQ(cache->data(1) - cache->data(0), 4096);
}

}  // namespace
}  // namespace cairn::core
