// The GPU tier of the pipeline against the fake CUDA driver: device and
// managed regions through the device cache (or straight to the host cache),
// incremental mapping, the drain and prefetch paths, host registration, and
// injected driver faults. The generic checkpoint/restore/history behaviour
// for every memory kind is in client_test.cpp and history_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "testing/fake_cuda/fake_cuda_fixture.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/test_util.hpp"

#if CAIRN_TEST_FAKE_CUDA

namespace cairn {
namespace {

using namespace test;

std::vector<uint8_t> Pattern(size_t n, uint64_t seed) { return SplitMixPattern(n, seed, 0x6e70u); }

class GpuPipelineTest : public FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    if (HasFatalFailure()) return;
    // The pipeline loads the process-wide driver: make it the fake.
    ASSERT_EQ(setenv("CAIRN_CUDA_DRIVER", kFakeCudaLib, 0), 0);
    ASSERT_STREQ(std::getenv("CAIRN_CUDA_DRIVER"), kFakeCudaLib);
    dir_ = std::make_unique<TempDir>("gpu_pipeline");
    config_ = DefaultConfig();
    config_.scratch_dir = dir_->path() + "/scratch";
    config_.host_cache_bytes = 16 * kMiB;
    config_.host_cache_grow = false;  // the sizes below are the ones under test
    config_.block_bytes = 1 * kMiB;
    config_.fsync = false;
    config_.keep_versions = 4;
    config_.device_cache_bytes = 8 * kMiB;
    config_.device_map_chunk_bytes = 2 * kMiB;
  }
  void TearDown() override {
    for (auto p : device_) d().cuMemFree(p);
    for (auto p : managed_) d().cuMemFree(p);
    device_.clear();
    managed_.clear();
    FakeCudaTest::TearDown();
  }

  void* DeviceAlloc(size_t n) {
    CUdeviceptr p = 0;
    EXPECT_EQ(d().cuMemAlloc(&p, n), CUDA_SUCCESS);
    device_.push_back(p);
    return reinterpret_cast<void*>(p);
  }
  void* ManagedAlloc(size_t n) {
    CUdeviceptr p = 0;
    EXPECT_EQ(d().cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    managed_.push_back(p);
    return reinterpret_cast<void*>(p);
  }
  void Put(void* dev, const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(d().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dev), bytes.data(), bytes.size()), CUDA_SUCCESS);
  }
  std::vector<uint8_t> Get(const void* dev, size_t n) {
    std::vector<uint8_t> out(n);
    EXPECT_EQ(d().cuMemcpyDtoH(out.data(), reinterpret_cast<CUdeviceptr>(dev), n), CUDA_SUCCESS);
    return out;
  }
  std::unique_ptr<Client> Open() {
    auto c = Client::Open(config_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::unique_ptr<TempDir> dir_;
  Config config_;
  std::vector<CUdeviceptr> device_, managed_;
};

TEST_F(GpuPipelineTest, DeviceAndHostRegionsRoundTripThroughTheDeviceCache) {
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t kDev = 3 * kMiB + 123, kHost = kMiB;
  void* dev = DeviceAlloc(kDev);
  std::vector<uint8_t> host(kHost);
  ASSERT_OK(client->Protect(1, dev, kDev));
  ASSERT_OK(client->Protect(2, host.data(), kHost));
  for (int v = 0; v < 2; ++v) {
    Put(dev, Pattern(kDev, 10 + v));
    const auto bytes = Pattern(kHost, 20 + v);
    std::copy(bytes.begin(), bytes.end(), host.begin());  // same buffer: it is protected
    ASSERT_OK(client->Checkpoint("sim", v));
  }
  ASSERT_OK(client->Wait("sim", 1, Level::kLocal));
  Put(dev, std::vector<uint8_t>(kDev, 0));
  std::fill(host.begin(), host.end(), 0);
  ASSERT_OK(client->Restore("sim", 0));
  EXPECT_TRUE(SameBytes(Get(dev, kDev), Pattern(kDev, 10)));
  EXPECT_TRUE(SameBytes(host, Pattern(kHost, 20)));
  ASSERT_OK(client->Restore("sim", 1));
  EXPECT_TRUE(SameBytes(Get(dev, kDev), Pattern(kDev, 11)));
  EXPECT_TRUE(SameBytes(host, Pattern(kHost, 21)));
  auto latest = client->Latest("sim");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 1);

  const Stats st = client->GetStats();
  EXPECT_TRUE(st.device.gpu);
  EXPECT_EQ(st.device.capacity_bytes, 8 * kMiB);
  EXPECT_EQ(st.device.capture.bytes, 2 * kDev);
  EXPECT_EQ(st.device.drain.bytes, 2 * kDev);  // every device block reached the host tier
  EXPECT_GE(st.device.hits, 1u);
  ASSERT_OK(client->Close());
  // Everything Cairn made on the device is gone (the test's own buffer stays).
  EXPECT_EQ(ctl_.live("streams"), 0u);
  EXPECT_EQ(ctl_.live("mappings"), 0u);
  EXPECT_EQ(ctl_.live("reservations"), 0u);
  EXPECT_EQ(ctl_.live("host_allocs"), 0u);
  EXPECT_EQ(ctl_.live("device_allocs"), 1u);

  // A new client (restart) restores the device region from the file.
  auto again = Open();
  ASSERT_TRUE(again);
  ASSERT_OK(again->Protect(1, dev, kDev));
  ASSERT_OK(again->Protect(2, host.data(), kHost));
  Put(dev, std::vector<uint8_t>(kDev, 0));
  ASSERT_OK(again->Restore("sim", 1));
  EXPECT_TRUE(SameBytes(Get(dev, kDev), Pattern(kDev, 11)));
  EXPECT_EQ(again->GetStats().cache_misses, 1u);
}

