// The GPU runtime (gpu/runtime.hpp) against the fake CUDA driver: contexts,
// streams, pinned buffers and the cuMemHostRegister pinner.
#include "gpu/runtime.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <thread>
#include <vector>

#include "gpu/cuda_driver.hpp"
#include "testing/fake_cuda/fake_cuda_fixture.hpp"

namespace cairn::gpu {
namespace {

#if !CAIRN_GPU_HAVE_CUDA

TEST(RuntimeStubTest, OpenIsUnsupported) {
  auto rt = Runtime::Open(-1);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), Code::kUnsupported);
  EXPECT_NE(rt.status().message().find("built without CUDA support"), std::string::npos)
      << rt.status().ToString();
  EXPECT_EQ(Runtime::Open(0).status().code(), Code::kUnsupported);
}

#endif  // !CAIRN_GPU_HAVE_CUDA

#if CAIRN_TEST_FAKE_CUDA

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Page-aligned host memory of our own (registrations are judged by pages).
class HostPages {
 public:
  explicit HostPages(size_t n) : n_(n) {
    p_ = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p_, MAP_FAILED);
  }
  ~HostPages() {
    if (p_ != MAP_FAILED) munmap(p_, n_);
  }
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }
  size_t size() const { return n_; }

 private:
  void* p_;
  size_t n_;
};

class RuntimeTest : public test::FakeCudaTest {
 protected:
  CUcontext Current() const {
    CUcontext c = nullptr;
    EXPECT_EQ(d().cuCtxGetCurrent(&c), CUDA_SUCCESS);
    return c;
  }
  std::unique_ptr<Runtime> OpenRuntime(int device = -1) {
    auto rt = Runtime::Open(d(), device);
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();
    return rt.ok() ? std::move(rt).value() : nullptr;
  }
};

class RuntimeNoContextTest : public RuntimeTest {
 protected:
  RuntimeNoContextTest() { retain_context_ = false; }
};

// --- Open and contexts --------------------------------------------------------

TEST_F(RuntimeTest, OpenUsesTheCurrentContext) {
  const auto retains = ctl_.call_count("cuDevicePrimaryCtxRetain");
  auto rt = OpenRuntime(-1);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->context(), static_cast<void*>(ctx_));
  EXPECT_EQ(rt->device(), 0);
  EXPECT_EQ(&rt->driver(), &d());
  // The application's context is used, not retained.
  EXPECT_EQ(ctl_.call_count("cuDevicePrimaryCtxRetain"), retains);
  ASSERT_NE(rt->host_pinner(), nullptr);
  EXPECT_STREQ(rt->host_pinner()->name(), "cuMemHostRegister");
  rt.reset();
  EXPECT_EQ(ctl_.call_count("cuDevicePrimaryCtxRelease"), 0u);
  EXPECT_EQ(Current(), ctx_);
}

TEST_F(RuntimeNoContextTest, OpenWithoutAContextRetainsDevice0Primary) {
  ASSERT_EQ(Current(), nullptr);
  EXPECT_EQ(ctl_.live("retained_contexts"), 0u);
  auto rt = OpenRuntime(-1);
  ASSERT_NE(rt, nullptr);
  EXPECT_NE(rt->context(), nullptr);
  EXPECT_EQ(rt->device(), 0);
  EXPECT_EQ(ctl_.live("retained_contexts"), 1u);
  EXPECT_EQ(Current(), nullptr);  // Open leaves the thread as it was
  // It is device 0's primary context.
  CUcontext primary = nullptr;
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<void*>(primary), rt->context());
  ASSERT_EQ(d().cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  rt.reset();
  EXPECT_EQ(ctl_.live("retained_contexts"), 0u);
}

TEST_F(RuntimeNoContextTest, OpenCallsCuInit) {
  ctl_.reset();  // back to before cuInit
  auto rt = OpenRuntime(-1);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(ctl_.call_count("cuInit"), 1u);
  EXPECT_EQ(ctl_.live("retained_contexts"), 1u);
}

