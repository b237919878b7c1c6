// The GPU tier of the pipeline (docs/gpu.md, "Pipeline"): the device cache's
// slots, the device mover thread (drain device -> host in FIFO order, then
// prefetch host -> device ahead of history pops) and the copies that involve
// device or managed memory.
//
// Lock order and pins are the host cache's (pipeline.hpp): every driver call
// runs with mu_ dropped, on an entry pinned (pins > 0) so that neither its
// chunks nor its slots are freed or evicted meanwhile.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/pipeline.hpp"
#include "format/layout.hpp"
#include "gpu/cuda_driver.hpp"
#include "util/clock.hpp"

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
      stats_.device.map_error = "device_cache.size is set but no GPU is usable: " + rt.status().ToString();
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
      // Called by the mapping thread, which holds no lock of ours; taking
      // mu_ orders the wake-up after any waiter's predicate check.
      .on_progress =
          [this] {
            MutexLock l(&mu_);
            cv_app_.notify_all();
            device_mover_.Wake();
          },
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto cache = gpu::DeviceCache::Create(*gpu_, options);
  MutexLock lock(&mu_);
  if (!cache.ok()) {
    // The cache is an accelerator, not a requirement: captures of device
    // regions then go straight to the host cache.
    stats_.device.map_error = cache.status().WithContext("device cache").ToString();
    std::fprintf(stderr, "cairn: no device cache: %s\n", stats_.device.map_error.c_str());
    return Status::Ok();
  }
  dcache_ = std::move(cache).value();
  device_tier_.Attach(dcache_.get());
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
    case gpu::PointerKind::kHost: return MemoryKind::kHost;
    case gpu::PointerKind::kDevice:
    case gpu::PointerKind::kManaged: {
      const MemoryKind kind = info.kind == gpu::PointerKind::kDevice ? MemoryKind::kDevice : MemoryKind::kManaged;
      if (!gpu_) {
        return Status::Unsupported(std::string(gpu::PointerKindName(info.kind)) +
                                   " memory, but the GPU tier is unavailable: " +
                                   gpu_unavailable_.ToString());
      }
      CAIRN_RETURN_IF_ERROR(dio_->Ensure());
      return kind;
    }
  }
  return MemoryKind::kHost;
}

// ---------------------------------------------------------------------------
// Slots

bool Pipeline::DeviceCacheUsable() const {
  return dcache_ && (dcache_->mapped_slots() > 0 || !dcache_->mapping_done());
}

std::optional<uint32_t> Pipeline::TryAcquireSlot() {
  return device_tier_.TryAcquire([](gpu::DeviceCache& cache) { return cache.Allocate(); });
}

std::optional<int32_t> Pipeline::AcquireSlot() {
  for (;;) {
    if (!DeviceCacheUsable()) return std::nullopt;
    if (auto s = TryAcquireSlot()) return static_cast<int32_t>(*s);
    // Waiting for the mapping thread, or for the device mover to drain.
    WaitAsCaptureBlocked(
        dcache_->mapping_done() ? "blocked: device cache full" : "blocked: device cache mapping",
        /*device=*/true);
  }
}

void Pipeline::DropSlot(Entry& e, uint32_t block) {
  if (device_tier_.Drop(e, block)) cv_app_.notify_all();  // a capture may take the slot
}

// ---------------------------------------------------------------------------
// The device mover

bool Pipeline::DrainsPending() const {
  const auto& in_hand = device_mover_.in_hand();
  return !device_mover_.queue().empty() || (in_hand && in_hand->drain);
}

// Copies one captured block from its device slot into a host chunk, where the
// checksum and flush stages take over. Drops mu_ for the copy.
void Pipeline::DrainBlock(const EntryPtr& e, uint32_t block) {
  BlockState& bs = e->blocks[block];
  // Popped before it was drained (served from the device), or its flush
  // failed: the slot is evictable, nothing goes to the host.
  auto nothing_to_drain = [&]() CAIRN_REQUIRES(mu_) {
    if (!e->consumed && !e->failed() && bs.dsealed) return false;
    if (e->consumed) {
      if (e->pins == 0) DropSlot(*e, block);
    } else {
      device_tier_.MarkClean(*e, block);
    }
    cv_app_.notify_all();
    return true;
  };
  if (nothing_to_drain()) return;
  const uint32_t length = e->layout.blocks[block].length;
  const uint32_t padded = static_cast<uint32_t>(format::AlignUp(length));
  // Room in the host cache first, with the entry not pinned: a pin would
  // keep the entry's own flushed blocks from being evicted, and a checkpoint
  // larger than the host cache would wait for itself. The slot cannot go
  // meanwhile: it is neither device-clean (evictable) nor released unless
  // the entry is consumed, which is checked again below.
  const int32_t chunk = AcquireChunk(padded, nullptr, /*app=*/false);
  if (nothing_to_drain()) {  // it notified the waiters
    cache_->Free(static_cast<uint32_t>(chunk));
    return;
  }
  bs.chunk = chunk;
  ++e->pins;  // the slot and the chunk stay while we copy
  uint8_t* dst = cache_->data(static_cast<uint32_t>(chunk));
  const auto* src = reinterpret_cast<const void*>(dcache_->address(static_cast<uint32_t>(bs.slot)));
  const bool registered = initializer_.host_registered();
  UseBandwidth(+1, /*capture=*/false);
  const auto t0 = std::chrono::steady_clock::now();
  auto t1 = t0;
  Status s;
  {
    MutexUnlock unlocked(&mu_);  // the device -> host copy
    s = dio_->Drain(dst, src, length, padded, registered);
    t1 = std::chrono::steady_clock::now();
  }
  UseBandwidth(-1, /*capture=*/false);
  if (!s.ok()) {
    cache_->Free(static_cast<uint32_t>(chunk));
    bs.chunk = -1;
    Unpin(e);
    if (!e->consumed) {
      // The copy in the device cache stays restorable while resident; the
      // version can never be flushed.
      FailEntry(e, s.WithContext("device -> host copy of '" + e->name + "' " + std::to_string(e->number) +
                                 " block " + std::to_string(block)));
      device_tier_.MarkClean(*e, block);
    }
    return;
  }
  bs.sealed = true;
  ++e->sealed_blocks;
  ++e->resident_blocks;
  stats_.device.drain.bytes += length;
  stats_.device.drain.seconds += SecondsBetween(t0, t1);
  if (!registered) stats_.device.bounce_bytes += length;
  if (block + 1 == e->blocks.size()) stats_.device.drain.ops += 1;
  if (e->failed() || e->consumed) {
    host_tier_.MarkClean(*e, block);
  } else {
    dirty_bytes_ += length;
    checksummer_.Push(e, block);
  }
  device_tier_.MarkClean(*e, block);  // the host tier has it now
  tracer_.Span("drain", "device", t0, t1, length, e->name, e->number);
  Unpin(e);
  TraceCache();
}