TEST_F(GpuPipelineTest, WithoutADeviceCacheDeviceRegionsGoStraightToTheHostCache) {
  config_.device_cache_bytes = 0;
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t n = 2 * kMiB + 5;
  void* dev = DeviceAlloc(n);
  ASSERT_OK(client->Protect(7, dev, n));
  Put(dev, Pattern(n, 1));
  ASSERT_OK(client->Checkpoint("direct", 0));
  ASSERT_OK(client->Wait("direct", 0, Level::kLocal));
  Put(dev, std::vector<uint8_t>(n, 0xee));
  ASSERT_OK(client->Restore("direct", 0));
  EXPECT_TRUE(SameBytes(Get(dev, n), Pattern(n, 1)));
  const Stats st = client->GetStats();
  EXPECT_EQ(st.device.capacity_bytes, 0u);
  EXPECT_EQ(st.device.capture.bytes, n);
  EXPECT_EQ(st.device.drain.bytes, 0u);
  EXPECT_EQ(st.device.hits, 0u);
  EXPECT_EQ(ctl_.call_count("cuMemAddressReserve"), 0u);
}

TEST_F(GpuPipelineTest, ManagedRegionRoundTrips) {
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t n = 3 * kMiB;
  auto* managed = static_cast<uint8_t*>(ManagedAlloc(n));
  auto want = Pattern(n, 3);
  std::memcpy(managed, want.data(), n);  // managed memory is host-accessible
  ASSERT_OK(client->Protect(1, managed, n));
  ASSERT_OK(client->Checkpoint("m", 0));
  std::memset(managed, 0, n);
  ASSERT_OK(client->Restore("m", 0));
  EXPECT_TRUE(SameBytes(managed, want));
  EXPECT_EQ(client->GetStats().device.capture.bytes, n);
}

TEST_F(GpuPipelineTest, CheckpointLargerThanTheDeviceCacheStreamsThroughIt) {
  config_.device_cache_bytes = 4 * kMiB;
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t n = 12 * kMiB;
  void* dev = DeviceAlloc(n);
  Put(dev, Pattern(n, 4));
  ASSERT_OK(client->Protect(1, dev, n));
  ASSERT_OK(client->Checkpoint("big", 0));
  ASSERT_OK(client->Wait("big", 0, Level::kLocal));
  Put(dev, std::vector<uint8_t>(n, 0));
  ASSERT_OK(client->Restore("big", 0));
  EXPECT_TRUE(SameBytes(Get(dev, n), Pattern(n, 4)));
  const Stats st = client->GetStats();
  EXPECT_EQ(st.device.drain.bytes, n);
  EXPECT_GE(st.device.evictions, 8u);  // 12 blocks through 4 slots
}