TEST_F(RuntimeNoContextTest, OpenAFailingCuInitNamesIt) {
  ctl_.reset();
  ASSERT_EQ(ctl_.set_fail("cuInit:1:CUDA_ERROR_NO_DEVICE"), 0);
  auto rt = Runtime::Open(d(), -1);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), Code::kUnsupported);
  EXPECT_TRUE(Contains(rt.status().message(), "cuInit")) << rt.status().ToString();
}

TEST_F(RuntimeTest, OpenAnExplicitDeviceUsesItsPrimaryContext) {
  test::ScopedEnv devices("CAIRN_FAKE_CUDA_DEVICES", "2");
  ResetFake();  // two devices from now on; the fixture's context is gone
  auto rt1 = OpenRuntime(1);
  ASSERT_NE(rt1, nullptr);
  EXPECT_EQ(rt1->device(), 1);
  EXPECT_EQ(ctl_.live("retained_contexts"), 1u);
  auto rt0 = OpenRuntime(0);
  ASSERT_NE(rt0, nullptr);
  EXPECT_NE(rt0->context(), rt1->context());
  EXPECT_EQ(ctl_.live("retained_contexts"), 2u);

  auto bad = Runtime::Open(d(), 7);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status().message(), "cuDeviceGet")) << bad.status().ToString();
  EXPECT_TRUE(Contains(bad.status().message(), "device 7")) << bad.status().ToString();
  rt0.reset();
  rt1.reset();
  EXPECT_EQ(ctl_.live("retained_contexts"), 0u);
}

