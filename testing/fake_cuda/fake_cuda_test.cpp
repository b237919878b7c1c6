// The fake CUDA driver against the behaviour the CUDA driver API reference
// documents (quotes in docs/gpu.md): initialization, contexts, memory, the
// synchronous/asynchronous behaviour of copies, stream ordering, events, host
// registration, virtual memory management, pointer attributes, error strings,
// and the fault and latency injection.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "testing/fake_cuda/fake_cuda_fixture.hpp"

#if CAIRN_TEST_FAKE_CUDA

namespace cairn::test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class FakeCuda : public FakeCudaTest {
 protected:
  CUdeviceptr Alloc(size_t n) {
    CUdeviceptr p = 0;
    EXPECT_EQ(d().cuMemAlloc(&p, n), CUDA_SUCCESS);
    return p;
  }
  std::vector<unsigned char> ReadBack(CUdeviceptr p, size_t n) {
    std::vector<unsigned char> out(n, 0xEE);
    EXPECT_EQ(d().cuMemcpyDtoH(out.data(), p, n), CUDA_SUCCESS);
    return out;
  }
  static CUmemAllocationProp DeviceProp(int device = 0) {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }
  size_t Granularity() {
    CUmemAllocationProp prop = DeviceProp();
    size_t g = 0;
    EXPECT_EQ(d().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              CUDA_SUCCESS);
    return g;
  }
  static CUmemAccessDesc Access(unsigned long long flags, int device = 0) {
    CUmemAccessDesc a = {};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = device;
    a.flags = static_cast<CUmemAccess_flags>(flags);
    return a;
  }
};

// A fixture whose tests start without a retained context.
class FakeCudaNoContext : public FakeCuda {
 protected:
  FakeCudaNoContext() { retain_context_ = false; }
};

// --- Initialization, devices, contexts ---------------------------------------