// The demonstration: with a slow mapping rate the first capture
// completes while most of the cache is still unmapped.
TEST_F(GpuPipelineTest, FirstCaptureStartsBeforeTheCacheIsFullyMapped) {
  config_.device_cache_bytes = 64 * kMiB;
  ctl_.set_gbps("map", 0.04);  // 2 MiB per ~52 ms: 32 chunks take ~1.7 s
  auto client = Open();
  ASSERT_TRUE(client);
  void* dev = DeviceAlloc(kMiB);
  Put(dev, Pattern(kMiB, 5));
  ASSERT_OK(client->Protect(1, dev, kMiB));
  ASSERT_OK(client->Checkpoint("early", 0));
  const Stats st = client->GetStats();
  EXPECT_LT(st.device.mapped_bytes, st.device.capacity_bytes);
  EXPECT_LT(st.device.fully_mapped_s, 0);  // still mapping
  EXPECT_EQ(st.device.capture.bytes, kMiB);
  Put(dev, std::vector<uint8_t>(kMiB, 0));
  ASSERT_OK(client->Restore("early", 0));
  EXPECT_TRUE(SameBytes(Get(dev, kMiB), Pattern(kMiB, 5)));
  ctl_.set_gbps("map", 0);  // let Close finish mapping-independent work fast
  ASSERT_OK(client->Close());
  EXPECT_EQ(ctl_.live("mappings"), 0u);
  EXPECT_EQ(ctl_.live("handles"), 0u);
}