TEST_F(RuntimeTest, ScopeRestoresThePreviousContext) {
  test::ScopedEnv devices("CAIRN_FAKE_CUDA_DEVICES", "2");
  ResetFake();
  ASSERT_EQ(d().cuInit(0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
  ASSERT_EQ(d().cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  auto rt = OpenRuntime(1);
  ASSERT_NE(rt, nullptr);
  ASSERT_NE(rt->context(), static_cast<void*>(ctx_));
  {
    Runtime::Scope scope(*rt);
    EXPECT_EQ(static_cast<void*>(Current()), rt->context());
    {
      Runtime::Scope nested(*rt);  // already current: nothing to switch
      EXPECT_EQ(static_cast<void*>(Current()), rt->context());
    }
    EXPECT_EQ(static_cast<void*>(Current()), rt->context());
  }
  EXPECT_EQ(Current(), ctx_);

  // From a thread with no current context: back to none.
  std::thread([&] {
    EXPECT_EQ(Current(), nullptr);
    {
      Runtime::Scope scope(*rt);
      EXPECT_EQ(static_cast<void*>(Current()), rt->context());
    }
    EXPECT_EQ(Current(), nullptr);
  }).join();
  rt.reset();
  // The fixture's TearDown releases device 0's primary context.
}

TEST_F(RuntimeTest, Classify) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  CUdeviceptr p = 0;
  ASSERT_EQ(d().cuMemAlloc(&p, 1 << 20), CUDA_SUCCESS);
  auto dev = rt->Classify(reinterpret_cast<void*>(p), 1 << 20);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(dev->kind, PointerKind::kDevice);
  std::vector<char> host(100);
  auto h = rt->Classify(host.data(), host.size());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->kind, PointerKind::kHost);
  EXPECT_FALSE(h->registered);
  ASSERT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
}

// --- Stream and PinnedBuffer --------------------------------------------------------

TEST_F(RuntimeTest, StreamRoundTripHostDeviceDeviceHost) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  const size_t n = (1 << 20) + 17;
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(d().cuMemAlloc(&a, n), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAlloc(&b, n), CUDA_SUCCESS);
  auto pinned = PinnedBuffer::Allocate(*rt, n);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  for (size_t i = 0; i < n; ++i) (*pinned)->data()[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> pageable(n, 0);
  std::vector<uint8_t> out(n, 0);

  auto stream = Stream::Create(*rt);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  Stream& s = **stream;
  // pinned host -> device -> device -> pageable host, and a pageable source too.
  ASSERT_TRUE(s.Copy(reinterpret_cast<void*>(a), (*pinned)->data(), n).ok());
  ASSERT_TRUE(s.Copy(reinterpret_cast<void*>(b), reinterpret_cast<void*>(a), n).ok());
  ASSERT_TRUE(s.Copy(pageable.data(), reinterpret_cast<void*>(b), n).ok());
  ASSERT_TRUE(s.Synchronize().ok());
  EXPECT_EQ(std::memcmp(pageable.data(), (*pinned)->data(), n), 0);
  ASSERT_TRUE(s.Copy(reinterpret_cast<void*>(a), pageable.data(), n).ok());
  ASSERT_TRUE(s.Copy(out.data(), reinterpret_cast<void*>(a), n).ok());
  ASSERT_TRUE(s.Synchronize().ok());
  EXPECT_EQ(out, pageable);
  EXPECT_TRUE(s.Copy(out.data(), pageable.data(), 0).ok());  // nothing to do

  EXPECT_EQ(ctl_.call_count("cuStreamCreate"), 1u);
  EXPECT_GE(ctl_.call_count("cuMemcpyAsync"), 5u);
  EXPECT_EQ(Current(), ctx_);
  stream->reset();
  ASSERT_EQ(d().cuMemFree(a), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemFree(b), CUDA_SUCCESS);
}

TEST_F(RuntimeTest, StreamWorksFromAThreadWithoutAContext) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  CUdeviceptr a = 0;
  ASSERT_EQ(d().cuMemAlloc(&a, 4096), CUDA_SUCCESS);
  std::vector<uint8_t> in(4096, 0x5a), out(4096, 0);
  std::thread([&] {
    auto stream = Stream::Create(*rt);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    EXPECT_TRUE((*stream)->Copy(reinterpret_cast<void*>(a), in.data(), in.size()).ok());
    EXPECT_TRUE((*stream)->Copy(out.data(), reinterpret_cast<void*>(a), out.size()).ok());
    EXPECT_TRUE((*stream)->Synchronize().ok());
    CUcontext c = nullptr;
    EXPECT_EQ(d().cuCtxGetCurrent(&c), CUDA_SUCCESS);
    EXPECT_EQ(c, nullptr);
  }).join();
  EXPECT_EQ(out, in);
  ASSERT_EQ(d().cuMemFree(a), CUDA_SUCCESS);
}

// CUDA_ERROR_ECC_UNCORRECTABLE is not documented as sticky: reported by the
// stream's Synchronize, once, and the runtime works on.
TEST_F(RuntimeTest, DeferredCopyFailureIsReportedBySynchronize) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(d().cuMemAlloc(&a, 4096), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAlloc(&b, 4096), CUDA_SUCCESS);
  auto stream = Stream::Create(*rt);
  ASSERT_TRUE(stream.ok());
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:1:CUDA_ERROR_ECC_UNCORRECTABLE:deferred"), 0);
  // The call succeeds (device -> device is asynchronous); the copy fails.
  Status copy = (*stream)->Copy(reinterpret_cast<void*>(b), reinterpret_cast<void*>(a), 4096);
  ASSERT_TRUE(copy.ok()) << copy.ToString();
  Status sync = (*stream)->Synchronize();
  ASSERT_FALSE(sync.ok());
  EXPECT_EQ(sync.code(), Code::kIo);
  EXPECT_TRUE(Contains(sync.message(), "cuStreamSynchronize")) << sync.ToString();
  EXPECT_TRUE(Contains(sync.message(), "CUDA_ERROR_ECC_UNCORRECTABLE")) << sync.ToString();
  EXPECT_FALSE(Contains(sync.message(), "sticky")) << sync.ToString();
  // Reported once; not sticky.
  EXPECT_TRUE((*stream)->Synchronize().ok());
  EXPECT_FALSE(rt->lost());
  EXPECT_TRUE(rt->Usable().ok());
  EXPECT_TRUE((*stream)->Copy(reinterpret_cast<void*>(b), reinterpret_cast<void*>(a), 4096).ok());
  EXPECT_TRUE((*stream)->Synchronize().ok());
  stream->reset();
  ASSERT_EQ(d().cuMemFree(a), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemFree(b), CUDA_SUCCESS);
}

