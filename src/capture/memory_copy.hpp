// Copies between application memory and the host cache, by memory kind. The
// seam for the GPU backend: device and managed regions will copy through the
// CUDA driver (device->device cache->host cache); this build has host only,
// and Pipeline::Capture rejects other kinds before copying.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>

#include "cairn/cairn.hpp"
#include "capture/copy_engine.hpp"

namespace cairn::core {

// Precondition: kind == MemoryKind::kHost (checked by the callers).
inline void CopyIn(MemoryKind /*kind*/, CopyEngine& engine, std::span<const CopySegment> segments,
                   CopyEngine::Stores stores = CopyEngine::Stores::kCached) {
  engine.Copy(segments, stores);
}
inline void CopyOut(MemoryKind /*kind*/, CopyEngine& engine, std::span<const CopySegment> segments) {
  engine.Copy(segments);
}

}  // namespace cairn::core