// Constraint 1 of the paper: captures wait for mapping rather than evict.
TEST_F(GpuPipelineTest, NoDeviceEvictionBeforeTheCacheIsFullyMapped) {
  // 4 chunks of 2 MiB, ~210 ms each: slow enough that the captures outrun
  // the mapper even in a sanitizer build, where each one costs milliseconds.
  ctl_.set_gbps("map", 0.01);
  config_.keep_versions = 10;  // retention would free slots of old versions
  auto client = Open();
  ASSERT_TRUE(client);
  void* dev = DeviceAlloc(kMiB);
  ASSERT_OK(client->Protect(1, dev, kMiB));
  double captures_s = 0;
  for (int v = 0; v < 8; ++v) {  // exactly the cache's 8 slots
    Put(dev, Pattern(kMiB, 100 + v));
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_OK(client->Checkpoint("fill", v));
    captures_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const Stats st = client->GetStats();
  EXPECT_EQ(st.device.evictions, 0u);
  EXPECT_EQ(st.device.used_bytes, 8 * kMiB);
  EXPECT_GT(st.device.capture_blocked_s, 0.0);  // waited for mapping at least once
  // capture.seconds is copy time only: the waits are not counted in it too.
  EXPECT_LE(st.capture.seconds + st.capture_blocked_s + st.device.capture_blocked_s, captures_s)
      << "capture " << st.capture.seconds << " s, device waits " << st.device.capture_blocked_s
      << " s";
}

// One checkpoint of a device region (through the device cache) and a host
// region larger than the host cache: the host blocks take every host chunk
// while the device blocks still wait in the device cache for one. The
// flusher writes the blocks that are ready, in any order, so the host blocks
// go out, their chunks are evicted, and the device blocks drain.
TEST_F(GpuPipelineTest, MixedCheckpointLargerThanTheHostCacheStreamsThrough) {
  config_.host_cache_bytes = 4 * kMiB;  // 4 chunks of 1 MiB
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t kDev = 2 * kMiB + 5, kHost = 6 * kMiB + 7;
  void* dev = DeviceAlloc(kDev);
  std::vector<uint8_t> host = Pattern(kHost, 31);
  Put(dev, Pattern(kDev, 30));
  ASSERT_OK(client->Protect(1, dev, kDev));
  ASSERT_OK(client->Protect(2, host.data(), kHost));
  ASSERT_OK(client->Checkpoint("mixed", 0));
  ASSERT_OK(client->Wait("mixed", 0, Level::kLocal));
  Put(dev, std::vector<uint8_t>(kDev, 0));
  std::fill(host.begin(), host.end(), 0);
  ASSERT_OK(client->Restore("mixed", 0));
  EXPECT_TRUE(SameBytes(Get(dev, kDev), Pattern(kDev, 30)));
  EXPECT_TRUE(SameBytes(host, Pattern(kHost, 31)));
  EXPECT_EQ(client->GetStats().device.drain.bytes, kDev);
  ASSERT_OK(client->Close());
}

// A device checkpoint still draining while host checkpoints larger than the
// host cache follow at once: the flusher writes the device checkpoint first,
// so its drains must find host room; host captures leave them the last chunk.
TEST_F(GpuPipelineTest, HostCapturesLeaveRoomForPendingDrains) {
  config_.host_cache_bytes = 4 * kMiB;  // 4 chunks of 1 MiB
  config_.keep_versions = 10;
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t kDev = 3 * kMiB, kHost = 5 * kMiB;
  void* dev = DeviceAlloc(kDev);
  std::vector<uint8_t> host(kHost);
  for (int v = 0; v < 4; ++v) {
    Put(dev, Pattern(kDev, 40 + v));
    const auto bytes = Pattern(kHost, 50 + v);
    std::copy(bytes.begin(), bytes.end(), host.begin());
    ASSERT_OK(client->Protect(1, dev, kDev));
    ASSERT_OK(client->Checkpoint("dev", v));
    ASSERT_OK(client->Unprotect(1));
    ASSERT_OK(client->Protect(2, host.data(), kHost));
    ASSERT_OK(client->Checkpoint("host", v));
    ASSERT_OK(client->Unprotect(2));
  }
  ASSERT_OK(client->Wait("dev", 3, Level::kLocal));
  ASSERT_OK(client->Wait("host", 3, Level::kLocal));
  ASSERT_OK(client->Protect(1, dev, kDev));
  ASSERT_OK(client->Restore("dev", 2));
  EXPECT_TRUE(SameBytes(Get(dev, kDev), Pattern(kDev, 42)));
  ASSERT_OK(client->Unprotect(1));
  ASSERT_OK(client->Protect(2, host.data(), kHost));
  ASSERT_OK(client->Restore("host", 2));
  EXPECT_TRUE(SameBytes(host, Pattern(kHost, 52)));
  ASSERT_OK(client->Close());
}

// CUDA_ERROR_LAUNCH_FAILED is sticky ("any further CUDA work will return the
// same error", cuda.h): the failed capture is reported with the CUDA error;
// the committed version is untouched but, on this context, can no longer be
// restored into device memory, nor can a new checkpoint be taken. After a
// "relaunch" (the fake's reset), a new client restores it from its file.
TEST_F(GpuPipelineTest, FailedCaptureCopyLeavesCommittedVersionsAlone) {
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t n = 2 * kMiB;
  void* dev = DeviceAlloc(n);
  ASSERT_OK(client->Protect(1, dev, n));
  Put(dev, Pattern(n, 6));
  ASSERT_OK(client->Checkpoint("f", 0));
  ASSERT_OK(client->Wait("f", 0, Level::kLocal));
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:1+:CUDA_ERROR_LAUNCH_FAILED:deferred"), 0);
  Status s = client->Checkpoint("f", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kIo) << s.ToString();
  EXPECT_NE(s.message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("checkpoint of 'f' 1"), std::string::npos) << s.ToString();
  ASSERT_EQ(ctl_.set_fail(""), 0);
  auto latest = client->Latest("f");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 0);
  EXPECT_EQ(client->Wait("f", 1, Level::kLocal).code(), Code::kNotFound);
  // Sticky: device work on this context fails, naming the first error.
  for (const Status& again : {client->Restore("f", 0), client->Checkpoint("f", 1)}) {
    EXPECT_EQ(again.code(), Code::kUnsupported) << again.ToString();
    EXPECT_NE(again.message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << again.ToString();
  }
  EXPECT_EQ(d().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dev), &n, 1), CUDA_ERROR_LAUNCH_FAILED);
  ASSERT_OK(client->Close());

  // The relaunch: a fresh driver state, new device memory, a new client.
  device_.clear();  // gone with the reset
  ResetFake();
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  void* fresh = DeviceAlloc(n);
  auto relaunched = Open();
  ASSERT_TRUE(relaunched);
  ASSERT_OK(relaunched->Protect(1, fresh, n));
  ASSERT_OK(relaunched->Restore("f", 0));
  EXPECT_TRUE(SameBytes(Get(fresh, n), Pattern(n, 6)));
  ASSERT_OK(relaunched->Close());
}