// CUDA_ERROR_LAUNCH_FAILED: "any further CUDA work will return the same
// error". The call that meets it reports it (kIo, naming the call and the
// error); from then on every device operation fails fast with kUnsupported
// naming that first error and never reaches the driver; host memory is still
// classified; releases still release.
TEST_F(RuntimeTest, StickyErrorLosesTheRuntimeAndIsReportedOnce) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(d().cuMemAlloc(&a, 4096), CUDA_SUCCESS);
  ASSERT_EQ(d().cuMemAlloc(&b, 4096), CUDA_SUCCESS);
  const auto streams = ctl_.live("streams");
  const auto host_allocs = ctl_.live("host_allocs");
  auto stream = Stream::Create(*rt);
  ASSERT_TRUE(stream.ok());
  auto other = Stream::Create(*rt);
  ASSERT_TRUE(other.ok());
  auto buf = PinnedBuffer::Allocate(*rt, 4096);
  ASSERT_TRUE(buf.ok());
  ASSERT_EQ(ctl_.set_fail("cuMemcpyAsync:1:CUDA_ERROR_LAUNCH_FAILED:deferred"), 0);
  ASSERT_TRUE((*stream)->Copy(reinterpret_cast<void*>(b), reinterpret_cast<void*>(a), 4096).ok());
  Status first = (*stream)->Synchronize();
  EXPECT_EQ(first.code(), Code::kIo) << first.ToString();
  EXPECT_TRUE(Contains(first.message(), "cuStreamSynchronize: CUDA_ERROR_LAUNCH_FAILED")) << first.ToString();
  EXPECT_TRUE(Contains(first.message(), "sticky")) << first.ToString();
  ASSERT_EQ(ctl_.set_fail(""), 0);
  EXPECT_TRUE(rt->lost());

  // Every later device operation: kUnsupported naming the first error.
  const uint64_t driver_calls = ctl_.call_count("cuMemcpyAsync") + ctl_.call_count("cuStreamSynchronize") +
                                ctl_.call_count("cuStreamCreate") + ctl_.call_count("cuMemAllocHost") +
                                ctl_.call_count("cuMemHostRegister");
  auto expect_lost = [&](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Code::kUnsupported) << what << ": " << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "cuStreamSynchronize: CUDA_ERROR_LAUNCH_FAILED")) << what << ": " << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "lost")) << what << ": " << s.ToString();
  };
  expect_lost(rt->Usable(), "Usable");
  expect_lost((*stream)->Synchronize(), "Synchronize again");
  expect_lost((*other)->Synchronize(), "another stream's Synchronize");
  std::vector<uint8_t> host(4096, 1);
  expect_lost((*other)->Copy(reinterpret_cast<void*>(a), host.data(), host.size()), "Copy");
  expect_lost(Stream::Create(*rt).status(), "Stream::Create");
  expect_lost(PinnedBuffer::Allocate(*rt, 4096).status(), "PinnedBuffer::Allocate");
  HostPages pages(1 << 20);
  expect_lost(rt->host_pinner()->Pin(pages.data(), pages.size()), "Pin");
  expect_lost(rt->Classify(reinterpret_cast<void*>(a), 4096).status(), "Classify(device)");
  EXPECT_EQ(ctl_.call_count("cuMemcpyAsync") + ctl_.call_count("cuStreamSynchronize") +
                ctl_.call_count("cuStreamCreate") + ctl_.call_count("cuMemAllocHost") +
                ctl_.call_count("cuMemHostRegister"),
            driver_calls);  // failed fast
  // Host memory is still host memory.
  auto info = rt->Classify(host.data(), host.size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->kind, PointerKind::kHost);

  // Releases still release (CUDA returns the error and frees).
  stream->reset();
  other->reset();
  buf->reset();
  EXPECT_EQ(ctl_.live("streams"), streams);
  EXPECT_EQ(ctl_.live("host_allocs"), host_allocs);
  EXPECT_EQ(d().cuMemFree(a), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(d().cuMemFree(b), CUDA_ERROR_LAUNCH_FAILED);
}

