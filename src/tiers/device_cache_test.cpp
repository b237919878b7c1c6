// The device cache (tiers/device_cache.hpp) against the fake CUDA driver:
// direct and incremental initialization, slot bookkeeping, mapping failures,
// slow mapping and teardown.
#include "tiers/device_cache.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "gpu/cuda_driver.hpp"
#include "gpu/runtime.hpp"
#include "testing/fake_cuda/fake_cuda_fixture.hpp"

namespace cairn::gpu {
namespace {

#if CAIRN_TEST_FAKE_CUDA

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGranularity = 2 * kMiB;  // the fake's default

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Counts Mapped() calls and lets a test wait for a condition on the cache
// (no polling, no sleeps): every publication is followed by a call.
class Progress final : public MappingListener {
 public:
  void Mapped() override {
    {
      std::lock_guard lock(mu_);
      ++calls_;
    }
    cv_.notify_all();
  }
  template <typename Pred>
  bool WaitFor(Pred pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), pred);
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
};

class DeviceCacheTest : public test::FakeCudaTest {
 protected:
  void SetUp() override {
    test::FakeCudaTest::SetUp();
    if (HasFatalFailure()) return;
    auto rt = Runtime::Open(d(), -1);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(rt).value();
    auto stream = Stream::Create(*rt_);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    stream_ = std::move(stream).value();
  }
  void TearDown() override {
    stream_.reset();
    rt_.reset();
    test::FakeCudaTest::TearDown();
  }

  DeviceCacheOptions Options(uint64_t capacity, uint32_t slot, DeviceCacheInit init,
                             uint64_t chunk = 1ull << 30) {
    DeviceCacheOptions o;
    o.capacity_bytes = capacity;
    o.slot_bytes = slot;
    o.init = init;
    o.map_chunk_bytes = chunk;
    o.listener = &progress_;
    return o;
  }

