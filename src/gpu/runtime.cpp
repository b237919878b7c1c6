// The GPU runtime (gpu/runtime.hpp): one context, streams, page-locked
// buffers and the cuMemHostRegister pinner, over the dlopen'ed driver.
//
// Every driver call that needs a context runs under Runtime::Scope, which
// makes the Runtime's context current and puts back whatever the thread had:
// the application's own context handling (cuCtxSetCurrent on its threads) is
// never disturbed by Cairn.
#include "gpu/runtime.hpp"

#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "gpu/cuda_driver.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::gpu {

namespace {

[[maybe_unused]] std::string Hex(uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

[[maybe_unused]] Status NoCuda() {
  return Status::Unsupported(
      "built without CUDA support (cuda.h was not found at build time, or "
      "CAIRN_WITH_CUDA=OFF): device and managed memory are unavailable");
}

}  // namespace

Result<std::unique_ptr<Runtime>> Runtime::Open(int device) {
  CAIRN_ASSIGN_OR_RETURN(const Driver* driver, Driver::Get());
  return Open(*driver, device);
}

Result<PointerInfo> Runtime::Classify(const void* p, size_t bytes) const {
  Result<PointerInfo> info = [&] {
    Scope scope(*this);
    return ClassifyRegion(driver_, p, bytes);
  }();
  if (!info.ok() || info->kind == PointerKind::kHost) return info;
  // Device or managed memory of a lost context: nothing can copy it any more.
  CAIRN_RETURN_IF_ERROR(Usable());
  return info;
}

Status Runtime::Usable() const {
  if (!lost()) return Status::Ok();
  MutexLock lock(&lost_mu_);
  return Status::Unsupported(
      "the GPU is unusable: its CUDA context was lost to an earlier error (" + lost_error_.message() +
      "), and CUDA documents that the process must be restarted to use it again; device and "
      "managed regions can no longer be checkpointed or restored, host regions can");
}

#if !CAIRN_GPU_HAVE_CUDA

Result<std::unique_ptr<Runtime>> Runtime::Open(const Driver& /*driver*/, int /*device*/) {
  return NoCuda();
}
Status Runtime::Check(int /*cu_result*/, std::string_view /*call*/) const { return NoCuda(); }
Runtime::~Runtime() = default;
Runtime::Scope::Scope(const Runtime& rt) : rt_(rt) {}
Runtime::Scope::~Scope() = default;

Result<std::unique_ptr<Stream>> Stream::Create(const Runtime& /*rt*/, Synchronization /*sync*/) {
  return NoCuda();
}
Stream::~Stream() = default;
Status Stream::Copy(void* /*dst*/, const void* /*src*/, size_t /*n*/) { return NoCuda(); }
Status Stream::Synchronize() { return NoCuda(); }

Result<std::unique_ptr<PinnedBuffer>> PinnedBuffer::Allocate(const Runtime& /*rt*/,
                                                             size_t /*bytes*/) {
  return NoCuda();
}
PinnedBuffer::~PinnedBuffer() = default;

#else

namespace {

// The errors cuda.h documents as losing the context: "This leaves the process
// in an inconsistent state and any further CUDA work will return the same
// error. To continue using CUDA, the process must be terminated and
// relaunched." And CUDA_ERROR_ASSERT: "The context cannot be used anymore,
// and must be destroyed" (Cairn never destroys the context it uses). Kept
// apart from the fake driver's own list (testing/fake_cuda): each is read
// from cuda.h, so that one can catch a mistake in the other.
bool IsSticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    // By number: older cuda.h editions lack the names.
    case static_cast<CUresult>(226):  // CUDA_ERROR_CONTAINED
    case static_cast<CUresult>(721):  // CUDA_ERROR_TENSOR_MEMORY_LEAK
      return true;
    default:
      return false;
  }
}

// The host-cache pin seam over cuMemHostRegister. One registration per Pin
// (the whole cache as one range: one DMA mapping, one call). The set of
// ranges registered here is what Unpin may undo: a range the application had
// registered first (Pin returned kExists) is never unregistered by Cairn.
class HostRegisterPinner final : public os::MemoryPinner {
 public:
  explicit HostRegisterPinner(const Runtime& rt) : rt_(rt) {}