// Which results lose the runtime, and "once" under concurrency: of many
// threads whose driver calls return a sticky error at the same time, exactly
// one gets the CUDA error itself (kIo), the others the "lost" error.
TEST_F(RuntimeTest, CheckLosesTheRuntimeOnStickyErrorsOnlyAndReportsOnce) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  EXPECT_TRUE(rt->Check(CUDA_SUCCESS, "cuMemAlloc").ok());
  for (CUresult r : {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_ECC_UNCORRECTABLE, CUDA_ERROR_NOT_PERMITTED,
                     CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CUDA_ERROR_UNKNOWN}) {
    Status s = rt->Check(r, "cuMemAlloc");
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(rt->lost()) << s.ToString();
  }
  constexpr int kThreads = 8;
  std::vector<Status> got(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] { got[i] = rt->Check(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize"); });
    }
  }
  int io = 0;
  for (const Status& s : got) {
    EXPECT_TRUE(Contains(s.message(), "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS")) << s.ToString();
    io += s.code() == Code::kIo ? 1 : 0;
    if (s.code() != Code::kIo) {
      EXPECT_EQ(s.code(), Code::kUnsupported) << s.ToString();
    }
  }
  EXPECT_EQ(io, 1);
  EXPECT_TRUE(rt->lost());
  // The first error is kept: a later, different sticky error is not news.
  Status later = rt->Check(CUDA_ERROR_LAUNCH_FAILED, "cuMemcpyAsync");
  EXPECT_EQ(later.code(), Code::kUnsupported);
  EXPECT_TRUE(Contains(later.message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << later.ToString();
}

TEST_F(RuntimeTest, CopyCallErrorsNameTheCall) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  auto stream = Stream::Create(*rt);
  ASSERT_TRUE(stream.ok());
  CUdeviceptr a = 0;
  ASSERT_EQ(d().cuMemAlloc(&a, 4096), CUDA_SUCCESS);
  std::vector<uint8_t> host(8192);
  // Past the end of the allocation: the call itself fails.
  Status s = (*stream)->Copy(reinterpret_cast<void*>(a), host.data(), host.size());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "cuMemcpyAsync")) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "8192 bytes")) << s.ToString();
  stream->reset();
  ASSERT_EQ(d().cuMemFree(a), CUDA_SUCCESS);
}

TEST_F(RuntimeTest, StreamAndPinnedBufferLeaveNoLeaks) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  const auto streams = ctl_.live("streams");
  const auto host_allocs = ctl_.live("host_allocs");
  {
    auto stream = Stream::Create(*rt);
    ASSERT_TRUE(stream.ok());
    auto buf = PinnedBuffer::Allocate(*rt, 3 << 20);
    ASSERT_TRUE(buf.ok()) << buf.status().ToString();
    EXPECT_EQ((*buf)->size(), size_t{3} << 20);
    EXPECT_EQ(ctl_.live("streams"), streams + 1);
    EXPECT_EQ(ctl_.live("host_allocs"), host_allocs + 1);
    auto info = rt->Classify((*buf)->data(), (*buf)->size());
    ASSERT_TRUE(info.ok());
    EXPECT_TRUE(info->registered);  // page-locked
    // Work still queued when the stream dies is waited for.
    std::vector<uint8_t> out(3 << 20);
    ASSERT_TRUE((*stream)->Copy(out.data(), (*buf)->data(), out.size()).ok());
  }
  EXPECT_EQ(ctl_.live("streams"), streams);
  EXPECT_EQ(ctl_.live("host_allocs"), host_allocs);
  EXPECT_EQ(ctl_.call_count("cuMemFreeHost"), 1u);
  EXPECT_EQ(ctl_.call_count("cuStreamDestroy"), 1u);
}

