// The GPU tier's copy machinery (docs/gpu.md): the capture, drain and restore
// streams and the drain's page-locked bounce buffers, made on first device
// use (Ensure), and the copies that run on them. Its own locks: mu_ (the
// one-time creation) and restore_mu_ (one restore or pop copy at a time).
//
// Who uses which stream: the capture stream, the capturing application
// thread (captures are serialized by the pipeline's capture_mu_); the drain
// stream and the bounce buffers, the device mover alone; the restore stream,
// any application thread, one at a time. The application's copies order
// after its own work on the legacy default stream (a checkpoint sees the
// kernels launched before it; a restore does not race them); the background
// copies never wait for it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cairn/status.hpp"
#include "capture/copy_engine.hpp"
#include "gpu/runtime.hpp"
#include "util/mutex.hpp"

namespace cairn::core {

class DeviceIo {
 public:
  // rt: the GPU runtime, or null when there is none (Ensure then returns
  // `unavailable`, which says why). block_bytes: a bounce buffer's size.
  DeviceIo(gpu::Runtime* rt, Status unavailable, uint64_t block_bytes, int bounce_buffers);
  DeviceIo(const DeviceIo&) = delete;
  DeviceIo& operator=(const DeviceIo&) = delete;

  // Makes the streams and bounce buffers once; later calls return at once.
  Status Ensure() CAIRN_EXCLUDES(mu_, restore_mu_);

  // Preconditions of the next three: Ensure() succeeded. Each copies every
  // segment (any memory kinds) and synchronizes, even after an error.
  // The capture stream: one caller at a time (the pipeline's capture_mu_).
  Status CaptureCopy(std::span<const CopySegment> segments);
  // The drain stream: the device mover only (host -> device prefetches).
  Status BackgroundCopy(std::span<const CopySegment> segments);
  // The drain stream: one device block into host memory at dst, the tail up
  // to `padded` zeroed. registered: dst is page-locked (DMA straight into
  // it); otherwise through the bounce buffers, in pieces that overlap the
  // link with the copy out (a pageable destination would make the driver
  // stage the copy itself, synchronously and slower).
  Status Drain(uint8_t* dst, const void* src, uint32_t length, uint32_t padded, bool registered);

  // The restore stream, any thread (calls Ensure itself).
  Status RestoreCopy(std::span<const CopySegment> segments) CAIRN_EXCLUDES(mu_, restore_mu_);

 private:
  static Status Copy(gpu::Stream& stream, std::span<const CopySegment> segments);
  Status DrainBounced(uint8_t* dst, const uint8_t* src, uint32_t length);

  gpu::Runtime* const rt_;
  const Status unavailable_;
  const uint64_t block_bytes_;
  const int bounce_buffers_;

  Mutex mu_;
  bool ready_ CAIRN_GUARDED_BY(mu_) = false;
  // Written once by Ensure (under mu_, before ready_), constant after: the
  // copies read them without a lock, after their caller's Ensure succeeded.
  std::unique_ptr<gpu::Stream> capture_;
  std::unique_ptr<gpu::Stream> drain_;
  std::vector<std::unique_ptr<gpu::PinnedBuffer>> bounce_;
  Mutex restore_mu_ CAIRN_ACQUIRED_AFTER(mu_);
  std::unique_ptr<gpu::Stream> restore_ CAIRN_GUARDED_BY(restore_mu_);
};

}  // namespace cairn::core