  const char* name() const override { return "cuMemHostRegister"; }

  Status Pin(void* p, size_t n) override {
    CAIRN_RETURN_IF_ERROR(rt_.Usable());
    const Driver& d = rt_.driver();
    const std::string what = std::to_string(n) + " bytes at " + Hex(reinterpret_cast<uintptr_t>(p));
    CUresult r;
    {
      Runtime::Scope scope(rt_);
      r = d.cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE);
    }
    if (r == CUDA_SUCCESS) {
      MutexLock lock(&mu_);
      mine_.insert(p);
      return Status::Ok();
    }
    if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
      // Documented as "part or all of the requested memory range is already
      // mapped" and not sticky: the range is page-locked already (by the
      // application, or by a cuMemAllocHost allocation), which is what Cairn
      // wanted; it is not ours to unregister.
      return Status::Exists("cuMemHostRegister of " + what + ": " + d.ErrorText(r) +
                            "; the range was already registered (e.g. by the application), "
                            "so Cairn uses that registration and will not unregister it");
    }
    Status s = rt_.Check(r, "cuMemHostRegister");
    std::string m = s.message() + " (registering " + what + ")";
    if (r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED) {
      m += "; this system does not let the driver page-lock host memory: the host cache stays "
           "pageable (host_cache.pin = false avoids the attempt)";
    }
    return Status(s.code(), std::move(m));
  }

  void Unpin(void* p, size_t /*n*/) override {
    {
      MutexLock lock(&mu_);
      if (mine_.erase(p) == 0) return;  // not registered by this pinner
    }
    Runtime::Scope scope(rt_);
    // Errors ignored (the memory goes away next); on a lost context too: CUDA
    // returns the sticky error, the registration is undone all the same.
    (void)rt_.Check(rt_.driver().cuMemHostUnregister(p), "cuMemHostUnregister");
  }

 private:
  const Runtime& rt_;
  Mutex mu_;
  std::set<void*> mine_ CAIRN_GUARDED_BY(mu_);  // base addresses this pinner registered
};

}  // namespace

Result<std::unique_ptr<Runtime>> Runtime::Open(const Driver& driver, int device) {
  CAIRN_RETURN_IF_ERROR(CAIRN_CU(driver, cuInit, 0));
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->driver_ = &driver;
  CUcontext ctx = nullptr;
  if (device < 0) {
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(driver, cuCtxGetCurrent, &ctx));
  }
  if (ctx != nullptr) {
    // The application's context: used, never retained or released by Cairn.
    CUdevice dev = 0;
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(driver, cuCtxGetDevice, &dev));
    rt->device_ = static_cast<int>(dev);
  } else {
    const int ordinal = device < 0 ? 0 : device;
    CUdevice dev = 0;
    Status s = CAIRN_CU(driver, cuDeviceGet, &dev, ordinal);
    if (!s.ok()) {
      return Status(s.code(), s.message() + " (device " + std::to_string(ordinal) + " of " +
                                  std::to_string(driver.device_count()) + ")");
    }
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(driver, cuDevicePrimaryCtxRetain, &ctx, dev));
    rt->device_ = static_cast<int>(dev);
    rt->retained_primary_ = true;
  }
  rt->context_ = ctx;
  rt->pinner_ = std::make_unique<HostRegisterPinner>(*rt);
  return rt;
}

Status Runtime::Check(int cu_result, std::string_view call) const {
  const auto r = static_cast<CUresult>(cu_result);
  if (r == CUDA_SUCCESS) return Status::Ok();
  Status s = driver_->Check(r, call);
  if (!IsSticky(r)) return s;
  {
    MutexLock lock(&lost_mu_);
    if (!lost_.load(std::memory_order_relaxed)) {
      // The first report: the CUDA error itself, and what it means.
      lost_error_ = s;
      lost_.store(true, std::memory_order_release);
      return Status(s.code(), s.message() +
                                  "; CUDA documents this error as sticky: the GPU context is lost, "
                                  "and Cairn makes no more device copies in this process");
    }
  }
  return Usable();  // reported already (by another thread's call, say)
}