  std::unique_ptr<DeviceCache> Create(const DeviceCacheOptions& o) {
    auto c = DeviceCache::Create(*rt_, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  void WaitMapped(const DeviceCache& c) {
    ASSERT_TRUE(progress_.WaitFor([&] { return c.mapping_done(); })) << "mapping never ended";
  }

  // Copies a pattern into the slot and back through the stream.
  Status RoundTrip(const DeviceCache& c, uint32_t slot, uint8_t seed) {
    const size_t n = c.slot_bytes();
    std::vector<uint8_t> in(n), out(n, 0);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(seed + i * 13);
    void* dev = reinterpret_cast<void*>(c.address(slot));
    CAIRN_RETURN_IF_ERROR(stream_->Copy(dev, in.data(), n));
    CAIRN_RETURN_IF_ERROR(stream_->Copy(out.data(), dev, n));
    CAIRN_RETURN_IF_ERROR(stream_->Synchronize());
    if (out != in) return Status::Corrupt("slot " + std::to_string(slot) + " lost its bytes");
    return Status::Ok();
  }

  void ExpectNoDeviceMemoryLeft() {
    EXPECT_EQ(ctl_.live("device_allocs"), 0u);
    EXPECT_EQ(ctl_.live("mappings"), 0u);
    EXPECT_EQ(ctl_.live("handles"), 0u);
    EXPECT_EQ(ctl_.live("reservations"), 0u);
    EXPECT_EQ(ctl_.live("device_bytes"), 0u);
  }

  // Map rate for about 50 ms per granularity-sized chunk.
  static double SlowMapGbps() { return static_cast<double>(kGranularity) / 0.05 / 1e9; }

  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<Stream> stream_;
  Progress progress_;
};

// --- Options -------------------------------------------------------------------------

TEST_F(DeviceCacheTest, RejectsCachesWithoutASlot) {
  for (DeviceCacheInit init : {DeviceCacheInit::kDirect, DeviceCacheInit::kIncremental}) {
    auto zero_slot = DeviceCache::Create(*rt_, Options(4 * kMiB, 0, init));
    EXPECT_EQ(zero_slot.status().code(), Code::kInvalidArgument);
    auto too_small = DeviceCache::Create(*rt_, Options(kMiB - 1, kMiB, init));
    EXPECT_EQ(too_small.status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(Contains(too_small.status().message(), "no slot")) << too_small.status().ToString();
  }
  ExpectNoDeviceMemoryLeft();
}

// --- Direct ----------------------------------------------------------------------------

TEST_F(DeviceCacheTest, DirectAllocatesTheWholeCacheAtOnce) {
  auto c = Create(Options(5 * kMiB + 100, kMiB, DeviceCacheInit::kDirect));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->init(), DeviceCacheInit::kDirect);
  EXPECT_EQ(c->slot_count(), 5u);  // rounded down to whole slots
  EXPECT_EQ(c->capacity_bytes(), 5 * kMiB);
  EXPECT_EQ(c->mapped_slots(), 5u);
  EXPECT_TRUE(c->mapping_done());
  EXPECT_TRUE(c->fully_mapped());
  EXPECT_EQ(c->map_error(), "");
  EXPECT_GE(c->mapping_seconds(), 0.0);
  EXPECT_EQ(c->map_calls(), 1u);
  EXPECT_EQ(ctl_.live("device_allocs"), 1u);
  EXPECT_EQ(ctl_.live("device_bytes"), 5 * kMiB);

  // Lowest first, every slot, then none.
  for (uint32_t i = 0; i < 5; ++i) {
    auto s = c->Allocate();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(*s, i);
  }
  EXPECT_FALSE(c->Allocate().has_value());
  EXPECT_EQ(c->used_count(), 5u);
  EXPECT_EQ(c->free_mapped_count(), 0u);
  c->Free(3);
  c->Free(1);
  EXPECT_EQ(c->free_mapped_count(), 2u);
  EXPECT_EQ(c->Allocate(), std::optional<uint32_t>(1));
  EXPECT_EQ(c->Allocate(), std::optional<uint32_t>(3));
  // Slot addresses are device memory copies can use, up to the last byte.
  for (uint32_t i : {0u, 4u}) {
    Status s = RoundTrip(*c, i, static_cast<uint8_t>(i));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(c->address(1) - c->address(0), kMiB);
  EXPECT_EQ(progress_.calls(), 0);  // kDirect does not report progress
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, DirectTooLargeForTheDeviceIsNoMemory) {
  ASSERT_EQ(ctl_.set_device_memory(4 * kMiB), 0);
  auto c = DeviceCache::Create(*rt_, Options(8 * kMiB, kMiB, DeviceCacheInit::kDirect));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kNoMemory);
  EXPECT_TRUE(Contains(c.status().message(), "cuMemAlloc")) << c.status().ToString();
  EXPECT_TRUE(Contains(c.status().message(), "device_cache.size")) << c.status().ToString();
  EXPECT_TRUE(Contains(c.status().message(), "CUDA_ERROR_OUT_OF_MEMORY")) << c.status().ToString();
  ExpectNoDeviceMemoryLeft();
}

// --- Incremental -------------------------------------------------------------------------

TEST_F(DeviceCacheTest, IncrementalMapsEveryChunkLowestFirst) {
  // 10 MiB in chunks of 4 MiB: 4 + 4 + 2.
  auto c = Create(Options(10 * kMiB, kMiB, DeviceCacheInit::kIncremental, 4 * kMiB));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->init(), DeviceCacheInit::kIncremental);
  EXPECT_EQ(c->slot_count(), 10u);
  EXPECT_EQ(c->reserved_bytes(), 10 * kMiB);
  EXPECT_EQ(c->map_chunk_bytes(), 4 * kMiB);
  EXPECT_EQ(ctl_.live("reservations"), 1u);
  WaitMapped(*c);
  EXPECT_TRUE(c->fully_mapped());
  EXPECT_EQ(c->mapped_slots(), 10u);
  EXPECT_EQ(c->mapped_bytes(), 10 * kMiB);
  EXPECT_EQ(c->map_error(), "");
  EXPECT_GE(c->mapping_seconds(), 0.0);
  EXPECT_EQ(c->map_calls(), 3u);
  EXPECT_EQ(ctl_.call_count("cuMemCreate"), 3u);
  EXPECT_EQ(ctl_.call_count("cuMemSetAccess"), 3u);
  EXPECT_EQ(ctl_.live("mappings"), 3u);
  EXPECT_EQ(ctl_.live("handles"), 3u);

  // The range is device memory in one reservation.
  auto info = rt_->Classify(reinterpret_cast<void*>(c->address(0)), c->capacity_bytes());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->kind, PointerKind::kDevice);

  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(c->Allocate(), std::optional<uint32_t>(i));
    Status s = RoundTrip(*c, i, static_cast<uint8_t>(i));
    EXPECT_TRUE(s.ok()) << "slot " << i << ": " << s.ToString();
  }
  EXPECT_FALSE(c->Allocate().has_value());
  c->Free(7);
  EXPECT_EQ(c->free_mapped_count(), 1u);
  EXPECT_EQ(c->Allocate(), std::optional<uint32_t>(7));

