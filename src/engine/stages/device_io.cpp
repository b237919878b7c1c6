#include "engine/stages/device_io.hpp"

#include <algorithm>
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
    s = DrainBounced(dst, static_cast<const uint8_t*>(src), length);
  }
  if (s.ok() && padded > length) std::memset(dst + length, 0, padded - length);
  return s;
}

// Pieces alternate between the bounce buffers: the DMA of piece i + 1 runs
// while piece i is copied out of its buffer, so a drain costs about the
// slower of the link and the memcpy, not their sum (measured on an H200, the
// serial form drained at 0.2x of the link). One buffer: the block in one piece.
Status DeviceIo::DrainBounced(uint8_t* dst, const uint8_t* src, uint32_t length) {
  const size_t buffers = bounce_.size();
  const uint64_t piece = buffers > 1 ? std::min<uint64_t>(block_bytes_, std::max<uint64_t>(block_bytes_ / 4, 4096))
                                     : block_bytes_;
  const uint64_t pieces = (length + piece - 1) / piece;
  auto bytes_of = [&](uint64_t i) { return std::min<uint64_t>(piece, length - i * piece); };
  auto enqueue = [&](uint64_t i) { return drain_->Copy(bounce_[i % buffers]->data(), src + i * piece, bytes_of(i)); };
  Status s = pieces > 0 ? enqueue(0) : Status::Ok();
  Status sync = drain_->Synchronize();
  for (uint64_t i = 0; s.ok() && sync.ok() && i < pieces; ++i) {
    if (i + 1 < pieces) s = enqueue(i + 1);  // into the other buffer
    std::memcpy(dst + i * piece, bounce_[i % buffers]->data(), bytes_of(i));
    // Always: nothing may still be writing into a buffer once we return.
    sync = drain_->Synchronize();
  }
  return s.ok() ? sync : s;
}

Status DeviceIo::RestoreCopy(std::span<const CopySegment> segments) {
  CAIRN_RETURN_IF_ERROR(Ensure());
  MutexLock lock(&restore_mu_);
  return Copy(*restore_, segments);
}

}  // namespace cairn::core