TEST_F(GpuPipelineTest, FailedDrainFailsThatVersionOnly) {
  auto client = Open();
  ASSERT_TRUE(client);
  void* dev = DeviceAlloc(kMiB);
  ASSERT_OK(client->Protect(1, dev, kMiB));
  Put(dev, Pattern(kMiB, 9));
  ASSERT_OK(client->Checkpoint("d", 0));
  ASSERT_OK(client->Wait("d", 0, Level::kLocal));
  // The capture of version 1 is the next cuMemcpyAsync, its drain the one after.
  // CUDA_ERROR_ECC_UNCORRECTABLE: cuda.h documents no stickiness ("an
  // uncorrectable ECC error was detected during execution"), so the context
  // stays usable and the committed version is restored from the device.
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:2:CUDA_ERROR_ECC_UNCORRECTABLE:deferred"), 0);
  Put(dev, Pattern(kMiB, 10));
  ASSERT_OK(client->Checkpoint("d", 1));
  Status s = client->Wait("d", 1, Level::kLocal);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device -> host"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("CUDA_ERROR_ECC_UNCORRECTABLE"), std::string::npos) << s.ToString();
  ASSERT_EQ(ctl_.set_fail(""), 0);
  auto latest = client->Latest("d");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 0);
  Put(dev, std::vector<uint8_t>(kMiB, 0));
  ASSERT_OK(client->Restore("d", 0));
  EXPECT_TRUE(SameBytes(Get(dev, kMiB), Pattern(kMiB, 9)));
  EXPECT_EQ(client->GetStats().failed_flushes, 1u);
  EXPECT_OK(client->Close());  // the failure was reported by Wait
}

// A sticky error met by the background drain (CUDA_ERROR_ILLEGAL_ADDRESS)
// loses the GPU for the client: the version being drained fails with the
// CUDA error (reported once, by Wait); every later device operation fails at
// once with "lost" naming it, without calling the driver; host checkpoints
// and restores work as before; Close does not hang and leaves nothing of
// Cairn's on the device.
TEST_F(GpuPipelineTest, AfterAStickyErrorHostCheckpointsWorkAndDeviceOnesFailFast) {
  config_.pin = true;
  config_.init = CacheInit::kEager;  // the host cache is registered: drains DMA into it
  auto client = Open();
  ASSERT_TRUE(client);
  const size_t kDev = 2 * kMiB, kHost = 3 * kMiB + 11;
  void* dev = DeviceAlloc(kDev);
  std::vector<uint8_t> host = Pattern(kHost, 60);
  Put(dev, Pattern(kDev, 61));
  ASSERT_OK(client->Protect(1, dev, kDev));
  ASSERT_OK(client->Protect(2, host.data(), kHost));
  ASSERT_OK(client->Checkpoint("mix", 0));
  ASSERT_OK(client->Wait("mix", 0, Level::kLocal));
  // Version 1: two device blocks captured (2 cuMemcpyAsync), the first drain fails.
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:3:CUDA_ERROR_ILLEGAL_ADDRESS:deferred"), 0);
  ASSERT_OK(client->Checkpoint("mix", 1));
  Status drained = client->Wait("mix", 1, Level::kLocal);
  EXPECT_EQ(drained.code(), Code::kIo) << drained.ToString();
  EXPECT_NE(drained.message().find("device -> host"), std::string::npos) << drained.ToString();
  EXPECT_NE(drained.message().find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << drained.ToString();
  ASSERT_EQ(ctl_.set_fail(""), 0);

  // Device work: fails fast, naming the first error; the driver is not asked.
  const auto copies = ctl_.call_count("cuMemcpyAsync");
  const auto syncs = ctl_.call_count("cuStreamSynchronize");
  auto expect_lost = [&](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Code::kUnsupported) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("lost"), std::string::npos) << what << ": " << s.ToString();
  };
  expect_lost(client->Checkpoint("mix", 2), "checkpoint with a device region");
  expect_lost(client->Restore("mix", 0), "restore with a device region");
  auto history = client->OpenHistory("h");
  ASSERT_TRUE(history.ok());
  expect_lost((*history)->Push(0, dev, kMiB), "history push of device memory");
  EXPECT_EQ(ctl_.call_count("cuMemcpyAsync"), copies);
  EXPECT_EQ(ctl_.call_count("cuStreamSynchronize"), syncs);
  auto latest = client->Latest("mix");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 0);  // version 1 failed, version 2 never existed

  // Host work goes on: checkpoints, restores, history steps of host memory.
  ASSERT_OK(client->Unprotect(1));
  for (int v = 3; v < 5; ++v) {
    const auto bytes = Pattern(kHost, 70 + v);
    std::copy(bytes.begin(), bytes.end(), host.begin());
    ASSERT_OK(client->Checkpoint("mix", v));
  }
  ASSERT_OK(client->Wait("mix", 4, Level::kLocal));
  std::fill(host.begin(), host.end(), 0);
  ASSERT_OK(client->Restore("mix", 3));
  EXPECT_TRUE(SameBytes(host, Pattern(kHost, 73)));
  const auto step = Pattern(kMiB, 80);
  ASSERT_OK((*history)->Push(0, step.data(), step.size()));
  std::vector<uint8_t> popped(kMiB);
  auto got = (*history)->Pop(0, popped.data(), popped.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameBytes(popped, step));
  // Protecting device memory again: refused, naming the error.
  expect_lost(client->Protect(1, dev, kDev), "protect device memory");

  history->reset();
  ASSERT_OK(client->Close());  // does not hang; version 1's failure was reported by Wait
  EXPECT_EQ(ctl_.live("streams"), 0u);
  EXPECT_EQ(ctl_.live("host_allocs"), 0u);
  EXPECT_EQ(ctl_.live("registrations"), 0u);
  EXPECT_EQ(ctl_.live("mappings"), 0u);
  EXPECT_EQ(ctl_.live("handles"), 0u);
  EXPECT_EQ(ctl_.live("reservations"), 0u);
}

