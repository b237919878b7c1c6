// The GPU tier of the pipeline (docs/gpu.md, "Pipeline"): opening the
// runtime and the device cache, and classifying regions. The device mover
// (slots, drains device -> host in FIFO order, prefetches host -> device
// ahead of history pops) is its own component, device_mover.hpp, and its
// view of the pipeline is in stage_owners.cpp.
//
// Lock order and pins are the host cache's (pipeline.hpp): every driver call
// runs with mu_ dropped, on an entry pinned (pins > 0) so that neither its
// chunks nor its slots are freed or evicted meanwhile.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "engine/pipeline.hpp"
#include "engine/stage_owners.hpp"
#include "format/layout.hpp"
#include "gpu/cuda_driver.hpp"
#include "util/log.hpp"

namespace cairn::core {

// ---------------------------------------------------------------------------
// Opening

Status Pipeline::OpenGpu() {
  if (!gpu::kBuiltWithCuda) {
    gpu_unavailable_ = Status::Unsupported("this Cairn was built without CUDA support");
    return Status::Ok();
  }
  auto rt = gpu::Runtime::Open(config_.device);
  if (!rt.ok()) {
    // Host-only from here on: device pointers are rejected with this reason.
    gpu_unavailable_ = rt.status();
    if (config_.device_cache_bytes > 0) {
      MutexLock lock(&mu_);
      stats_.device.map_error =
          "device_cache.size is set but no GPU is usable: " + rt.status().ToString();
      util::Log(LogLevel::kWarn, "%s", stats_.device.map_error.c_str());
    }
    return Status::Ok();
  }
  gpu_ = std::move(rt).value();
  {
    MutexLock lock(&mu_);
    stats_.device.gpu = true;
    stats_.device.init = config_.device_cache_init;
  }
  if (config_.device_cache_bytes == 0) return Status::Ok();
  gpu::DeviceCacheOptions options{
      .capacity_bytes = config_.device_cache_bytes,
      .slot_bytes = static_cast<uint32_t>(config_.block_bytes),
      .init = config_.device_cache_init,
      .map_chunk_bytes = config_.device_map_chunk_bytes,
      .listener = &owners_->device_cache,
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto cache = gpu::DeviceCache::Create(*gpu_, options);
  MutexLock lock(&mu_);
  if (!cache.ok()) {
    // The cache is an accelerator, not a requirement: captures of device
    // regions then go straight to the host cache.
    stats_.device.map_error = cache.status().WithContext("device cache").ToString();
    util::Log(LogLevel::kWarn, "no device cache: %s", stats_.device.map_error.c_str());
    return Status::Ok();
  }
  dcache_ = std::move(cache).value();  // lent to the device mover by Init
  stats_.device.capacity_bytes = dcache_->capacity_bytes();
  tracer_.Span("device cache create", "init", t0, std::chrono::steady_clock::now(),
               dcache_->capacity_bytes());
  return Status::Ok();
}

Result<MemoryKind> Pipeline::ClassifyRegion(const void* p, size_t bytes) {
  if (bytes == 0 || p == nullptr) return MemoryKind::kHost;
  gpu::PointerInfo info;
  if (gpu_) {
    CAIRN_ASSIGN_OR_RETURN(info, gpu_->Classify(p, bytes));
  } else {
    // No runtime: ask the process driver, if any, so that a device pointer
    // gets a clear error instead of a host memcpy that faults.
    auto driver = gpu::Driver::Get();
    if (!driver.ok()) return MemoryKind::kHost;
    CAIRN_ASSIGN_OR_RETURN(info, gpu::ClassifyRegion(*driver, p, bytes));
  }
  switch (info.kind) {
    case MemoryKind::kHost:
      return MemoryKind::kHost;
    case MemoryKind::kDevice:
    case MemoryKind::kManaged: {
      if (!gpu_) {
        return Status::Unsupported(
            std::string(gpu::PointerKindName(info.kind)) +
            " memory, but the GPU tier is unavailable: " + gpu_unavailable_.ToString());
      }
      CAIRN_RETURN_IF_ERROR(dio_->Ensure());
      return info.kind;
    }
  }
  return MemoryKind::kHost;
}

}  // namespace cairn::core