TEST_F(FakeCudaNoContext, EverythingButVersionAndErrorsNeedsCuInit) {
  ctl_.reset();  // back to before cuInit
  int n = -1;
  EXPECT_EQ(d().cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  EXPECT_EQ(d().cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, CUDA_VERSION);
  const char* name = nullptr;
  EXPECT_EQ(d().cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name), CUDA_SUCCESS);
  EXPECT_STREQ(name, "CUDA_ERROR_NOT_INITIALIZED");
  // "Currently, the Flags parameter must be 0."
  EXPECT_EQ(d().cuInit(1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuInit(0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuDeviceGetCount(&n), CUDA_SUCCESS);
  EXPECT_EQ(n, 1);
}

TEST_F(FakeCudaNoContext, DeviceCountFromTheEnvironment) {
  {
    ScopedEnv env("CAIRN_FAKE_CUDA_DEVICES", "3");
    ctl_.reset();
  }
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  int n = 0;
  ASSERT_EQ(d().cuDeviceGetCount(&n), CUDA_SUCCESS);
  EXPECT_EQ(n, 3);
  CUdevice dev = -1;
  EXPECT_EQ(d().cuDeviceGet(&dev, 2), CUDA_SUCCESS);
  EXPECT_EQ(dev, 2);
  EXPECT_EQ(d().cuDeviceGet(&dev, 3), CUDA_ERROR_INVALID_DEVICE);
  char name[64] = {};
  EXPECT_EQ(d().cuDeviceGetName(name, sizeof name, 2), CUDA_SUCCESS);
  EXPECT_NE(std::string(name).find("2"), std::string::npos);
  int vmm = 0, uva = 0;
  EXPECT_EQ(d().cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1),
            CUDA_SUCCESS);
  EXPECT_EQ(vmm, 1);
  EXPECT_EQ(d().cuDeviceGetAttribute(&uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0), CUDA_SUCCESS);
  EXPECT_EQ(uva, 1);
  EXPECT_EQ(d().cuDeviceGetAttribute(&uva, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaNoContext, ZeroDevices) {
  {
    ScopedEnv env("CAIRN_FAKE_CUDA_DEVICES", "0");
    ctl_.reset();
  }
  // "If there is no such device, cuDeviceGetCount() returns 0."
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  int n = -1;
  ASSERT_EQ(d().cuDeviceGetCount(&n), CUDA_SUCCESS);
  EXPECT_EQ(n, 0);
  CUdevice dev = 0;
  EXPECT_EQ(d().cuDeviceGet(&dev, 0), CUDA_ERROR_INVALID_DEVICE);
  CUcontext c = nullptr;
  EXPECT_EQ(d().cuDevicePrimaryCtxRetain(&c, 0), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeCudaNoContext, BadEnvironmentFailsCuInit) {
  {
    ScopedEnv env("CAIRN_FAKE_CUDA_MEM", "lots");
    ctl_.reset();
  }
  EXPECT_EQ(d().cuInit(0), CUDA_ERROR_INVALID_VALUE);
  ctl_.reset();
  EXPECT_EQ(d().cuInit(0), CUDA_SUCCESS);
}

// CAIRN_FAKE_CUDA_POPULATE=1 backs device memory at allocation; it changes
// no result: allocations, copies and the out-of-memory check (made before
// anything is mapped) behave as without it.
TEST_F(FakeCudaNoContext, PopulatedDeviceMemory) {
  {
    ScopedEnv bad("CAIRN_FAKE_CUDA_POPULATE", "yes");
    ctl_.reset();
  }
  EXPECT_EQ(d().cuInit(0), CUDA_ERROR_INVALID_VALUE);
  {
    ScopedEnv populate("CAIRN_FAKE_CUDA_POPULATE", "1");
    ScopedEnv mem("CAIRN_FAKE_CUDA_MEM", "64MiB");
    ctl_.reset();
  }
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 1ull << 30), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(d().cuMemAlloc(&p, 4 << 20), CUDA_SUCCESS);
  std::vector<char> in(4 << 20, 'q'), out(in.size());
  ASSERT_EQ(d().cuMemcpyHtoD(p, in.data(), in.size()), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyDtoH(out.data(), p, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(d().cuMemCreate(&h, 128ull << 20, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(d().cuMemCreate(&h, 2 << 20, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(d().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  ctl_.reset();  // the environment without the knobs again
}

TEST_F(FakeCudaNoContext, CallsNeedACurrentContext) {
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  CUstream s = nullptr;
  EXPECT_EQ(d().cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
  char buf[16] = {};
  EXPECT_EQ(d().cuMemcpyHtoD(0x1000, buf, sizeof buf), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(d().cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext cur = reinterpret_cast<CUcontext>(0x1);
  EXPECT_EQ(d().cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, nullptr);
  EXPECT_EQ(d().cuCtxSetCurrent(reinterpret_cast<CUcontext>(0x1234)), CUDA_ERROR_INVALID_CONTEXT);
  // "Releasing a primary context that has not been previously retained will
  // fail with CUDA_ERROR_INVALID_CONTEXT."
  EXPECT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(d().cuDevicePrimaryCtxRelease(7), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeCudaNoContext, PrimaryContextIsResetByTheLastRelease) {
  CUcontext a = nullptr, b = nullptr;
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&a, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);
  EXPECT_EQ(a, b);  // one primary context per device
  ASSERT_EQ(d().cuCtxSetCurrent(a), CUDA_SUCCESS);
  CUdevice dev = -1;
  EXPECT_EQ(d().cuCtxGetDevice(&dev), CUDA_SUCCESS);
  EXPECT_EQ(dev, 0);
  CUdeviceptr p = 0;
  ASSERT_EQ(d().cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  CUstream s = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("device_allocs"), 1u);  // still retained once
  ASSERT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  // Reset: the allocation and the stream are gone, the bound context is dead.
  EXPECT_EQ(ctl_.live("device_allocs"), 0u);
  EXPECT_EQ(ctl_.live("streams"), 0u);
  EXPECT_EQ(d().cuMemAlloc(&p, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(d().cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  // Retaining again revives it.
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&a, 0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemAlloc(&p, 16), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
  ASSERT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(FakeCuda, CurrentContextIsPerThread) {
  CUcontext seen = reinterpret_cast<CUcontext>(0x1);
  CUresult alloc = CUDA_SUCCESS;
  std::thread t([&] {
    d().cuCtxGetCurrent(&seen);
    CUdeviceptr p = 0;
    alloc = d().cuMemAlloc(&p, 16);
  });
  t.join();
  EXPECT_EQ(seen, nullptr);
  EXPECT_EQ(alloc, CUDA_ERROR_INVALID_CONTEXT);
  CUcontext mine = nullptr;
  EXPECT_EQ(d().cuCtxGetCurrent(&mine), CUDA_SUCCESS);
  EXPECT_EQ(mine, ctx_);
}

// --- Device memory -------------------------------------------------------------

TEST_F(FakeCuda, AllocFreeAndInfo) {
  CUdeviceptr p = 0;
  // "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE."
  EXPECT_EQ(d().cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
  size_t free0 = 0, total = 0;
  ASSERT_EQ(d().cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  EXPECT_EQ(free0, total);
  p = Alloc(3 * kMiB);
  size_t free1 = 0;
  ASSERT_EQ(d().cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free0 - free1, 3 * kMiB);
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_EQ(d().cuMemGetAddressRange(&base, &size, p + 12345), CUDA_SUCCESS);
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 3 * kMiB);
  EXPECT_EQ(d().cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE);  // not the base
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(p), CUDA_ERROR_INVALID_VALUE);  // twice
  EXPECT_EQ(ctl_.live("device_bytes"), 0u);
}

TEST_F(FakeCuda, OutOfMemoryIsNotSticky) {
  ASSERT_EQ(ctl_.set_device_memory(8 * kMiB), 0);
  size_t free = 0, total = 0;
  ASSERT_EQ(d().cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, 8 * kMiB);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 9 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(d().cuMemAlloc(&p, 6 * kMiB), CUDA_SUCCESS);
  CUdeviceptr q = 0;
  EXPECT_EQ(d().cuMemAlloc(&q, 3 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(d().cuMemAlloc(&q, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.set_device_memory(1 * kMiB), -1);  // below what is in use
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(q), CUDA_SUCCESS);
}

TEST_F(FakeCuda, DeviceMemoryIsNotHostAccessible) {
  CUdeviceptr p = Alloc(4096);
  // The kernel reads the buffer of write(2): EFAULT instead of a crash shows
  // that the device address is not mapped for the host.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  errno = 0;
  EXPECT_EQ(write(fds[1], reinterpret_cast<const void*>(p), 16), -1);
  EXPECT_EQ(errno, EFAULT);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(FakeCuda, CopiesRoundTripAndValidatePointers) {
  constexpr size_t n = 64 * 1024;
  CUdeviceptr a = Alloc(n), b = Alloc(n);
  std::vector<unsigned char> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  ASSERT_EQ(d().cuMemcpyHtoD(a, src.data(), n), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyDtoD(b, a, n), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(b, n), src);
  // cuMemcpy infers the direction from the (unified) addresses.
  std::vector<unsigned char> back(n);
  ASSERT_EQ(d().cuMemcpy(reinterpret_cast<CUdeviceptr>(back.data()), b, n), CUDA_SUCCESS);
  EXPECT_EQ(back, src);

  // Past the end of the allocation, into nothing, wrong directions.
  EXPECT_EQ(d().cuMemcpyHtoD(a + 1, src.data(), n), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemcpyDtoH(back.data(), a + n, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(back.data()), src.data(), 16),
            CUDA_ERROR_INVALID_VALUE);  // host memory is no device destination
  EXPECT_EQ(d().cuMemcpyDtoH(back.data(), reinterpret_cast<CUdeviceptr>(src.data()), 16),
            CUDA_ERROR_INVALID_VALUE);  // host memory is no device source
  EXPECT_EQ(d().cuMemcpyHtoD(a, reinterpret_cast<const void*>(b), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemcpyDtoD(a, reinterpret_cast<CUdeviceptr>(src.data()), 16),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemcpyHtoD(0, src.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemcpyHtoD(a, src.data(), 0), CUDA_SUCCESS);  // nothing to do
  // Errors are not sticky.
  EXPECT_EQ(ReadBack(a, n), src);
  EXPECT_EQ(d().cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemcpyDtoH(back.data(), a, 16), CUDA_ERROR_INVALID_VALUE);  // freed
  EXPECT_EQ(d().cuMemFree(b), CUDA_SUCCESS);
}

TEST_F(FakeCuda, Memset) {
  CUdeviceptr p = Alloc(4096);
  ASSERT_EQ(d().cuMemsetD8(p, 0x5A, 4096), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(p, 4096), std::vector<unsigned char>(4096, 0x5A));
  ASSERT_EQ(d().cuMemsetD8Async(p + 100, 0x11, 10, nullptr), CUDA_SUCCESS);
  auto v = ReadBack(p, 4096);  // the legacy stream orders it after the memset
  EXPECT_EQ(v[99], 0x5A);
  EXPECT_EQ(v[100], 0x11);
  EXPECT_EQ(v[110], 0x5A);
  std::vector<unsigned char> pageable(16);
  EXPECT_EQ(d().cuMemsetD8(reinterpret_cast<CUdeviceptr>(pageable.data()), 1, 16),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(FakeCuda, ManagedMemoryIsHostAccessible) {
  CUdeviceptr m = 0;
  EXPECT_EQ(d().cuMemAllocManaged(&m, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemAllocManaged(&m, 64, 0), CUDA_ERROR_INVALID_VALUE);  // flags
  ASSERT_EQ(d().cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  auto* host = reinterpret_cast<unsigned char*>(m);
  std::memset(host, 0x42, 4096);
  CUdeviceptr dev = Alloc(4096);
  ASSERT_EQ(d().cuMemcpyDtoD(dev, m, 4096), CUDA_SUCCESS);  // synchronous: managed
  EXPECT_EQ(ReadBack(dev, 4096), std::vector<unsigned char>(4096, 0x42));
  ASSERT_EQ(d().cuMemsetD8(m, 0x24, 4096), CUDA_SUCCESS);  // synchronous on managed memory
  EXPECT_EQ(host[4095], 0x24);
  EXPECT_EQ(d().cuMemFree(dev), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(m), CUDA_SUCCESS);
}

// --- Synchronous and asynchronous behaviour ------------------------------------

TEST_F(FakeCuda, SyncDeviceToDeviceCopyDoesNotWaitForTheDevice) {
  CUdeviceptr a = Alloc(4096), b = Alloc(4096);
  ASSERT_EQ(d().cuMemsetD8(a, 9, 4096), CUDA_SUCCESS);
  ctl_.pause_streams(1);
  // "For transfers from device memory to device memory, no host-side
  // synchronization is performed."
  ASSERT_EQ(d().cuMemcpyDtoD(b, a, 4096), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);
  ctl_.pause_streams(0);
  ASSERT_EQ(d().cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamQuery(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(b, 4096), std::vector<unsigned char>(4096, 9));
  d().cuMemFree(a);
  d().cuMemFree(b);
}

TEST_F(FakeCuda, AsyncCopyFromPinnedMemoryIsAsynchronous) {
  std::vector<unsigned char> host(8192, 3);
  ASSERT_EQ(d().cuMemHostRegister(host.data(), host.size(), 0), CUDA_SUCCESS);
  CUdeviceptr p = Alloc(host.size());
  CUstream s = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ctl_.pause_streams(1);
  ASSERT_EQ(d().cuMemcpyHtoDAsync(p, host.data(), host.size(), s), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  CUevent e = nullptr;
  ASSERT_EQ(d().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(d().cuEventRecord(e, s), CUDA_SUCCESS);
  EXPECT_EQ(d().cuEventQuery(e), CUDA_ERROR_NOT_READY);
  ctl_.pause_streams(0);
  ASSERT_EQ(d().cuEventSynchronize(e), CUDA_SUCCESS);
  EXPECT_EQ(d().cuEventQuery(e), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamQuery(s), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(p, host.size()), host);
  EXPECT_EQ(d().cuEventDestroy(e), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemHostUnregister(host.data()), CUDA_SUCCESS);
  d().cuMemFree(p);
}

TEST_F(FakeCuda, AsyncCopyFromPageableMemoryIsStaged) {
  // The copy is slow (1 MiB at 0.01 GB/s: ~100 ms) and the source is
  // overwritten as soon as the call returns: the device still gets the old
  // bytes, because a pageable source is staged before the call returns.
  std::vector<unsigned char> host(kMiB, 0x77);
  CUdeviceptr p = Alloc(kMiB);
  CUstream s = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0.01), 0);
  ASSERT_EQ(d().cuMemcpyHtoDAsync(p, host.data(), kMiB, s), CUDA_SUCCESS);
  std::memset(host.data(), 0, kMiB);
  ASSERT_EQ(d().cuStreamSynchronize(s), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0), 0);
  EXPECT_EQ(ReadBack(p, kMiB), std::vector<unsigned char>(kMiB, 0x77));
  d().cuStreamDestroy(s);
  d().cuMemFree(p);
}

TEST_F(FakeCuda, AsyncCopyToPageableMemoryIsSynchronous) {
  CUdeviceptr p = Alloc(4096);
  ASSERT_EQ(d().cuMemsetD8(p, 0x33, 4096), CUDA_SUCCESS);
  CUstream s = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s, 0), CUDA_SUCCESS);
  std::vector<unsigned char> host(4096, 0);
  ASSERT_EQ(d().cuMemcpyDtoHAsync(host.data(), p, host.size(), s), CUDA_SUCCESS);
  // No synchronization: the data is there when the call returns.
  EXPECT_EQ(host, std::vector<unsigned char>(4096, 0x33));
  d().cuStreamDestroy(s);
  d().cuMemFree(p);
}

TEST_F(FakeCuda, StreamRunsInOrder) {
  constexpr size_t n = 256 * 1024;
  void* pinned_in = nullptr;
  void* pinned_out = nullptr;
  ASSERT_EQ(d().cuMemAllocHost(&pinned_in, n), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAllocHost(&pinned_out, n), CUDA_SUCCESS);
  auto* in = static_cast<unsigned char*>(pinned_in);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<unsigned char>(i % 251);
  CUdeviceptr a = Alloc(n), b = Alloc(n);
  CUstream s = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0.05), 0);  // ~5 ms per copy
  ASSERT_EQ(d().cuMemcpyHtoDAsync(a, pinned_in, n, s), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyDtoDAsync(b, a, n, s), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyDtoHAsync(pinned_out, b, n, s), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamSynchronize(s), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0), 0);
  EXPECT_EQ(std::memcmp(pinned_in, pinned_out, n), 0);
  // More operations than the queue holds (1024): Push blocks, order holds.
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(d().cuMemsetD8Async(a, static_cast<unsigned char>(i), 64, s), CUDA_SUCCESS);
  }
  ASSERT_EQ(d().cuMemcpyDtoHAsync(pinned_out, a, 64, s), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char*>(pinned_out)[63], static_cast<unsigned char>(2999));
  d().cuStreamDestroy(s);
  d().cuMemFree(a);
  d().cuMemFree(b);
  d().cuMemFreeHost(pinned_in);
  d().cuMemFreeHost(pinned_out);
}

TEST_F(FakeCuda, LegacyStreamWaitsForBlockingStreams) {
  CUdeviceptr p = Alloc(kMiB);
  CUstream blocking = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0.005), 0);  // the memset takes ~200 ms
  ASSERT_EQ(d().cuMemsetD8Async(p, 0x66, kMiB, blocking), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0), 0);
  // A synchronous copy runs on the legacy stream, which waits for the
  // blocking stream's earlier work.
  std::vector<unsigned char> host(16);
  ASSERT_EQ(d().cuMemcpyDtoH(host.data(), p + kMiB - 16, 16), CUDA_SUCCESS);
  EXPECT_EQ(host, std::vector<unsigned char>(16, 0x66));
  d().cuStreamDestroy(blocking);
  d().cuMemFree(p);
}

TEST_F(FakeCuda, NonBlockingStreamDoesNotWaitForTheLegacyStream) {
  CUdeviceptr p = Alloc(kMiB), q = Alloc(4096);
  CUstream nb = nullptr, blocking = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0.002), 0);  // the legacy memset: ~500 ms
  ASSERT_EQ(d().cuMemsetD8Async(p, 1, kMiB, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0), 0);
  ASSERT_EQ(d().cuMemsetD8Async(q, 2, 64, nb), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamSynchronize(nb), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);  // still running
  // A blocking stream's work waits for the legacy stream's earlier work.
  ASSERT_EQ(d().cuMemsetD8Async(q, 3, 64, blocking), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamSynchronize(blocking), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamQuery(nullptr), CUDA_SUCCESS);
  d().cuStreamDestroy(nb);
  d().cuStreamDestroy(blocking);
  d().cuMemFree(p);
  d().cuMemFree(q);
}

TEST_F(FakeCuda, StreamWaitEventOrdersAcrossStreams) {
  CUdeviceptr p = Alloc(kMiB);
  void* out = nullptr;
  ASSERT_EQ(d().cuMemAllocHost(&out, 16), CUDA_SUCCESS);
  CUstream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent e = nullptr;
  ASSERT_EQ(d().cuEventCreate(&e, 0), CUDA_SUCCESS);
  // "Before the first call to cuEventRecord(), an event represents an empty
  // set of work": querying or waiting on it succeeds at once.
  EXPECT_EQ(d().cuEventQuery(e), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0.005), 0);  // ~200 ms
  ASSERT_EQ(d().cuMemsetD8Async(p, 0x44, kMiB, s1), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0), 0);
  ASSERT_EQ(d().cuEventRecord(e, s1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyDtoHAsync(out, p + kMiB - 16, 16, s2), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamSynchronize(s2), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char*>(out)[15], 0x44);
  EXPECT_EQ(d().cuStreamWaitEvent(s2, e, 5), CUDA_ERROR_INVALID_VALUE);  // flags
  EXPECT_EQ(d().cuEventDestroy(e), CUDA_SUCCESS);
  EXPECT_EQ(d().cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(d().cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  d().cuStreamDestroy(s1);
  d().cuStreamDestroy(s2);
  d().cuMemFreeHost(out);
  d().cuMemFree(p);
}

TEST_F(FakeCuda, StreamHandles) {
  CUstream s = nullptr;
  EXPECT_EQ(d().cuStreamCreate(&s, 0x80), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(d().cuStreamCreate(&s, 0), CUDA_SUCCESS);
  CUdeviceptr p = Alloc(kMiB);
  ASSERT_EQ(ctl_.set_gbps("copy", 0.01), 0);
  ASSERT_EQ(d().cuMemsetD8Async(p, 5, kMiB, s), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("copy", 0), 0);
  // "In case the device is still doing work in the stream hStream when
  // cuStreamDestroy() is called, the function will return immediately and the
  // resources ... will be released automatically once the device has
  // completed all work in hStream."
  const auto t0 = Clock::now();
  ASSERT_EQ(d().cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_LT(SecondsSince(t0), 0.05);
  EXPECT_EQ(d().cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(d().cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(d().cuStreamDestroy(nullptr), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(d().cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(p + kMiB - 8, 8), std::vector<unsigned char>(8, 5));
  CUstream bogus = reinterpret_cast<CUstream>(0x5000);
  EXPECT_EQ(d().cuMemsetD8Async(p, 1, 1, bogus), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(d().cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
  d().cuMemFree(p);
}

// CUDA_ERROR_ECC_UNCORRECTABLE: cuda.h documents no stickiness for it, so it
// is an asynchronous error like any other: reported by the stream that ran
// the operation (or cuCtxSynchronize), once.
TEST_F(FakeCuda, DeferredFaultSurfacesAtSynchronizationOnce) {
  CUdeviceptr p = Alloc(4096);
  void* out = nullptr;
  ASSERT_EQ(d().cuMemAllocHost(&out, 4096), CUDA_SUCCESS);
  CUstream s = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_fail("cuMemcpyDtoHAsync:1:CUDA_ERROR_ECC_UNCORRECTABLE:deferred"), 0);
  ASSERT_EQ(d().cuMemcpyDtoHAsync(out, p, 4096, s), CUDA_SUCCESS);  // enqueued fine
  EXPECT_EQ(d().cuStreamSynchronize(s), CUDA_ERROR_ECC_UNCORRECTABLE);
  EXPECT_EQ(d().cuStreamSynchronize(s), CUDA_SUCCESS);  // reported once
  ASSERT_EQ(d().cuMemcpyDtoHAsync(out, p, 4096, s), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamDestroy(s), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFreeHost(out), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
}

// A non-sticky asynchronous error belongs to the stream that ran the failed
// operation: other streams' syncs do not see it; events recorded after it
// see it without clearing it; cuCtxSynchronize reports and clears it.
TEST_F(FakeCuda, NonStickyAsyncErrorIsReportedByItsStreamAndTheContextSync) {
  CUdeviceptr a = Alloc(4096), b = Alloc(4096);
  CUstream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent e = nullptr;
  ASSERT_EQ(d().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_fail("cuMemcpyDtoDAsync:1:CUDA_ERROR_ECC_UNCORRECTABLE:deferred"), 0);
  ASSERT_EQ(d().cuMemcpyDtoDAsync(b, a, 4096, s1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuEventRecord(e, s1), CUDA_SUCCESS);
  EXPECT_EQ(d().cuEventSynchronize(e), CUDA_ERROR_ECC_UNCORRECTABLE);  // the copy ran
  EXPECT_EQ(d().cuEventQuery(e), CUDA_ERROR_ECC_UNCORRECTABLE);        // not cleared
  EXPECT_EQ(d().cuStreamSynchronize(s2), CUDA_SUCCESS);                // another stream
  EXPECT_EQ(d().cuStreamQuery(s2), CUDA_SUCCESS);
  CUdeviceptr c = Alloc(4096);  // not CUDA work that waits for s1
  EXPECT_EQ(d().cuCtxSynchronize(), CUDA_ERROR_ECC_UNCORRECTABLE);
  EXPECT_EQ(d().cuStreamSynchronize(s1), CUDA_SUCCESS);  // cleared by cuCtxSynchronize
  EXPECT_EQ(d().cuCtxSynchronize(), CUDA_SUCCESS);
  // The context works on.
  ASSERT_EQ(d().cuMemsetD8Async(c, 3, 4096, s1), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamSynchronize(s1), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(c + 4000, 4), std::vector<unsigned char>(4, 3));
  EXPECT_EQ(d().cuEventDestroy(e), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamDestroy(s1), CUDA_SUCCESS);
  EXPECT_EQ(d().cuStreamDestroy(s2), CUDA_SUCCESS);
  for (CUdeviceptr p : {a, b, c}) EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
}

// cuda.h, CUDA_ERROR_LAUNCH_FAILED: "This leaves the process in an
// inconsistent state and any further CUDA work will return the same error."
// Once the failed operation has run, every call that does work in the
// context returns it, on every stream, for good; releases release; queries of
// the device, the binding and the address table still answer.
TEST_F(FakeCuda, StickyErrorLosesTheContextForEveryLaterCall) {
  CUdeviceptr a = Alloc(4096), b = Alloc(4096);
  void* pinned = nullptr;
  ASSERT_EQ(d().cuMemAllocHost(&pinned, 4096), CUDA_SUCCESS);
  CUstream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent e = nullptr;
  ASSERT_EQ(d().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_fail("cuMemcpyDtoDAsync:1:CUDA_ERROR_LAUNCH_FAILED:deferred"), 0);
  ASSERT_EQ(d().cuMemcpyDtoDAsync(b, a, 4096, s1), CUDA_SUCCESS);  // not failed yet
  EXPECT_EQ(d().cuStreamSynchronize(s1), CUDA_ERROR_LAUNCH_FAILED);
  ASSERT_EQ(ctl_.set_fail(""), 0);
  constexpr CUresult kLost = CUDA_ERROR_LAUNCH_FAILED;
  // Reading it does not clear it; other streams and the context report it.
  EXPECT_EQ(d().cuStreamSynchronize(s1), kLost);
  EXPECT_EQ(d().cuStreamSynchronize(s2), kLost);
  EXPECT_EQ(d().cuStreamQuery(s2), kLost);
  EXPECT_EQ(d().cuStreamSynchronize(CU_STREAM_LEGACY), kLost);
  EXPECT_EQ(d().cuCtxSynchronize(), kLost);
  EXPECT_EQ(d().cuEventRecord(e, s2), kLost);
  EXPECT_EQ(d().cuEventQuery(e), kLost);
  EXPECT_EQ(d().cuEventSynchronize(e), kLost);
  EXPECT_EQ(d().cuStreamWaitEvent(s2, e, 0), kLost);
  // Any further work.
  std::vector<unsigned char> host(4096);
  CUdeviceptr c = 0;
  CUstream s3 = nullptr;
  CUevent e2 = nullptr;
  void* p = nullptr;
  size_t free = 0, total = 0;
  EXPECT_EQ(d().cuMemAlloc(&c, 4096), kLost);
  EXPECT_EQ(d().cuMemAllocManaged(&c, 4096, CU_MEM_ATTACH_GLOBAL), kLost);
  EXPECT_EQ(d().cuMemAllocHost(&p, 4096), kLost);
  EXPECT_EQ(d().cuMemHostRegister(host.data(), host.size(), 0), kLost);
  EXPECT_EQ(d().cuMemcpyHtoD(a, host.data(), 16), kLost);
  EXPECT_EQ(d().cuMemcpyDtoH(host.data(), a, 16), kLost);
  EXPECT_EQ(d().cuMemcpyAsync(b, a, 16, s2), kLost);
  EXPECT_EQ(d().cuMemsetD8(a, 1, 16), kLost);
  EXPECT_EQ(d().cuMemsetD8Async(a, 1, 16, s2), kLost);
  EXPECT_EQ(d().cuMemGetInfo(&free, &total), kLost);
  EXPECT_EQ(d().cuStreamCreate(&s3, 0), kLost);
  EXPECT_EQ(d().cuEventCreate(&e2, 0), kLost);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr va = 0;
  EXPECT_EQ(d().cuMemCreate(&h, Granularity(), &prop, 0), kLost);
  EXPECT_EQ(d().cuMemAddressReserve(&va, Granularity(), 0, 0, 0), kLost);
  // Not CUDA work: the device, the thread's binding, the address table.
  int n = 0;
  EXPECT_EQ(d().cuDeviceGetCount(&n), CUDA_SUCCESS);
  EXPECT_EQ(d().cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_SUCCESS);
  CUcontext cur = nullptr;
  EXPECT_EQ(d().cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, ctx_);
  CUdevice dev = -1;
  EXPECT_EQ(d().cuCtxGetDevice(&dev), CUDA_SUCCESS);
  unsigned type = 0;
  EXPECT_EQ(d().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  // Releases return the error and release all the same.
  EXPECT_EQ(d().cuEventDestroy(e), kLost);
  EXPECT_EQ(d().cuStreamDestroy(s1), kLost);
  EXPECT_EQ(d().cuStreamDestroy(s2), kLost);
  EXPECT_EQ(d().cuMemFreeHost(pinned), kLost);
  EXPECT_EQ(d().cuMemFree(a), kLost);
  EXPECT_EQ(d().cuMemFree(b), kLost);
  EXPECT_EQ(ctl_.live("streams"), 0u);
  EXPECT_EQ(ctl_.live("events"), 0u);
  EXPECT_EQ(ctl_.live("host_allocs"), 0u);
  EXPECT_EQ(ctl_.live("device_allocs"), 0u);
  EXPECT_EQ(d().cuMemFree(a), CUDA_ERROR_INVALID_VALUE);  // really gone
}

// Work queued behind the failed operation, on its stream or on others, never
// runs (it writes nothing), and waiting for it does not hang.
TEST_F(FakeCuda, WorkQueuedOnALostContextIsAbandoned) {
  CUdeviceptr a = Alloc(4096), b = Alloc(4096);
  CUdeviceptr m = 0;
  ASSERT_EQ(d().cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  auto* managed = reinterpret_cast<unsigned char*>(m);
  std::memset(managed, 0, 4096);
  CUstream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(d().cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d().cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent e = nullptr;
  ASSERT_EQ(d().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ctl_.pause_streams(1);  // nothing runs until everything is queued
  ASSERT_EQ(ctl_.set_fail("cuMemcpyDtoDAsync:1:CUDA_ERROR_ILLEGAL_ADDRESS:deferred"), 0);
  ASSERT_EQ(d().cuMemcpyDtoDAsync(b, a, 4096, s1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuEventRecord(e, s1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemsetD8Async(m, 7, 4096, s1), CUDA_SUCCESS);  // behind the failure
  ASSERT_EQ(d().cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemsetD8Async(m, 9, 16, s2), CUDA_SUCCESS);  // waits for the failure
  ctl_.pause_streams(0);
  EXPECT_EQ(d().cuStreamSynchronize(s2), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(d().cuStreamSynchronize(s1), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(std::count(managed, managed + 4096, 0), 4096);  // neither memset ran
  EXPECT_EQ(d().cuEventDestroy(e), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(d().cuStreamDestroy(s1), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(d().cuStreamDestroy(s2), CUDA_ERROR_ILLEGAL_ADDRESS);
  for (CUdeviceptr p : {a, b, m}) EXPECT_EQ(d().cuMemFree(p), CUDA_ERROR_ILLEGAL_ADDRESS);
}

// A sticky code returned by a call itself (here injected into cuMemAlloc)
// loses the calling thread's context too; VMM calls, which need no context,
// see the loss through the thread's current context, and release all the
// same.
TEST_F(FakeCuda, StickyErrorReturnedByACallLosesTheCurrentContext) {
  const size_t g = Granularity();
  CUmemAllocationProp prop = DeviceProp();
  CUdeviceptr va = 0;
  ASSERT_EQ(d().cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(d().cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_fail("cuMemAlloc:1:CUDA_ERROR_MISALIGNED_ADDRESS"), 0);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 4096), CUDA_ERROR_MISALIGNED_ADDRESS);
  ASSERT_EQ(ctl_.set_fail(""), 0);
  EXPECT_EQ(d().cuMemAlloc(&p, 4096), CUDA_ERROR_MISALIGNED_ADDRESS);
  CUmemAccessDesc rw = Access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(d().cuMemSetAccess(va, g, &rw, 1), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(d().cuMemUnmap(va, g), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(d().cuMemRelease(h), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(d().cuMemAddressFree(va, g), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(ctl_.live("mappings"), 0u);
  EXPECT_EQ(ctl_.live("handles"), 0u);
  EXPECT_EQ(ctl_.live("reservations"), 0u);
  EXPECT_EQ(ctl_.live("device_bytes"), 0u);
  // A thread without a current context is not the lost context's.
  std::thread([&] {
    EXPECT_EQ(d().cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(d().cuMemAddressFree(va, g), CUDA_SUCCESS);
  }).join();
}

// Which codes are sticky: each one cuda.h documents so, injected as an
// asynchronous failure, loses the context; the codes it documents nothing of
// the kind for are reported once. Each code gets a fresh fake (a "relaunch").
TEST_F(FakeCuda, ExactlyTheDocumentedCodesAreSticky) {
  const CUresult sticky[] = {
      CUDA_ERROR_ILLEGAL_ADDRESS,    CUDA_ERROR_LAUNCH_TIMEOUT,       CUDA_ERROR_ASSERT,
      CUDA_ERROR_HARDWARE_STACK_ERROR, CUDA_ERROR_ILLEGAL_INSTRUCTION, CUDA_ERROR_MISALIGNED_ADDRESS,
      CUDA_ERROR_INVALID_ADDRESS_SPACE, CUDA_ERROR_INVALID_PC,        CUDA_ERROR_LAUNCH_FAILED,
      CUDA_ERROR_EXTERNAL_DEVICE,
#if CUDA_VERSION >= 13000
      CUDA_ERROR_CONTAINED,          CUDA_ERROR_TENSOR_MEMORY_LEAK,
#endif
  };
  const CUresult not_sticky[] = {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_ECC_UNCORRECTABLE,
                                 CUDA_ERROR_NOT_PERMITTED, CUDA_ERROR_INVALID_VALUE,
                                 CUDA_ERROR_NVLINK_UNCORRECTABLE, CUDA_ERROR_UNKNOWN};
  auto fails_twice = [&](CUresult code) {
    ResetFake();
    EXPECT_EQ(d().cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(d().cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    EXPECT_EQ(d().cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    CUdeviceptr p = Alloc(64);
    const std::string spec = "cuMemsetD8Async:1:" + std::to_string(static_cast<int>(code)) + ":deferred";
    EXPECT_EQ(ctl_.set_fail(spec.c_str()), 0);
    EXPECT_EQ(d().cuMemsetD8Async(p, 1, 64, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(d().cuCtxSynchronize(), code);
    const bool again = d().cuCtxSynchronize() == code;
    d().cuMemFree(p);
    return again;
  };
  for (CUresult code : sticky) EXPECT_TRUE(fails_twice(code)) << "CUresult " << code;
  for (CUresult code : not_sticky) EXPECT_FALSE(fails_twice(code)) << "CUresult " << code;
}

// "To continue using CUDA, the process must be terminated and relaunched":
// the primary context's reset does not revive it (only the fake's reset, its
// relaunch, does). CUDA_ERROR_ASSERT: "The context cannot be used anymore,
// and must be destroyed": the reset does.
TEST_F(FakeCudaNoContext, OnlyAnAssertIsClearedByTheContextReset) {
  for (CUresult code : {CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ASSERT}) {
    ctl_.reset();
    ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
    CUcontext c = nullptr;
    ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    ASSERT_EQ(d().cuCtxSetCurrent(c), CUDA_SUCCESS);
    const std::string spec = "cuMemsetD8:1:" + std::to_string(static_cast<int>(code));
    ASSERT_EQ(ctl_.set_fail(spec.c_str()), 0);
    CUdeviceptr p = 0;
    ASSERT_EQ(d().cuMemAlloc(&p, 64), CUDA_SUCCESS);
    EXPECT_EQ(d().cuMemsetD8(p, 0, 64), code);
    EXPECT_EQ(d().cuMemAlloc(&p, 64), code);
    EXPECT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);  // the last reference: reset
    EXPECT_EQ(ctl_.live("device_allocs"), 0u);
    ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    ASSERT_EQ(d().cuCtxSetCurrent(c), CUDA_SUCCESS);
    const CUresult after = d().cuMemAlloc(&p, 64);
    EXPECT_EQ(after, code == CUDA_ERROR_ASSERT ? CUDA_SUCCESS : code) << "CUresult " << code;
    if (after == CUDA_SUCCESS) {
      EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
    }
    EXPECT_EQ(d().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  }
  // The fake's reset is the relaunch.
  ctl_.reset();
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  CUcontext c = nullptr;
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuCtxSetCurrent(c), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 64), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(d().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

// --- Host registration ---------------------------------------------------------

TEST_F(FakeCuda, HostRegistrationErrors) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* raw = mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(raw, MAP_FAILED);
  auto* base = static_cast<char*>(raw);
  EXPECT_EQ(d().cuMemHostRegister(nullptr, page, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemHostRegister(base, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemHostRegister(base, page, 0x100), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(d().cuMemHostRegister(base + page, 2 * page, CU_MEMHOSTREGISTER_PORTABLE), CUDA_SUCCESS);
  // Overlaps: the same range, a sub-range, a range sharing one page.
  EXPECT_EQ(d().cuMemHostRegister(base + page, 2 * page, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(d().cuMemHostRegister(base + 2 * page, 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(d().cuMemHostRegister(base, page + 1, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  // "The base address must be the same one specified to cuMemHostRegister()."
  EXPECT_EQ(d().cuMemHostUnregister(base + 2 * page), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(d().cuMemHostUnregister(base), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(d().cuMemHostUnregister(nullptr), CUDA_ERROR_INVALID_VALUE);
  // Not sticky: an adjacent, disjoint range registers fine.
  EXPECT_EQ(d().cuMemHostRegister(base + 3 * page, page, 0), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("registrations"), 2u);
  EXPECT_EQ(d().cuMemHostUnregister(base + page), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemHostUnregister(base + page), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(d().cuMemHostRegister(base + page, 2 * page, 0), CUDA_SUCCESS);  // again
  EXPECT_EQ(d().cuMemHostUnregister(base + page), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemHostUnregister(base + 3 * page), CUDA_SUCCESS);

  // Device memory, cuMemAllocHost memory and unmapped memory.
  CUdeviceptr p = Alloc(page);
  EXPECT_EQ(d().cuMemHostRegister(reinterpret_cast<void*>(p), page, 0), CUDA_ERROR_INVALID_VALUE);
  void* pinned = nullptr;
  ASSERT_EQ(d().cuMemAllocHost(&pinned, page), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemHostRegister(pinned, page, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(d().cuMemFreeHost(static_cast<char*>(pinned) + 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemFreeHost(pinned), CUDA_SUCCESS);
  munmap(base + 6 * page, 2 * page);
  EXPECT_EQ(d().cuMemHostRegister(base + 6 * page, page, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(ctl_.live("registrations"), 0u);
  d().cuMemFree(p);
  munmap(base, 6 * page);
}

TEST_F(FakeCuda, ReadOnlyRegistrationRejectsDeviceWrites) {
  std::vector<unsigned char> host(4096, 1);
  ASSERT_EQ(d().cuMemHostRegister(host.data(), host.size(), CU_MEMHOSTREGISTER_READ_ONLY), CUDA_SUCCESS);
  CUdeviceptr p = Alloc(4096);
  EXPECT_EQ(d().cuMemcpyHtoD(p, host.data(), 4096), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemcpyDtoH(host.data(), p, 4096), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemHostUnregister(host.data()), CUDA_SUCCESS);
  d().cuMemFree(p);
}

TEST_F(FakeCuda, RegistrationRateIsInjected) {
  std::vector<char> host(32 * kMiB);
  ASSERT_EQ(ctl_.set_gbps("register", 0.5), 0);  // 32 MiB at 0.5 GB/s: ~67 ms
  const auto t0 = Clock::now();
  ASSERT_EQ(d().cuMemHostRegister(host.data(), host.size(), 0), CUDA_SUCCESS);
  EXPECT_GE(SecondsSince(t0), 0.9 * 32.0 * kMiB / 0.5e9);
  EXPECT_EQ(d().cuMemHostUnregister(host.data()), CUDA_SUCCESS);
}

// --- Virtual memory management ---------------------------------------------------

TEST_F(FakeCuda, GranularityAndPropValidation) {
  const size_t g = Granularity();
  EXPECT_EQ(g, 2 * kMiB);
  CUmemAllocationProp prop = DeviceProp();
  size_t out = 0;
  EXPECT_EQ(d().cuMemGetAllocationGranularity(&out, &prop, static_cast<CUmemAllocationGranularity_flags>(7)),
            CUDA_ERROR_INVALID_VALUE);
  prop.location.id = 5;
  EXPECT_EQ(d().cuMemGetAllocationGranularity(&out, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_DEVICE);
  prop = DeviceProp();
  prop.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  EXPECT_EQ(d().cuMemGetAllocationGranularity(&out, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemGetAllocationGranularity(&out, nullptr, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCuda, ReserveCreateMapChecks) {
  const size_t g = Granularity();
  CUdeviceptr va = 0;
  EXPECT_EQ(d().cuMemAddressReserve(&va, g + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemAddressReserve(&va, 4 * g, 3 * g, 0, 0), CUDA_ERROR_INVALID_VALUE);  // not 2^k
  EXPECT_EQ(d().cuMemAddressReserve(&va, 4 * g, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);      // flags
  ASSERT_EQ(d().cuMemAddressReserve(&va, 4 * g, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(va % g, 0u);

  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(d().cuMemCreate(&h, g / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemCreate(&h, g, &prop, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(d().cuMemCreate(&h, 2 * g, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("device_bytes"), 2 * g);

  EXPECT_EQ(d().cuMemMap(va, 2 * g, g, h, 0), CUDA_ERROR_INVALID_VALUE);       // offset != 0
  EXPECT_EQ(d().cuMemMap(va + 4096, g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);    // unaligned
  EXPECT_EQ(d().cuMemMap(va, 3 * g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);       // past the handle
  EXPECT_EQ(d().cuMemMap(va + 3 * g, 2 * g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // past the reservation
  EXPECT_EQ(d().cuMemMap(va, 2 * g, 0, h + 999, 0), CUDA_ERROR_INVALID_VALUE);  // no such handle
  ASSERT_EQ(d().cuMemMap(va, 2 * g, 0, h, 0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemMap(va + g, g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped

  // Free and unmap need the exact ranges.
  EXPECT_EQ(d().cuMemAddressFree(va, 2 * g), CUDA_ERROR_INVALID_VALUE);  // wrong size
  EXPECT_EQ(d().cuMemAddressFree(va, 4 * g), CUDA_ERROR_INVALID_VALUE);  // still mapped (fake)
  EXPECT_EQ(d().cuMemUnmap(va, g), CUDA_ERROR_INVALID_VALUE);            // part of a mapping
  EXPECT_EQ(d().cuMemUnmap(va, 4 * g), CUDA_ERROR_INVALID_VALUE);        // a hole
  ASSERT_EQ(d().cuMemUnmap(va, 2 * g), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(ctl_.live("device_bytes"), 0u);
  ASSERT_EQ(d().cuMemAddressFree(va, 4 * g), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("reservations"), 0u);
}

TEST_F(FakeCuda, CreateBeyondDeviceMemoryIsOutOfMemory) {
  const size_t g = Granularity();
  ASSERT_EQ(ctl_.set_device_memory(3 * g), 0);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle a = 0, b = 0;
  ASSERT_EQ(d().cuMemCreate(&a, 2 * g, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemCreate(&b, 2 * g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(d().cuMemCreate(&b, g, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);  // one pool for both
  EXPECT_EQ(d().cuMemRelease(a), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemRelease(b), CUDA_SUCCESS);
}

TEST_F(FakeCuda, AccessMustBeSetBeforeUse) {
  const size_t g = Granularity();
  CUdeviceptr va = 0;
  ASSERT_EQ(d().cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h1 = 0, h2 = 0;
  ASSERT_EQ(d().cuMemCreate(&h1, g, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemCreate(&h2, g, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemMap(va, g, 0, h1, 0), CUDA_SUCCESS);
  std::vector<unsigned char> host(2 * g);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i / 4096);
  // "calling cuMemMap does not make the address accessible"
  EXPECT_EQ(d().cuMemcpyHtoD(va, host.data(), 64), CUDA_ERROR_INVALID_VALUE);
  CUmemAccessDesc rw = Access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(d().cuMemSetAccess(va, 2 * g, &rw, 1), CUDA_ERROR_INVALID_VALUE);  // not all mapped
  EXPECT_EQ(d().cuMemSetAccess(va, g / 2, &rw, 1), CUDA_ERROR_INVALID_VALUE);  // part of a mapping
  CUmemAccessDesc bad = Access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 9);
  EXPECT_EQ(d().cuMemSetAccess(va, g, &bad, 1), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(d().cuMemSetAccess(va, g, &rw, 1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyHtoD(va, host.data(), g), CUDA_SUCCESS);
  // A copy into the reserved, unmapped second chunk fails.
  EXPECT_EQ(d().cuMemcpyHtoD(va, host.data(), 2 * g), CUDA_ERROR_INVALID_VALUE);
  // Map the second chunk (another handle), make it accessible: one copy spans both.
  ASSERT_EQ(d().cuMemMap(va + g, g, 0, h2, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemSetAccess(va + g, g, &rw, 1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemcpyHtoD(va, host.data(), 2 * g), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(va, 2 * g), host);
  EXPECT_EQ(ReadBack(va + g - 100, 200),
            std::vector<unsigned char>(host.begin() + static_cast<long>(g) - 100,
                                       host.begin() + static_cast<long>(g) + 100));
  // Read-only access: reads work, writes do not.
  CUmemAccessDesc ro = Access(CU_MEM_ACCESS_FLAGS_PROT_READ);
  ASSERT_EQ(d().cuMemSetAccess(va, 2 * g, &ro, 1), CUDA_SUCCESS);  // both mappings at once
  EXPECT_EQ(d().cuMemcpyHtoD(va, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(ReadBack(va, 16), std::vector<unsigned char>(host.begin(), host.begin() + 16));
  // Unmapped again: no access at all.
  ASSERT_EQ(d().cuMemUnmap(va, 2 * g), CUDA_SUCCESS);
  std::vector<unsigned char> out(16);
  EXPECT_EQ(d().cuMemcpyDtoH(out.data(), va, 16), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(d().cuMemRelease(h1), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemRelease(h2), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAddressFree(va, 2 * g), CUDA_SUCCESS);
}

TEST_F(FakeCuda, ReleaseWhileMappedFreesAtUnmap) {
  const size_t g = Granularity();
  CUdeviceptr va = 0;
  ASSERT_EQ(d().cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(d().cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc rw = Access(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(d().cuMemSetAccess(va, g, &rw, 1), CUDA_SUCCESS);
  // "The generic memory handle can be freed when there are still outstanding
  // mappings made with this handle."
  ASSERT_EQ(d().cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("handles"), 0u);
  EXPECT_EQ(ctl_.live("device_bytes"), g);  // still backing the mapping
  ASSERT_EQ(d().cuMemsetD8(va, 7, g), CUDA_SUCCESS);
  EXPECT_EQ(ReadBack(va + g - 4, 4), std::vector<unsigned char>(4, 7));
  EXPECT_EQ(d().cuMemMap(va, g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // the handle is gone
  ASSERT_EQ(d().cuMemUnmap(va, g), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("device_bytes"), 0u);  // freed with the last mapping
  ASSERT_EQ(d().cuMemAddressFree(va, g), CUDA_SUCCESS);
}

TEST_F(FakeCuda, MapRateIsInjected) {
  const size_t g = Granularity();
  CUdeviceptr va = 0;
  ASSERT_EQ(d().cuMemAddressReserve(&va, 16 * g, 0, 0, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(d().cuMemCreate(&h, 16 * g, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_gbps("map", 0.5), 0);  // 32 MiB at 0.5 GB/s: ~67 ms
  const auto t0 = Clock::now();
  ASSERT_EQ(d().cuMemMap(va, 16 * g, 0, h, 0), CUDA_SUCCESS);
  EXPECT_GE(SecondsSince(t0), 0.9 * 16.0 * static_cast<double>(g) / 0.5e9);
  ASSERT_EQ(ctl_.set_gbps("map", 0), 0);
  ASSERT_EQ(d().cuMemUnmap(va, 16 * g), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemRelease(h), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAddressFree(va, 16 * g), CUDA_SUCCESS);
}

// --- Pointer attributes ------------------------------------------------------------

TEST_F(FakeCuda, PointerAttributes) {
  std::vector<char> plain(64);
  const auto plain_ptr = reinterpret_cast<CUdeviceptr>(plain.data());
  unsigned int type = 99;
  // cuPointerGetAttribute: "If ptr was not allocated by, mapped by, or
  // registered with a CUcontext which uses unified virtual addressing then
  // CUDA_ERROR_INVALID_VALUE is returned."
  EXPECT_EQ(d().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, plain_ptr),
            CUDA_ERROR_INVALID_VALUE);
  // cuPointerGetAttributes: "will not return an error when the ptr
  // encountered is not a valid CUDA pointer. Instead, the attributes are
  // assigned default NULL values and CUDA_SUCCESS is returned."
  int managed = 7, ordinal = 7;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&type, &managed, &ordinal};
  ASSERT_EQ(d().cuPointerGetAttributes(3, attrs, data, plain_ptr), CUDA_SUCCESS);
  EXPECT_EQ(type, 0u);
  EXPECT_EQ(managed, 0);

  CUdeviceptr dev = Alloc(8192);
  ASSERT_EQ(d().cuPointerGetAttributes(3, attrs, data, dev + 100), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(managed, 0);
  EXPECT_EQ(ordinal, 0);
  CUcontext c = nullptr;
  EXPECT_EQ(d().cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, dev), CUDA_SUCCESS);
  EXPECT_EQ(c, ctx_);
  CUdeviceptr start = 0;
  size_t size = 0;
  EXPECT_EQ(d().cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dev + 100), CUDA_SUCCESS);
  EXPECT_EQ(d().cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dev + 100), CUDA_SUCCESS);
  EXPECT_EQ(start, dev);
  EXPECT_EQ(size, 8192u);
  void* host_ptr = nullptr;
  EXPECT_EQ(d().cuPointerGetAttribute(&host_ptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, dev),
            CUDA_ERROR_INVALID_VALUE);  // device memory has no host address
  unsigned long long id1 = 0, id2 = 0;
  CUdeviceptr dev2 = Alloc(16);
  EXPECT_EQ(d().cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, dev), CUDA_SUCCESS);
  EXPECT_EQ(d().cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, dev2), CUDA_SUCCESS);
  EXPECT_NE(id1, id2);

  CUdeviceptr m = 0;
  ASSERT_EQ(d().cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(d().cuPointerGetAttributes(3, attrs, data, m), CUDA_SUCCESS);
  EXPECT_EQ(managed, 1);
  EXPECT_EQ(d().cuPointerGetAttribute(&host_ptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, m), CUDA_SUCCESS);
  EXPECT_EQ(host_ptr, reinterpret_cast<void*>(m));

  ASSERT_EQ(d().cuMemHostRegister(plain.data(), plain.size(), 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuPointerGetAttributes(3, attrs, data, plain_ptr + 8), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
  EXPECT_EQ(managed, 0);
  ASSERT_EQ(d().cuMemHostUnregister(plain.data()), CUDA_SUCCESS);

  // DEVICE_POINTER: "If there is no current CUcontext then
  // CUDA_ERROR_INVALID_CONTEXT is returned."
  ASSERT_EQ(d().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  CUdeviceptr dp = 0;
  EXPECT_EQ(d().cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, dev),
            CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_EQ(d().cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  EXPECT_EQ(d().cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, dev), CUDA_SUCCESS);
  EXPECT_EQ(dp, dev);
  d().cuMemFree(m);
  d().cuMemFree(dev);
  d().cuMemFree(dev2);
}

TEST_F(FakeCuda, VmmPointerAttributes) {
  const size_t g = Granularity();
  CUdeviceptr va = 0;
  ASSERT_EQ(d().cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(d().cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
  int mapped = -1, access = -1;
  unsigned int type = 0;
  EXPECT_EQ(d().cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va), CUDA_SUCCESS);
  EXPECT_EQ(mapped, 1);
  EXPECT_EQ(d().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(d().cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, va), CUDA_SUCCESS);
  EXPECT_EQ(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);
  size_t size = 0;
  EXPECT_EQ(d().cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + g), CUDA_SUCCESS);
  EXPECT_EQ(size, 2 * g);  // "the size of the mappable address range"
  EXPECT_EQ(d().cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va + g), CUDA_SUCCESS);
  EXPECT_EQ(mapped, 0);
  EXPECT_EQ(d().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + g),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(d().cuMemUnmap(va, g), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemRelease(h), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAddressFree(va, 2 * g), CUDA_SUCCESS);
}

// --- Error strings, cuGetProcAddress -------------------------------------------------

TEST_F(FakeCuda, ErrorNamesAndStrings) {
  for (CUresult r : {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
                     CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_CONTEXT,
                     CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_FOUND,
                     CUDA_ERROR_NOT_READY, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                     CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, CUDA_ERROR_NOT_SUPPORTED,
                     CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_NO_DEVICE, CUDA_ERROR_UNKNOWN}) {
    const char* name = nullptr;
    const char* text = nullptr;
    EXPECT_EQ(d().cuGetErrorName(r, &name), CUDA_SUCCESS) << r;
    EXPECT_EQ(d().cuGetErrorString(r, &text), CUDA_SUCCESS) << r;
    ASSERT_NE(name, nullptr);
    ASSERT_NE(text, nullptr);
    EXPECT_EQ(std::string(name).rfind("CUDA_", 0), 0u) << name;
  }
  const char* s = "x";
  EXPECT_EQ(d().cuGetErrorName(static_cast<CUresult>(12345), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(s, nullptr);
}

TEST_F(FakeCuda, GetProcAddress) {
  void* h = dlopen(kFakeCudaLib, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProc>(dlsym(h, "cuGetProcAddress_v2"));
  ASSERT_NE(get, nullptr);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  ASSERT_EQ(get("cuMemAlloc", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, dlsym(h, "cuMemAlloc_v2"));
  EXPECT_EQ(get("cuNoSuchThing", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  dlclose(h);
}

// --- Fault injection and counters ------------------------------------------------------

TEST_F(FakeCuda, NthCallFails) {
  const size_t g = Granularity();
  CUmemAllocationProp prop = DeviceProp();
  ASSERT_EQ(ctl_.set_fail("cuMemCreate:3"), 0);  // default code: out of memory
  CUmemGenericAllocationHandle h[4] = {};
  EXPECT_EQ(d().cuMemCreate(&h[0], g, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemCreate(&h[1], g, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemCreate(&h[2], g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(d().cuMemCreate(&h[3], g, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.call_count("cuMemCreate"), 4u);
  EXPECT_EQ(ctl_.live("handles"), 3u);
  d().cuMemRelease(h[0]);
  d().cuMemRelease(h[1]);
  d().cuMemRelease(h[3]);

  ASSERT_EQ(ctl_.set_fail("cuMemAlloc_v2:2+:CUDA_ERROR_INVALID_VALUE; cuStreamCreate:1:201"), 0);
  CUdeviceptr p = 0;
  EXPECT_EQ(d().cuMemAlloc(&p, 16), CUDA_SUCCESS);
  CUdeviceptr q = 0;
  EXPECT_EQ(d().cuMemAlloc(&q, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d().cuMemAlloc(&q, 16), CUDA_ERROR_INVALID_VALUE);
  CUstream s = nullptr;
  EXPECT_EQ(d().cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(d().cuStreamCreate(&s, 0), CUDA_SUCCESS);
  ASSERT_EQ(ctl_.set_fail(nullptr), 0);
  EXPECT_EQ(d().cuMemAlloc(&q, 16), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.set_fail("cuMemAlloc"), -1);
  EXPECT_EQ(ctl_.set_fail("cuMemAlloc:0"), -1);
  EXPECT_EQ(ctl_.set_fail("cuMemAlloc:1:CUDA_ERROR_NO_SUCH_THING"), -1);
  d().cuStreamDestroy(s);
  d().cuMemFree(p);
  d().cuMemFree(q);
}

TEST_F(FakeCudaNoContext, FaultsFromTheEnvironment) {
  {
    ScopedEnv env("CAIRN_FAKE_CUDA_FAIL", "cuMemAllocHost:1:CUDA_ERROR_OUT_OF_MEMORY");
    ctl_.reset();
  }
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  CUcontext c = nullptr;
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuCtxSetCurrent(c), CUDA_SUCCESS);
  void* p = nullptr;
  EXPECT_EQ(d().cuMemAllocHost(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(d().cuMemAllocHost(&p, 64), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFreeHost(p), CUDA_SUCCESS);
  ASSERT_EQ(d().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  ASSERT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(FakeCuda, ConcurrentUseFromManyThreads) {
  // Threads each with their own stream and buffers, sharing the context.
  constexpr int kThreads = 4;
  constexpr size_t n = 64 * 1024;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (d().cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) ++failures;
      CUstream s = nullptr;
      CUdeviceptr p = 0;
      void* host = nullptr;
      if (d().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) ++failures;
      if (d().cuMemAlloc(&p, n) != CUDA_SUCCESS) ++failures;
      if (d().cuMemAllocHost(&host, n) != CUDA_SUCCESS) ++failures;
      for (int i = 0; i < 20; ++i) {
        std::memset(host, t * 20 + i, n);
        if (d().cuMemcpyHtoDAsync(p, host, n, s) != CUDA_SUCCESS) ++failures;
        if (d().cuMemsetD8Async(p, static_cast<unsigned char>(i), 1, s) != CUDA_SUCCESS) ++failures;
        if (d().cuStreamSynchronize(s) != CUDA_SUCCESS) ++failures;
        std::memset(host, 0, n);
        if (d().cuMemcpyDtoHAsync(host, p, n, s) != CUDA_SUCCESS) ++failures;
        if (d().cuStreamSynchronize(s) != CUDA_SUCCESS) ++failures;
        const auto* b = static_cast<const unsigned char*>(host);
        if (b[0] != i || b[n - 1] != static_cast<unsigned char>(t * 20 + i)) ++failures;
      }
      d().cuStreamDestroy(s);
      d().cuMemFree(p);
      d().cuMemFreeHost(host);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ctl_.live("device_allocs"), 0u);
}

}  // namespace
}  // namespace cairn::test

#endif  // CAIRN_TEST_FAKE_CUDA