Runtime::~Runtime() {
  pinner_.reset();
  if (retained_primary_) (void)driver_->cuDevicePrimaryCtxRelease(static_cast<CUdevice>(device_));
}

Runtime::Scope::Scope(const Runtime& rt) : rt_(rt) {
  CUcontext prev = nullptr;
  if (rt_.driver_->cuCtxGetCurrent(&prev) != CUDA_SUCCESS) prev = nullptr;
  previous_ = prev;
  if (prev != static_cast<CUcontext>(rt_.context_)) {
    // A failure here shows as CUDA_ERROR_INVALID_CONTEXT from the next call.
    switched_ = rt_.driver_->cuCtxSetCurrent(static_cast<CUcontext>(rt_.context_)) == CUDA_SUCCESS;
  }
}

Runtime::Scope::~Scope() {
  if (switched_) (void)rt_.driver_->cuCtxSetCurrent(static_cast<CUcontext>(previous_));
}

Result<std::unique_ptr<Stream>> Stream::Create(const Runtime& rt, Synchronization sync) {
  std::unique_ptr<Stream> s(new Stream(rt));
  Runtime::Scope scope(rt);
  CUstream h = nullptr;
  const unsigned flags = sync == Synchronization::kWithLegacyStream ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
  CAIRN_RETURN_IF_ERROR(rt.Usable());
  CAIRN_RETURN_IF_ERROR(rt.Check(rt.driver().cuStreamCreate(&h, flags), "cuStreamCreate"));
  s->stream_ = h;
  return s;
}

Stream::~Stream() {
  if (stream_ == nullptr) return;
  Runtime::Scope scope(rt_);
  auto h = static_cast<CUstream>(stream_);
  // A lost context's work is abandoned: nothing to wait for. Destroyed all
  // the same (CUDA returns the sticky error and releases the stream).
  if (!rt_.lost()) (void)rt_.Check(rt_.driver().cuStreamSynchronize(h), "cuStreamSynchronize");
  (void)rt_.Check(rt_.driver().cuStreamDestroy(h), "cuStreamDestroy");
}

Status Stream::Copy(void* dst, const void* src, size_t n) {
  if (n == 0) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(rt_.Usable());
  Runtime::Scope scope(rt_);
  const Driver& d = rt_.driver();
  const CUresult r = d.cuMemcpyAsync(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst)),
                                     static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src)), n,
                                     static_cast<CUstream>(stream_));
  if (r == CUDA_SUCCESS) return Status::Ok();
  Status s = rt_.Check(r, "cuMemcpyAsync");
  if (rt_.lost() && s.code() == Code::kUnsupported) return s;  // reported already
  return Status(s.code(), s.message() + " (copying " + std::to_string(n) + " bytes from " +
                              Hex(reinterpret_cast<uintptr_t>(src)) + " to " +
                              Hex(reinterpret_cast<uintptr_t>(dst)) + ")");
}

Status Stream::Synchronize() {
  CAIRN_RETURN_IF_ERROR(rt_.Usable());
  Runtime::Scope scope(rt_);
  return rt_.Check(rt_.driver().cuStreamSynchronize(static_cast<CUstream>(stream_)),
                   "cuStreamSynchronize");
}

Result<std::unique_ptr<PinnedBuffer>> PinnedBuffer::Allocate(const Runtime& rt, size_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("pinned buffer of 0 bytes");
  CAIRN_RETURN_IF_ERROR(rt.Usable());
  Runtime::Scope scope(rt);
  void* p = nullptr;
  Status s = rt.Check(rt.driver().cuMemAllocHost(&p, bytes), "cuMemAllocHost");
  if (!s.ok()) {
    return Status(s.code(), s.message() + " (a pinned buffer of " + std::to_string(bytes) +
                                " bytes)");
  }
  return std::unique_ptr<PinnedBuffer>(new PinnedBuffer(rt, static_cast<uint8_t*>(p), bytes));
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
  Runtime::Scope scope(rt_);
  (void)rt_.Check(rt_.driver().cuMemFreeHost(data_), "cuMemFreeHost");  // freed on a lost context too
}

#endif  // CAIRN_GPU_HAVE_CUDA

}  // namespace cairn::gpu
