#include "driver/bench_buffer.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cairn/cairn.hpp"
#include "gpu/cuda_driver.hpp"
#include "gpu/pointer_kind.hpp"

namespace cairn::bench {
namespace {

#if CAIRN_GPU_HAVE_CUDA
// The process-wide driver with device 0's primary context current on this
// thread (the application thread, which opens the clients). Loaded once.
Result<const gpu::Driver*> BenchDriver(MemoryKind kind) {
  static const Result<const gpu::Driver*> driver = []() -> Result<const gpu::Driver*> {
    CAIRN_ASSIGN_OR_RETURN(const gpu::Driver* d, gpu::Driver::Get());
    CUdevice dev = 0;
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(*d, cuDeviceGet, &dev, 0));
    CUcontext ctx = nullptr;
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(*d, cuDevicePrimaryCtxRetain, &ctx, dev));  // kept for the process
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(*d, cuCtxSetCurrent, ctx));
    return d;
  }();
  if (!driver.ok()) {
    return Status::Unsupported(std::string("--memory ") + MemoryKindName(kind) +
                               " needs a CUDA driver: " + driver.status().message());
  }
  return driver.value();
}

CUdeviceptr Dev(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

const gpu::Driver& D() { return *BenchDriver(MemoryKind::kDevice).value(); }  // after Allocate succeeded
#endif

}  // namespace

const char* MemoryKindName(MemoryKind kind) { return gpu::PointerKindName(kind); }

Result<BenchBuffer> BenchBuffer::Allocate(MemoryKind kind, size_t bytes, bool huge_pages,
                                          bool tracked, bool touch) {
  BenchBuffer b;
  b.kind_ = kind;
  b.bytes_ = bytes;
  if (kind == MemoryKind::kHost && tracked) {
    Result<void*> p = cairn::Alloc(std::max<size_t>(bytes, 1));
    if (!p.ok()) return p.status().WithContext("cairn::Alloc (tracked application buffer)");
    b.app_ = static_cast<uint8_t*>(*p);
    b.tracked_ = true;
    // Alloc advises huge pages from 2 MiB up; the page kind stays the one
    // --app-huge-pages asks for, so that only the tracking differs from an
    // untracked run.
    if (bytes > 0) (void)::madvise(b.app_, bytes, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    if (touch) TouchPages(b.app_, bytes);
    return b;
  }
  if (kind == MemoryKind::kHost) {
    CAIRN_ASSIGN_OR_RETURN(b.host_buffer_, AllocateBuffer(bytes));
    b.app_ = b.host_buffer_.get();
    if (huge_pages && bytes > 0) (void)::madvise(b.app_, bytes, MADV_HUGEPAGE);  // 2 MiB-aligned
    if (touch) TouchPages(b.app_, bytes);
    return b;
  }
#if CAIRN_GPU_HAVE_CUDA
  CAIRN_ASSIGN_OR_RETURN(const gpu::Driver* d, BenchDriver(kind));
  CUdeviceptr p = 0;
  const size_t n = std::max<size_t>(bytes, 1);
  if (kind == MemoryKind::kDevice) {
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(*d, cuMemAlloc, &p, n));
  } else {
    CAIRN_RETURN_IF_ERROR(CAIRN_CU(*d, cuMemAllocManaged, &p, n, CU_MEM_ATTACH_GLOBAL));
  }
  b.app_ = reinterpret_cast<uint8_t*>(p);  // owned from here: ~BenchBuffer frees it
  CAIRN_RETURN_IF_ERROR(CAIRN_CU(*d, cuMemsetD8, p, 0, n));
  CAIRN_ASSIGN_OR_RETURN(b.host_, AllocateBuffer(bytes));
  TouchPages(b.host_.get(), bytes);
  return b;
#else
  return Status::Unsupported(std::string("--memory ") + MemoryKindName(kind) +
                             " needs a CUDA driver: this cairn-bench was built without CUDA "
                             "support (cuda.h not found at configure time)");
#endif
}

BenchBuffer::BenchBuffer(BenchBuffer&& other) noexcept
    : kind_(other.kind_), bytes_(other.bytes_), app_(std::exchange(other.app_, nullptr)),
      tracked_(std::exchange(other.tracked_, false)), host_buffer_(std::move(other.host_buffer_)), host_(std::move(other.host_)) {}

BenchBuffer& BenchBuffer::operator=(BenchBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    kind_ = other.kind_;
    bytes_ = other.bytes_;
    app_ = std::exchange(other.app_, nullptr);
    tracked_ = std::exchange(other.tracked_, false);
    host_buffer_ = std::move(other.host_buffer_);
    host_ = std::move(other.host_);
  }
  return *this;
}

