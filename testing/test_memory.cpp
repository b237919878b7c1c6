#include "testing/test_memory.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "gpu/cuda_driver.hpp"

// Device and managed instances exist in builds that have the fake driver to
// run them on. They are listed whether or not a driver loads at run time:
// an instance that cannot get its memory fails loudly instead of vanishing.
#if CAIRN_GPU_HAVE_CUDA && defined(CAIRN_HAVE_FAKE_CUDA)
#define CAIRN_TEST_GPU_KINDS 1
#else
#define CAIRN_TEST_GPU_KINDS 0
#endif

namespace cairn::test {

std::vector<MemoryKind> MemoryKindsUnderTest() {
  if (CAIRN_TEST_GPU_KINDS) return {MemoryKind::kHost, MemoryKind::kDevice, MemoryKind::kManaged};
  return {MemoryKind::kHost};
}

std::string MemoryKindTestName(const ::testing::TestParamInfo<MemoryKind>& info) {
  switch (info.param) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kManaged:
      return "managed";
  }
  return "unknown";
}

void ConfigureFor(MemoryKind kind, Config& c) {
  if (kind != MemoryKind::kDevice) {
    c.device_cache_bytes = 0;
    return;
  }
  // Half the host cache, whole blocks, at least two: small enough to fill
  // and evict in every test, big enough to pipeline capture and drain.
  const uint64_t block = std::max<uint64_t>(c.block_bytes, 1);
  c.device_cache_bytes = std::max<uint64_t>(c.host_cache_bytes / 2 / block, 2) * block;
  c.device_map_chunk_bytes = 2 * 1024 * 1024;  // mapped in a few steps
}

#if CAIRN_TEST_GPU_KINDS

namespace {

// The process-wide driver with device 0's primary context current on this
// thread (retained: the caller releases it), or nullptr after a test failure.
const gpu::Driver* RetainDevice0() {
  auto got = gpu::Driver::Get();
  if (!got.ok()) {
    ADD_FAILURE() << "no CUDA driver for device/managed test memory: " << got.status().ToString();
    return nullptr;
  }
  const gpu::Driver* d = *got;
  CUcontext ctx = nullptr;
  if (CUresult r = d->cuDevicePrimaryCtxRetain(&ctx, 0); r != CUDA_SUCCESS) {
    ADD_FAILURE() << "cuDevicePrimaryCtxRetain: CUDA error " << r;
    return nullptr;
  }
  if (CUresult r = d->cuCtxSetCurrent(ctx); r != CUDA_SUCCESS) {
    ADD_FAILURE() << "cuCtxSetCurrent: CUDA error " << r;
    d->cuDevicePrimaryCtxRelease(0);
    return nullptr;
  }
  return d;
}

const gpu::Driver* CurrentDriver() {
  auto got = gpu::Driver::Get();
  return got.ok() ? *got : nullptr;
}

CUdeviceptr Dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// GPU TestBuffers alive (each holds a primary-context reference). When the
// last one goes, the primary context is reset (cuDevicePrimaryCtxRelease):
// it must not stay current on the thread, or the next test's client would
// find a destroyed context there (like an application that leaves one).
int live_gpu_buffers = 0;

}  // namespace

#endif  // CAIRN_TEST_GPU_KINDS

TestBuffer::TestBuffer(MemoryKind kind, size_t bytes) : kind_(kind), size_(bytes) {
  if (kind == MemoryKind::kHost) {
    host_.resize(bytes);
    data_ = host_.data();
    return;
  }
#if CAIRN_TEST_GPU_KINDS
  const gpu::Driver* d = RetainDevice0();
  if (d == nullptr) return;
  CUdeviceptr p = 0;
  // Zero-byte allocations are invalid in CUDA; keep one byte behind them.
  const size_t n = std::max<size_t>(bytes, 1);
  const CUresult r = kind == MemoryKind::kDevice ? d->cuMemAlloc(&p, n)
                                                 : d->cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL);
  if (r != CUDA_SUCCESS) {
    ADD_FAILURE() << "allocating " << n << " bytes of GPU test memory: CUDA error " << r;
    d->cuDevicePrimaryCtxRelease(0);
    return;
  }
  data_ = reinterpret_cast<void*>(p);
  ++live_gpu_buffers;
#else
  ADD_FAILURE() << "device/managed test memory needs a build with the fake CUDA driver";
#endif
}

TestBuffer::TestBuffer(MemoryKind kind, const std::vector<uint8_t>& bytes)
    : TestBuffer(kind, bytes.size()) {
  Write(bytes);
}

TestBuffer::TestBuffer(TestBuffer&& other) noexcept
    : kind_(other.kind_), size_(other.size_), data_(other.data_), host_(std::move(other.host_)) {
  if (kind_ == MemoryKind::kHost) data_ = host_.data();
  other.data_ = nullptr;
  other.size_ = 0;
}

TestBuffer::~TestBuffer() {
  if (data_ == nullptr || kind_ == MemoryKind::kHost) return;
#if CAIRN_TEST_GPU_KINDS
  if (const gpu::Driver* d = CurrentDriver()) {
    d->cuMemFree(Dptr(data_));
    d->cuDevicePrimaryCtxRelease(0);
    if (--live_gpu_buffers == 0) d->cuCtxSetCurrent(nullptr);
  }
#endif
}

void TestBuffer::Write(const std::vector<uint8_t>& bytes, size_t offset) {
  ASSERT_LE(offset + bytes.size(), size_) << "TestBuffer::Write past the end";
  if (data_ == nullptr || bytes.empty()) return;
  if (kind_ != MemoryKind::kDevice) {
    std::memcpy(static_cast<uint8_t*>(data_) + offset, bytes.data(), bytes.size());
    return;
  }
#if CAIRN_TEST_GPU_KINDS
  const gpu::Driver* d = CurrentDriver();
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->cuMemcpyHtoD(Dptr(data_) + offset, bytes.data(), bytes.size()), CUDA_SUCCESS);
#endif
}

void TestBuffer::Fill(uint8_t value) {
  if (data_ == nullptr || size_ == 0) return;
  if (kind_ != MemoryKind::kDevice) {
    std::memset(data_, value, size_);
    return;
  }
#if CAIRN_TEST_GPU_KINDS
  const gpu::Driver* d = CurrentDriver();
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->cuMemsetD8(Dptr(data_), value, size_), CUDA_SUCCESS);
  // cuMemsetD8 on device memory may return before it is done.
  ASSERT_EQ(d->cuCtxSynchronize(), CUDA_SUCCESS);
#endif
}

std::vector<uint8_t> TestBuffer::Read() const {
  std::vector<uint8_t> out(size_);
  if (data_ == nullptr || size_ == 0) return out;
  if (kind_ != MemoryKind::kDevice) {
    std::memcpy(out.data(), data_, size_);
    return out;
  }
#if CAIRN_TEST_GPU_KINDS
  const gpu::Driver* d = CurrentDriver();
  if (d == nullptr || d->cuMemcpyDtoH(out.data(), Dptr(data_), size_) != CUDA_SUCCESS) {
    ADD_FAILURE() << "TestBuffer::Read: cuMemcpyDtoH failed";
  }
#endif
  return out;
}

}  // namespace cairn::test