TEST_F(GpuPipelineTest, OutOfMemoryWhileMappingKeepsASmallerCache) {
  ASSERT_EQ(ctl_.set_fail("cuMemCreate:3"), 0);
  auto client = Open();
  ASSERT_TRUE(client);
  ASSERT_TRUE(PollUntil([&] { return client->GetStats().device.fully_mapped_s >= 0; }));
  const Stats st = client->GetStats();
  EXPECT_EQ(st.device.mapped_bytes, 4 * kMiB);  // two 2 MiB chunks
  EXPECT_NE(st.device.map_error.find("cuMemCreate"), std::string::npos) << st.device.map_error;
  void* dev = DeviceAlloc(6 * kMiB);
  Put(dev, Pattern(6 * kMiB, 11));
  ASSERT_OK(client->Protect(1, dev, 6 * kMiB));
  ASSERT_OK(client->Checkpoint("oom", 0));
  ASSERT_OK(client->Wait("oom", 0, Level::kLocal));
  Put(dev, std::vector<uint8_t>(6 * kMiB, 0));
  ASSERT_OK(client->Restore("oom", 0));
  EXPECT_TRUE(SameBytes(Get(dev, 6 * kMiB), Pattern(6 * kMiB, 11)));
}

TEST_F(GpuPipelineTest, RegisteredHostCacheIsDrainedWithoutBounceBuffers) {
  config_.pin = true;
  config_.init = CacheInit::kEager;  // registered at open
  auto client = Open();
  ASSERT_TRUE(client);
  Stats st = client->GetStats();
  EXPECT_GE(st.init.pinned_s, 0) << st.init.pin_error;
  EXPECT_EQ(ctl_.live("registrations"), 1u);
  void* dev = DeviceAlloc(2 * kMiB);
  Put(dev, Pattern(2 * kMiB, 12));
  ASSERT_OK(client->Protect(1, dev, 2 * kMiB));
  ASSERT_OK(client->Checkpoint("reg", 0));
  ASSERT_OK(client->Wait("reg", 0, Level::kLocal));
  st = client->GetStats();
  EXPECT_EQ(st.device.drain.bytes, 2 * kMiB);
  EXPECT_EQ(st.device.bounce_bytes, 0u);
  ASSERT_OK(client->Close());
  EXPECT_EQ(ctl_.live("registrations"), 0u);
}