  // The creating thread's context is untouched.
  CUcontext cur = nullptr;
  ASSERT_EQ(d().cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, ctx_);
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, IncrementalProgressCallsAfterEachChunkAndAtTheEnd) {
  auto c = Create(Options(8 * kMiB, kMiB, DeviceCacheInit::kIncremental, 2 * kMiB));
  ASSERT_NE(c, nullptr);
  // 4 chunks + the end: wait for all five calls.
  ASSERT_TRUE(progress_.WaitFor([&] { return c->mapping_done(); }));
  c.reset();  // joins the mapping thread: every call has been made
  EXPECT_EQ(progress_.calls(), 5);
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, ChunkSizesFollowGranularityAndSlots) {
  {
    // Slot not a multiple of the granularity: chunks of at least one slot.
    auto c = Create(Options(9 * kMiB, 3 * kMiB, DeviceCacheInit::kIncremental, 1));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->reserved_bytes(), 10 * kMiB);
    EXPECT_EQ(c->map_chunk_bytes(), 4 * kMiB);
    WaitMapped(*c);
    EXPECT_EQ(c->mapped_slots(), 3u);
    Status s = RoundTrip(*c, 2, 9);  // straddles chunks 2 and 3
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ExpectNoDeviceMemoryLeft();
  {
    // Slot a multiple of the granularity: chunks of whole slots.
    auto c = Create(Options(16 * kMiB, 4 * kMiB, DeviceCacheInit::kIncremental, 6 * kMiB));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->map_chunk_bytes(), 8 * kMiB);
    WaitMapped(*c);
    EXPECT_EQ(c->map_calls(), 2u);
    EXPECT_TRUE(c->fully_mapped());
  }
  ExpectNoDeviceMemoryLeft();
  {
    // A chunk larger than the cache is clamped to the reservation.
    auto c = Create(Options(3 * kMiB, kMiB, DeviceCacheInit::kIncremental));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->reserved_bytes(), 4 * kMiB);
    EXPECT_EQ(c->map_chunk_bytes(), 4 * kMiB);
    WaitMapped(*c);
    EXPECT_EQ(c->mapped_slots(), 3u);  // the reservation's tail holds no slot
    EXPECT_EQ(c->map_calls(), 1u);
  }
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, FirstSlotIsUsableBeforeTheCacheIsFullyMapped) {
  // 32 chunks at about 50 ms each: the first capture starts long before the end.
  ASSERT_EQ(ctl_.set_gbps("map", SlowMapGbps()), 0);
  auto c = Create(Options(64 * kMiB, kMiB, DeviceCacheInit::kIncremental, kGranularity));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->mapping_seconds(), -1.0);
  ASSERT_TRUE(progress_.WaitFor([&] { return c->mapped_slots() > 0; }));

  auto slot = c->Allocate();
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(*slot, 0u);
  Status s = RoundTrip(*c, *slot, 42);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // The copy into slot 0 is complete, and mapping is still going on.
  EXPECT_FALSE(c->mapping_done());
  EXPECT_LT(c->mapped_slots(), c->slot_count());

  // Allocate only hands out mapped slots: drain what is mapped now.
  std::vector<uint32_t> got{*slot};
  while (auto next = c->Allocate()) {
    EXPECT_LT(*next, c->mapped_slots());
    EXPECT_EQ(*next, got.back() + 1);  // lowest first
    got.push_back(*next);
  }
  EXPECT_LT(got.size(), c->slot_count());
  EXPECT_FALSE(c->fully_mapped());
  c.reset();  // stops the mapping early
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, CreateOutOfMemoryStopsTheMappingAndKeepsWhatIsMapped) {
  ASSERT_EQ(ctl_.set_fail("cuMemCreate:3"), 0);
  auto c = Create(Options(10 * kMiB, kMiB, DeviceCacheInit::kIncremental, 2 * kMiB));
  ASSERT_NE(c, nullptr);  // not an error of Create
  WaitMapped(*c);
  EXPECT_FALSE(c->fully_mapped());
  EXPECT_EQ(c->map_calls(), 2u);
  EXPECT_EQ(c->mapped_slots(), 4u);
  EXPECT_EQ(c->mapped_bytes(), 4 * kMiB);
  const std::string e = c->map_error();
  EXPECT_TRUE(Contains(e, "cuMemCreate")) << e;
  EXPECT_TRUE(Contains(e, "CUDA_ERROR_OUT_OF_MEMORY")) << e;
  EXPECT_TRUE(Contains(e, "after mapping 4194304 of 10485760 bytes")) << e;
  EXPECT_TRUE(Contains(e, "keeps 4194304 bytes")) << e;
  EXPECT_GE(c->mapping_seconds(), 0.0);
  EXPECT_EQ(ctl_.live("mappings"), 2u);
  EXPECT_EQ(ctl_.live("handles"), 2u);
  EXPECT_EQ(ctl_.call_count("cuMemCreate"), 3u);  // nothing tried after the failure

  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(c->Allocate(), std::optional<uint32_t>(i));
  EXPECT_FALSE(c->Allocate().has_value());
  EXPECT_EQ(c->free_mapped_count(), 0u);
  Status s = RoundTrip(*c, 3, 3);
  EXPECT_TRUE(s.ok()) << s.ToString();
  c->Free(0);
  EXPECT_EQ(c->Allocate(), std::optional<uint32_t>(0));
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, MapFailureUndoesItsChunk) {
  ASSERT_EQ(ctl_.set_fail("cuMemSetAccess:2:CUDA_ERROR_INVALID_VALUE"), 0);
  auto c = Create(Options(8 * kMiB, kMiB, DeviceCacheInit::kIncremental, 2 * kMiB));
  ASSERT_NE(c, nullptr);
  WaitMapped(*c);
  EXPECT_EQ(c->mapped_slots(), 2u);
  EXPECT_TRUE(Contains(c->map_error(), "cuMemSetAccess")) << c->map_error();
  EXPECT_EQ(ctl_.live("mappings"), 1u);  // the failed chunk is unmapped
  EXPECT_EQ(ctl_.live("handles"), 1u);   // and released
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, NoDeviceMemoryAtAllLeavesAnEmptyCache) {
  ASSERT_EQ(ctl_.set_fail("cuMemCreate:1+"), 0);
  auto c = Create(Options(4 * kMiB, kMiB, DeviceCacheInit::kIncremental));
  ASSERT_NE(c, nullptr);
  WaitMapped(*c);
  EXPECT_EQ(c->mapped_slots(), 0u);
  EXPECT_FALSE(c->Allocate().has_value());
  EXPECT_TRUE(Contains(c->map_error(), "after mapping 0 of")) << c->map_error();
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

TEST_F(DeviceCacheTest, DestroyWhileMappingSlowlyIsPromptAndLeaksNothing) {
  ASSERT_EQ(ctl_.set_gbps("map", SlowMapGbps()), 0);
  auto c = Create(Options(64 * kMiB, kMiB, DeviceCacheInit::kIncremental, kGranularity));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(progress_.WaitFor([&] { return c->mapped_slots() > 0; }));
  c.reset();  // waits for at most the chunk in flight
  // Stopped between chunks: far from the 32 a full mapping takes.
  EXPECT_LT(ctl_.call_count("cuMemMap"), 32u);
  const int calls = progress_.calls();
  ExpectNoDeviceMemoryLeft();
  EXPECT_EQ(progress_.calls(), calls);  // nothing runs after the destructor
}

TEST_F(DeviceCacheTest, ReserveFailureIsAnErrorOfCreate) {
  ASSERT_EQ(ctl_.set_fail("cuMemAddressReserve:1"), 0);
  auto c = DeviceCache::Create(*rt_, Options(4 * kMiB, kMiB, DeviceCacheInit::kIncremental));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kNoMemory);
  EXPECT_TRUE(Contains(c.status().message(), "cuMemAddressReserve")) << c.status().ToString();
  ExpectNoDeviceMemoryLeft();
}