// The next history step worth copying host -> device, or
// nullptr: the same order as the host prefetcher (highest step first, within
// history.prefetch_depth), for device/managed steps whose blocks are all in
// the host cache but not all in the device cache, when room can be made
// without evicting anything needed sooner.
EntryPtr Pipeline::FindDevicePrefetchTarget() {
  if (!dcache_ || !dcache_->mapping_done() || dcache_->mapped_slots() == 0) return nullptr;
  return WalkPoppedSteps(catalog_, config_.prefetch_depth, [this](const Entry& e) CAIRN_REQUIRES(mu_) {
    if (e.layout.regions.empty()) return StepVerdict::kSkip;
    if (e.layout.regions[0].spec.memory == MemoryKind::kHost) return StepVerdict::kNextHistory;  // not a device history
    if (e.fully_in_device() || e.device_prefetching || !e.capture_done) return StepVerdict::kAhead;
    if (e.device_prefetch_failed || e.failed()) return StepVerdict::kSkip;
    if (!e.fully_resident()) return StepVerdict::kNextHistory;  // the host prefetcher brings it first
    if (e.blocks.size() > dcache_->mapped_slots()) return StepVerdict::kSkip;
    size_t missing = 0;
    for (uint32_t b = 0; b < e.blocks.size(); ++b) missing += e.in_device(b) ? 0 : 1;
    return device_tier_.HasRoomFor(e, dcache_->free_mapped_count(), missing) ? StepVerdict::kTake
                                                                              : StepVerdict::kWait;
  });
}

// Copies a host-resident step into device slots. Drops mu_ for the copies.
void Pipeline::DevicePrefetch(const EntryPtr& e) {
  const auto t0 = std::chrono::steady_clock::now();
  e->device_prefetching = true;
  ++e->pins;  // its host chunks stay while we read them
  std::vector<CopySegment> segments;
  std::vector<uint32_t> filled;
  for (uint32_t b = 0; b < e->blocks.size(); ++b) {
    if (e->in_device(b)) continue;
    BlockState& bs = e->blocks[b];
    auto slot = device_tier_.TryAcquire([](gpu::DeviceCache& d) { return d.Allocate(); }, e->seq);
    // FindDevicePrefetchTarget counted the room under this same lock.
    if (!slot) break;
    bs.slot = static_cast<int32_t>(*slot);
    filled.push_back(b);
    segments.push_back({.dst = reinterpret_cast<void*>(dcache_->address(*slot)),
                        .src = cache_->data(static_cast<uint32_t>(bs.chunk)),
                        .bytes = e->layout.blocks[b].length});
  }
  Status s;
  {
    MutexUnlock unlocked(&mu_);  // host -> device copies
    s = dio_->BackgroundCopy(segments);
  }
  e->device_prefetching = false;
  uint64_t bytes = 0;
  for (uint32_t b : filled) {
    BlockState& bs = e->blocks[b];
    if (s.ok()) {
      bs.dsealed = true;
      device_tier_.MarkClean(*e, b);  // still in the host tier too
      bytes += e->layout.blocks[b].length;
    } else {
      DropSlot(*e, b);
    }
  }
  if (!s.ok()) {
    // Pops then copy from the host cache; nothing is lost.
    e->device_prefetch_failed = true;
    std::fprintf(stderr, "cairn: device prefetch of '%s' step %lld failed: %s\n", e->name.c_str(),
                 static_cast<long long>(e->number), s.ToString().c_str());
  } else {
    stats_.device.prefetch.bytes += bytes;
    stats_.device.prefetch.ops += 1;
    stats_.device.prefetch.seconds += SecondsSince(t0);
    tracer_.Span("device prefetch", "prefetch", t0, std::chrono::steady_clock::now(), bytes, e->name,
                 e->number);
  }
  Unpin(e);
}

}  // namespace cairn::core