TEST_F(GpuPipelineTest, RegistrationFailureFallsBackToBounceBuffers) {
  config_.pin = true;
  config_.init = CacheInit::kEager;
  ASSERT_EQ(ctl_.set_fail("cuMemHostRegister:1:CUDA_ERROR_NOT_PERMITTED"), 0);
  auto client = Open();
  ASSERT_TRUE(client);
  Stats st = client->GetStats();
  EXPECT_LT(st.init.pinned_s, 0);
  EXPECT_NE(st.init.pin_error.find("CUDA_ERROR_NOT_PERMITTED"), std::string::npos) << st.init.pin_error;
  void* dev = DeviceAlloc(2 * kMiB);
  Put(dev, Pattern(2 * kMiB, 13));
  ASSERT_OK(client->Protect(1, dev, 2 * kMiB));
  ASSERT_OK(client->Checkpoint("bounce", 0));
  ASSERT_OK(client->Wait("bounce", 0, Level::kLocal));
  st = client->GetStats();
  EXPECT_EQ(st.device.bounce_bytes, 2 * kMiB);
  Put(dev, std::vector<uint8_t>(2 * kMiB, 0));
  ASSERT_OK(client->Restore("bounce", 0));
  EXPECT_TRUE(SameBytes(Get(dev, 2 * kMiB), Pattern(2 * kMiB, 13)));
  ASSERT_OK(client->Close());
  EXPECT_EQ(ctl_.live("registrations"), 0u);
}

// HiPC'22 "large device": every step fits in the device cache, so the
// backward pass is served device -> device.
TEST_F(GpuPipelineTest, HistoryThatFitsTheDeviceCacheIsPoppedFromTheDevice) {
  auto client = Open();
  ASSERT_TRUE(client);
  auto history = client->OpenHistory("fwd");
  ASSERT_TRUE(history.ok());
  void* dev = DeviceAlloc(kMiB);
  for (int s = 0; s < 6; ++s) {
    Put(dev, Pattern(kMiB, 200 + s));
    ASSERT_OK((*history)->Push(s, dev, kMiB));
  }
  for (int s = 5; s >= 0; --s) {
    auto n = (*history)->Pop(s, dev, kMiB);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_TRUE(SameBytes(Get(dev, kMiB), Pattern(kMiB, 200 + s))) << "step " << s;
  }
  const Stats st = client->GetStats();
  EXPECT_EQ(st.device.hits, 6u);
  EXPECT_EQ(st.cache_hits, 6u);
}

// HiPC'22 "large host": the steps overflow the device cache but fit the host
// cache; pops prefetch host -> device ahead, highest step first.
TEST_F(GpuPipelineTest, HistoryLargerThanTheDeviceCacheIsPrefetchedBackToTheDevice) {
  config_.device_cache_bytes = 4 * kMiB;
  config_.host_cache_bytes = 32 * kMiB;
  auto client = Open();
  ASSERT_TRUE(client);
  auto history = client->OpenHistory("fwd");
  ASSERT_TRUE(history.ok());
  constexpr int kSteps = 16;
  void* dev = DeviceAlloc(kMiB);
  for (int s = 0; s < kSteps; ++s) {
    Put(dev, Pattern(kMiB, 300 + s));
    ASSERT_OK((*history)->Push(s, dev, kMiB));
  }
  for (int s = kSteps - 1; s >= 0; --s) {
    auto n = (*history)->Pop(s, dev, kMiB);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_TRUE(SameBytes(Get(dev, kMiB), Pattern(kMiB, 300 + s))) << "step " << s;
    if (s == kSteps - 4) {
      // Four pops freed the slots of the newest steps: the device mover now
      // loads the next steps down into them. A gate, not a race with the
      // pops: however slow the mover, the remaining pops wait for it here.
      EXPECT_TRUE(PollUntil([&] { return client->GetStats().device.prefetch.bytes > 0; },
                            std::chrono::seconds(60)))
          << "no step was prefetched host -> device after " << kSteps - s << " pops";
    }
  }
  const Stats st = client->GetStats();
  EXPECT_EQ(st.cache_hits, static_cast<uint64_t>(kSteps));
  EXPECT_GT(st.device.prefetch.bytes, 0u);
  EXPECT_GT(st.device.evictions, 0u);
}

