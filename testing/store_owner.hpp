// The owner's side that every stage test starts from: the mutex and the
// progress condition the stage shares, and a BlockStore over a small host
// cache (chunks of chunk_bytes, mapped, untouched, unpinned), guarded by that
// mutex as the pipeline guards its own. The store is closed (its entries
// unlisted) before the test's entries go. A test's fake owner derives from it.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <utility>

#include "engine/block_store.hpp"
#include "tiers/host_cache.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::test {

struct StoreOwner {
  // chunks 0: no cache (the initializer maps and adopts one).
  explicit StoreOwner(uint32_t chunks, uint32_t chunk_bytes) {
    if (chunks == 0) return;
    Result<core::HostCache> cache =
        core::HostCache::Create(uint64_t{chunks} * chunk_bytes, chunk_bytes, os::MapOptions{});
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    if (!cache.ok()) return;
    MutexLock l(&mu);
    store.Adopt(std::move(cache).value());
  }
  ~StoreOwner() {
    MutexLock l(&mu);
    store.Close();
  }
  StoreOwner(const StoreOwner&) = delete;
  StoreOwner& operator=(const StoreOwner&) = delete;

  Mutex mu;
  std::condition_variable_any done;  // the stage's progress
  uint64_t evictions = 0;
  uint64_t holds_released = 0;
  core::BlockStore store CAIRN_GUARDED_BY(mu){
      {.evictions = &evictions, .holds_released = &holds_released}, nullptr, &done};
};

}  // namespace cairn::test