// A copy's sticky error loses the context while the cache is still being
// mapped: mapping stops at the next chunk with the runtime's error, nothing
// more is asked of the driver, and the destructor releases everything.
TEST_F(DeviceCacheTest, LostContextStopsTheMappingAndTheCacheStillReleasesEverything) {
  ASSERT_EQ(ctl_.set_gbps("map", SlowMapGbps()), 0);
  auto c = Create(Options(16 * kMiB, kMiB, DeviceCacheInit::kIncremental, kGranularity));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(progress_.WaitFor([&] { return c->mapped_slots() > 0; }));
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:1:CUDA_ERROR_ILLEGAL_ADDRESS:deferred"), 0);
  Status s = RoundTrip(*c, 0, 1);
  // The deferred error is sticky: whichever call meets it first loses the
  // context, this copy (kIo) or the mapping thread's next call (then the copy
  // finds the runtime lost: kUnsupported). Scheduling decides which, as with
  // the real driver; both name the error.
  EXPECT_TRUE(s.code() == Code::kIo || s.code() == Code::kUnsupported) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << s.ToString();
  ASSERT_TRUE(rt_->lost());
  ASSERT_EQ(ctl_.set_gbps("map", 0), 0);
  WaitMapped(*c);
  EXPECT_FALSE(c->fully_mapped());
  const std::string e = c->map_error();
  EXPECT_TRUE(Contains(e, "CUDA_ERROR_ILLEGAL_ADDRESS")) << e;
  EXPECT_TRUE(Contains(e, "lost")) << e;
  // At most the chunk in flight when the context was lost was asked for.
  EXPECT_LE(ctl_.call_count("cuMemCreate"), c->map_calls() + 1);
  // A new cache on the lost runtime: the runtime's error, no driver call.
  const auto reserves = ctl_.call_count("cuMemAddressReserve");
  auto again = DeviceCache::Create(*rt_, Options(4 * kMiB, kMiB, DeviceCacheInit::kIncremental));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kUnsupported);
  EXPECT_TRUE(Contains(again.status().message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << again.status().ToString();
  EXPECT_EQ(ctl_.call_count("cuMemAddressReserve"), reserves);
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

// The same for a direct cache (one cuMemAlloc, freed on a lost context too).
TEST_F(DeviceCacheTest, DirectCacheOnALostContextIsFreed) {
  auto c = Create(Options(4 * kMiB, kMiB, DeviceCacheInit::kDirect));
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:1:CUDA_ERROR_LAUNCH_FAILED:deferred"), 0);
  EXPECT_FALSE(RoundTrip(*c, 1, 2).ok());
  ASSERT_TRUE(rt_->lost());
  EXPECT_EQ(ctl_.live("device_allocs"), 1u);
  c.reset();
  ExpectNoDeviceMemoryLeft();
}

#endif  // CAIRN_TEST_FAKE_CUDA

}  // namespace
}  // namespace cairn::gpu
