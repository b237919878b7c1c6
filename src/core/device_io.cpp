#include "core/device_io.hpp"

#include <cstring>
#include <utility>

namespace cairn::core {

DeviceIo::DeviceIo(gpu::Runtime* rt, Status unavailable, uint64_t block_bytes, int bounce_buffers)
    : rt_(rt), unavailable_(std::move(unavailable)), block_bytes_(block_bytes), bounce_buffers_(bounce_buffers) {}

Status DeviceIo::Ensure() {
  MutexLock lock(&mu_);
  if (ready_) return Status::Ok();
  if (!rt_) return unavailable_;
  using Sync = gpu::Stream::Synchronization;
  CAIRN_ASSIGN_OR_RETURN(capture_, gpu::Stream::Create(*rt_, Sync::kWithLegacyStream));
  CAIRN_ASSIGN_OR_RETURN(drain_, gpu::Stream::Create(*rt_, Sync::kIndependent));
  {
    MutexLock rs(&restore_mu_);
    CAIRN_ASSIGN_OR_RETURN(restore_, gpu::Stream::Create(*rt_, Sync::kWithLegacyStream));
  }
  for (int i = 0; i < bounce_buffers_; ++i) {
    auto b = gpu::PinnedBuffer::Allocate(*rt_, block_bytes_);
    if (!b.ok()) {
      // Fewer staging buffers only costs overlap; none at all is an error.
      if (bounce_.empty()) return b.status().WithContext("device_cache.bounce_buffers");
      break;
    }
    bounce_.push_back(std::move(b).value());
  }
  ready_ = true;
  return Status::Ok();
}

Status DeviceIo::Copy(gpu::Stream& stream, std::span<const CopySegment> segments) {
  Status first;
  for (const auto& seg : segments) {
    if (seg.bytes == 0) continue;
    Status s = stream.Copy(seg.dst, seg.src, seg.bytes);
    if (!s.ok()) {
      first = s;
      break;
    }
  }
  // Always synchronize: nothing may still be writing into a buffer once we
  // return, even after an enqueue error.
  Status sync = stream.Synchronize();
  return first.ok() ? sync : first;
}

Status DeviceIo::CaptureCopy(std::span<const CopySegment> segments) { return Copy(*capture_, segments); }

Status DeviceIo::BackgroundCopy(std::span<const CopySegment> segments) { return Copy(*drain_, segments); }

Status DeviceIo::Drain(uint8_t* dst, const void* src, uint32_t length, uint32_t padded, bool registered) {
  Status s;
  if (registered) {
    const CopySegment seg{.dst = dst, .src = src, .bytes = length};
    s = Copy(*drain_, {&seg, 1});
  } else {
    // One block at a time: a block is the bounce buffer's size.
    const CopySegment seg{.dst = bounce_[0]->data(), .src = src, .bytes = length};
    s = Copy(*drain_, {&seg, 1});
    if (s.ok()) std::memcpy(dst, bounce_[0]->data(), length);
  }
  if (s.ok() && padded > length) std::memset(dst + length, 0, padded - length);
  return s;
}

Status DeviceIo::RestoreCopy(std::span<const CopySegment> segments) {
  CAIRN_RETURN_IF_ERROR(Ensure());
  MutexLock lock(&restore_mu_);
  return Copy(*restore_, segments);
}

}  // namespace cairn::core