TEST_F(RuntimeTest, PinnedBufferErrors) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(PinnedBuffer::Allocate(*rt, 0).status().code(), Code::kInvalidArgument);
  ASSERT_EQ(ctl_.set_fail("cuMemAllocHost:1"), 0);
  auto buf = PinnedBuffer::Allocate(*rt, 4096);
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), Code::kNoMemory);
  EXPECT_TRUE(Contains(buf.status().message(), "cuMemAllocHost")) << buf.status().ToString();
  EXPECT_EQ(ctl_.live("host_allocs"), 0u);
}

// --- The host pinner -----------------------------------------------------------------

TEST_F(RuntimeTest, HostPinnerRegistersAndUnregisters) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  os::MemoryPinner* pinner = rt->host_pinner();
  HostPages mem(4 << 20);
  Status s = pinner->Pin(mem.data(), mem.size());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ctl_.live("registrations"), 1u);
  auto info = rt->Classify(mem.data(), mem.size());
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->registered);
  pinner->Unpin(mem.data(), mem.size());
  EXPECT_EQ(ctl_.live("registrations"), 0u);
  // Again, from a thread with no current context (the pinner brings its own).
  std::thread([&] {
    Status again = pinner->Pin(mem.data(), mem.size());
    EXPECT_TRUE(again.ok()) << again.ToString();
    EXPECT_EQ(ctl_.live("registrations"), 1u);
    pinner->Unpin(mem.data(), mem.size());
  }).join();
  EXPECT_EQ(ctl_.live("registrations"), 0u);
}

TEST_F(RuntimeTest, HostPinnerLeavesTheApplicationsRegistrationAlone) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  os::MemoryPinner* pinner = rt->host_pinner();
  HostPages mem(2 << 20);
  ASSERT_EQ(d().cuMemHostRegister(mem.data(), mem.size(), 0), CUDA_SUCCESS);  // the application's
  Status s = pinner->Pin(mem.data(), mem.size());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kExists);
  EXPECT_TRUE(Contains(s.message(), "already registered")) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED")) << s.ToString();
  const auto unregisters = ctl_.call_count("cuMemHostUnregister");
  pinner->Unpin(mem.data(), mem.size());
  EXPECT_EQ(ctl_.call_count("cuMemHostUnregister"), unregisters);
  EXPECT_EQ(ctl_.live("registrations"), 1u);
  // Still the application's to unregister.
  EXPECT_EQ(d().cuMemHostUnregister(mem.data()), CUDA_SUCCESS);
  EXPECT_EQ(ctl_.live("registrations"), 0u);
}

TEST_F(RuntimeTest, HostPinnerNotPermittedIsClearAndLeavesNoState) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  os::MemoryPinner* pinner = rt->host_pinner();
  HostPages mem(2 << 20);
  ASSERT_EQ(ctl_.set_fail("cuMemHostRegister:1:CUDA_ERROR_NOT_PERMITTED"), 0);
  Status s = pinner->Pin(mem.data(), mem.size());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_TRUE(Contains(s.message(), "cuMemHostRegister")) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "CUDA_ERROR_NOT_PERMITTED")) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "2097152 bytes")) << s.ToString();
  EXPECT_EQ(ctl_.live("registrations"), 0u);
  // Nothing to undo, and nothing remembered: a later Pin works.
  pinner->Unpin(mem.data(), mem.size());
  EXPECT_EQ(ctl_.call_count("cuMemHostUnregister"), 0u);
  Status again = pinner->Pin(mem.data(), mem.size());
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(ctl_.live("registrations"), 1u);
  pinner->Unpin(mem.data(), mem.size());
  EXPECT_EQ(ctl_.live("registrations"), 0u);
}

#endif  // CAIRN_TEST_FAKE_CUDA

}  // namespace
}  // namespace cairn::gpu
