// Copies between application memory and the host cache, by memory kind. The
// seam for the GPU backend: device and managed regions will copy through the
// CUDA driver (device->device cache->host cache); this build has host only,
// and Pipeline::Capture rejects other kinds before copying.
#pragma once

#include <cstddef>
#include <cstring>

#include "cairn/cairn.hpp"

namespace cairn::core {

// Precondition: kind == MemoryKind::kHost (checked by the callers).
inline void CopyIn(MemoryKind /*kind*/, void* cache_dst, const void* app_src, size_t n) {
  std::memcpy(cache_dst, app_src, n);
}
inline void CopyOut(MemoryKind /*kind*/, void* app_dst, const void* cache_src, size_t n) {
  std::memcpy(app_dst, cache_src, n);
}

}  // namespace cairn::core