// Persistence of a device checkpoint larger than the host cache: its first
// blocks are written locally and held for the persister, which waits for the
// later ones; those must be drained into host chunks first. The drain takes
// the held room back (the persister, stuck at its file's open here, then
// gives the version up and the mover copies the local file) instead of
// waiting for a persister that waits for it.
TEST_F(GpuPipelineTest, ADrainTakesTheRoomHeldForThePersister) {
  GateFs fs("/persistent/");
  config_.fs = &fs;
  config_.persistent_dir = dir_->path() + "/persistent";
  config_.host_cache_bytes = 4 * kMiB;  // four chunks
  config_.device_cache_bytes = 8 * kMiB;
  auto client = Open();
  ASSERT_TRUE(client);
  GateRelease release{&fs};
  constexpr size_t kBytes = 6 * kMiB;  // more blocks than the host cache has chunks
  void* dev = DeviceAlloc(kBytes);
  Put(dev, Pattern(kBytes, 77));
  ASSERT_OK(client->Protect(1, dev, kBytes));
  ASSERT_OK(client->Checkpoint("big", 1));
  ASSERT_OK(client->Wait("big", 1, Level::kLocal));
  EXPECT_GE(client->GetStats().persist_holds_released, 1u);
  fs.Release();
  ASSERT_OK(client->Wait("big", 1, Level::kPersistent));
  EXPECT_GE(client->GetStats().persist_file_copies, 1u);
  ASSERT_OK(client->Close());
  client.reset();

  // The persistent copy alone restores it.
  std::filesystem::remove_all(config_.scratch_dir);
  config_.fs = nullptr;
  auto again = Open();
  ASSERT_TRUE(again);
  ASSERT_OK(again->Protect(1, dev, kBytes));
  Put(dev, std::vector<uint8_t>(kBytes, 0));
  ASSERT_OK(again->Restore("big", 1));
  EXPECT_TRUE(SameBytes(Get(dev, kBytes), Pattern(kBytes, 77)));
}

TEST_F(GpuPipelineTest, DirectDeviceCacheAllocatesAtOpen) {
  config_.device_cache_init = DeviceCacheInit::kDirect;
  auto client = Open();
  ASSERT_TRUE(client);
  Stats st = client->GetStats();
  EXPECT_EQ(st.device.mapped_bytes, st.device.capacity_bytes);
  EXPECT_EQ(ctl_.call_count("cuMemCreate"), 0u);
  void* dev = DeviceAlloc(kMiB);
  Put(dev, Pattern(kMiB, 14));
  ASSERT_OK(client->Protect(1, dev, kMiB));
  ASSERT_OK(client->Checkpoint("direct", 0));
  Put(dev, std::vector<uint8_t>(kMiB, 0));
  ASSERT_OK(client->Restore("direct", 0));
  EXPECT_TRUE(SameBytes(Get(dev, kMiB), Pattern(kMiB, 14)));
}

TEST_F(GpuPipelineTest, DirectDeviceCacheTooLargeOpensWithoutIt) {
  config_.device_cache_init = DeviceCacheInit::kDirect;
  config_.device_cache_bytes = 64 * kMiB;
  ASSERT_EQ(ctl_.set_device_memory(32 * kMiB), 0);
  auto client = Open();
  ASSERT_TRUE(client);
  const Stats st = client->GetStats();
  EXPECT_EQ(st.device.capacity_bytes, 0u);
  EXPECT_NE(st.device.map_error.find("OUT_OF_MEMORY"), std::string::npos) << st.device.map_error;
  void* dev = DeviceAlloc(kMiB);
  Put(dev, Pattern(kMiB, 15));
  ASSERT_OK(client->Protect(1, dev, kMiB));
  ASSERT_OK(client->Checkpoint("nocache", 0));
  Put(dev, std::vector<uint8_t>(kMiB, 0));
  ASSERT_OK(client->Restore("nocache", 0));
  EXPECT_TRUE(SameBytes(Get(dev, kMiB), Pattern(kMiB, 15)));
}

TEST_F(GpuPipelineTest, RegionStraddlingTwoAllocationsIsRejected) {
  auto client = Open();
  ASSERT_TRUE(client);
  void* dev = DeviceAlloc(kMiB);
  Status s = client->Protect(1, dev, 2 * kMiB);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("protect region 1"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace cairn

#endif  // CAIRN_TEST_FAKE_CUDA
