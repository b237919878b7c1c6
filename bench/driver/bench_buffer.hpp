// Where the application's buffer lives (--memory host|device|managed), behind
// one type, BenchBuffer, so that the workloads and the baseline do not care.
//
// The application data is always generated and checked on the host: a
// BenchBuffer has the application memory (what Cairn's Protect/Push/Pop and
// the sync baseline see: a host pointer, a cuMemAlloc device pointer or a
// cuMemAllocManaged pointer) and a host view of it (host(): the memory itself
// for host buffers, a separate host mirror otherwise). The workloads write
// the pattern into the host view and Upload() it (cuMemcpyHtoD), and
// Download() (cuMemcpyDtoH) before verifying it: for host buffers both are
// no-ops. The CPU never touches device or managed application memory
// directly, so managed pages stay wherever the driver placed them.
//
// Device and managed memory come from the CUDA driver that Cairn loads at run
// time (gpu::Driver::Get(): $CAIRN_CUDA_DRIVER, else libcuda.so.1), with
// device 0's primary context made current on the calling thread (Cairn's
// `device = -1` then uses it too). Without a driver, Allocate fails with
// kUnsupported "--memory device needs a CUDA driver: <why>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "driver/bench.hpp"
#include "cairn/status.hpp"
#include "common/files.hpp"

namespace cairn::bench {

class BenchBuffer {
 public:
  // `bytes` of application memory of `kind`, and its host view; both touched
  // once (host pages written, device memory zeroed) so no trial pays
  // first-touch.
  // huge_pages: madvise(MADV_HUGEPAGE) the host buffer (else it gets what
  // an application's malloc gets: small pages unless THP is "always").
  // tracked (host only): the memory comes from cairn::Alloc, page-aligned
  // memory that checkpoint.changes = pages can track (restart --changes
  // pages|auto); huge_pages still decides its page kind.
  // touch (host only): write every page now, so that the first use does not
  // fault; off leaves the memory as a fresh malloc is.
  static Result<BenchBuffer> Allocate(MemoryKind kind, size_t bytes, bool huge_pages = false,
                                      bool tracked = false, bool touch = true);

  BenchBuffer(BenchBuffer&& other) noexcept;
  BenchBuffer& operator=(BenchBuffer&& other) noexcept;
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  ~BenchBuffer();

  MemoryKind kind() const { return kind_; }
  size_t size() const { return bytes_; }
  // The application memory, as given to Cairn and the baseline. Not
  // dereferenceable on the host unless kind() == kHost.
  uint8_t* app() const { return app_; }
  // The host view: where content is generated and checked.
  uint8_t* host() const { return host_ != nullptr ? host_.get() : app_; }

  // host view -> application memory, bytes [0, n). No-op for host memory.
  Status Upload(size_t n);
  // application memory -> host view, bytes [0, n). No-op for host memory.
  Status Download(size_t n);
  // Application memory [0, n) -> `dst` (host memory): what the baseline writes.
  // For host memory no copy is needed: Out() returns app() itself.
  Result<const uint8_t*> Out(uint8_t* staging, size_t n) const;
  // `src` (host memory) -> application memory [0, n): after the baseline read
  // into staging. No-op when src == app().
  Status In(const uint8_t* src, size_t n);

 private:
  BenchBuffer() = default;
  void Release() noexcept;

  MemoryKind kind_ = MemoryKind::kHost;
  size_t bytes_ = 0;
  uint8_t* app_ = nullptr;  // host: host_buffer_'s memory (or cairn::Alloc's); else device/managed
  bool tracked_ = false;    // app_ came from cairn::Alloc
  Buffer host_buffer_;      // host memory: the application memory itself
  Buffer host_;             // device/managed: the host mirror
};

// "host", "device", "managed".
const char* MemoryKindName(MemoryKind kind);

// Device copy bandwidths, measured like the memcpy limit (median of 3 after a
// warm-up) between a device buffer of the application's size (at most
// 256 MiB) and the (pageable) host view. Only for device/managed buffers.
struct DeviceLimits {
  double htod_gbps = 0;  // cuMemcpyHtoD, pageable host -> device
  double dtoh_gbps = 0;  // cuMemcpyDtoH, device -> pageable host
  double dtod_gbps = 0;  // cuMemcpyDtoD within the device
  uint64_t bytes = 0;
};
Result<DeviceLimits> MeasureDeviceLimits(BenchBuffer& app, bool quiet);

}  // namespace cairn::bench