BenchBuffer::~BenchBuffer() { Release(); }

void BenchBuffer::Release() noexcept {
  if (tracked_ && app_ != nullptr) (void)cairn::Free(app_);
  tracked_ = false;
#if CAIRN_GPU_HAVE_CUDA
  if (kind_ != MemoryKind::kHost && app_ != nullptr) (void)D().cuMemFree(Dev(app_));
#endif
  app_ = nullptr;
}

Status BenchBuffer::Upload(size_t n) {
  if (kind_ == MemoryKind::kHost || n == 0) return Status::Ok();
#if CAIRN_GPU_HAVE_CUDA
  return CAIRN_CU(D(), cuMemcpyHtoD, Dev(app_), host_.get(), n);
#else
  return Status::Unsupported("built without CUDA support");
#endif
}

Status BenchBuffer::Download(size_t n) {
  if (kind_ == MemoryKind::kHost || n == 0) return Status::Ok();
#if CAIRN_GPU_HAVE_CUDA
  return CAIRN_CU(D(), cuMemcpyDtoH, host_.get(), Dev(app_), n);
#else
  return Status::Unsupported("built without CUDA support");
#endif
}

Result<const uint8_t*> BenchBuffer::Out(uint8_t* staging, size_t n) const {
  if (kind_ == MemoryKind::kHost) return static_cast<const uint8_t*>(app_);
#if CAIRN_GPU_HAVE_CUDA
  if (n > 0) CAIRN_RETURN_IF_ERROR(CAIRN_CU(D(), cuMemcpyDtoH, staging, Dev(app_), n));
  return static_cast<const uint8_t*>(staging);
#else
  (void)staging;
  (void)n;
  return Status::Unsupported("built without CUDA support");
#endif
}

Status BenchBuffer::In(const uint8_t* src, size_t n) {
  if (src == app_ || n == 0) return Status::Ok();
  if (kind_ == MemoryKind::kHost) {
    std::memcpy(app_, src, n);
    return Status::Ok();
  }
#if CAIRN_GPU_HAVE_CUDA
  return CAIRN_CU(D(), cuMemcpyHtoD, Dev(app_), src, n);
#else
  return Status::Unsupported("built without CUDA support");
#endif
}

Result<DeviceLimits> MeasureDeviceLimits(BenchBuffer& app, bool quiet) {
  DeviceLimits lim;
  lim.bytes = std::min<uint64_t>(app.size(), 256ull << 20);
  if (app.kind() == MemoryKind::kHost || lim.bytes == 0) return lim;
#if CAIRN_GPU_HAVE_CUDA
  const gpu::Driver& d = D();
  CUdeviceptr tmp = 0;
  CAIRN_RETURN_IF_ERROR(CAIRN_CU(d, cuMemAlloc, &tmp, lim.bytes).WithContext("device limits"));
  auto timed = [&](auto copy) -> Result<double> {
    std::vector<double> t;
    for (int i = 0; i <= 3; ++i) {  // the first is a warm-up
      const Clock::time_point t0 = Clock::now();
      CAIRN_RETURN_IF_ERROR(copy());
      CAIRN_RETURN_IF_ERROR(CAIRN_CU(d, cuCtxSynchronize));
      if (i > 0) t.push_back(Seconds(t0, Clock::now()));
    }
    const double m = Median(t);
    return m > 0 ? static_cast<double>(lim.bytes) / m / 1e9 : 0.0;
  };
  uint8_t* host = app.host();
  Result<double> htod = timed([&] { return CAIRN_CU(d, cuMemcpyHtoD, tmp, host, lim.bytes); });
  Result<double> dtoh =
      htod.ok() ? timed([&] { return CAIRN_CU(d, cuMemcpyDtoH, host, tmp, lim.bytes); }) : htod;
  Result<double> dtod =
      dtoh.ok() ? timed([&] { return CAIRN_CU(d, cuMemcpyDtoD, tmp, Dev(app.app()), lim.bytes); })
                : dtoh;
  (void)d.cuMemFree(tmp);
  if (!dtod.ok()) return dtod.status().WithContext("device limits");
  lim.htod_gbps = *htod;
  lim.dtoh_gbps = *dtoh;
  lim.dtod_gbps = *dtod;
  if (!quiet) {
    std::fprintf(stderr, "device limits: HtoD %.2f GB/s, DtoH %.2f GB/s, DtoD %.2f GB/s [%llu MiB]\n",
                 lim.htod_gbps, lim.dtoh_gbps, lim.dtod_gbps,
                 static_cast<unsigned long long>(lim.bytes >> 20));
  }
  return lim;
#else
  (void)quiet;
  return Status::Unsupported("built without CUDA support");
#endif
}

}  // namespace cairn::bench
