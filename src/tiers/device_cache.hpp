// The device cache: GPU memory Cairn owns, cut into equal slots (one slot
// holds one file block), where captures of device and managed regions land
// first (HiPC'22, sections II and IV-A; docs/gpu.md, "Device cache").
//
// Two ways to get the memory (device_cache.init):
//   kDirect       one cuMemAlloc of the whole cache in Create (the paper's
//                 baseline: Open waits for all of it);
//   kIncremental  Create only reserves the virtual range (cuMemAddressReserve)
//                 and starts a mapping thread that backs it chunk by chunk
//                 (cuMemCreate + cuMemMap + cuMemSetAccess), lowest addresses
//                 first, while captures proceed. Slots become usable as their
//                 chunk is mapped: mapped_slots() grows until slot_count().
//
// A mapping failure (cuMemCreate out of memory, say) stops the mapping: the
// cache keeps the slots mapped so far (possibly none), mapping_done() turns
// true and map_error() says why. That is the documented fallback, not an
// error: the pipeline works with the smaller cache (or none: device regions
// then go straight to the host cache).
//
// A lost context (gpu/runtime.hpp: a sticky CUDA error, seen here or by any
// other user of the Runtime) stops the mapping the same way, with that error
// in map_error(); Create on a lost context returns Runtime::Usable()'s error.
// The destructor releases everything on a lost context too.
//
// Slot bookkeeping (Allocate/Free) is not thread-safe: the pipeline calls it
// under its mutex. mapped_slots()/mapping_done() are atomics, safe anywhere.
// The listener's Mapped() is called by the mapping thread, with no lock of
// the cache held, after each chunk is mapped and once when mapping ends; the
// pipeline uses it to wake captures waiting for slots. It is not called for
// kDirect (Create returns a fully mapped cache) nor when the destructor
// stopped the mapping (the pipeline is tearing down).
//
// This header has no CUDA types (addresses are uintptr_t == CUdeviceptr).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/status.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::gpu {

class Runtime;

// Who is told of the incremental mapping's progress (the pipeline).
class MappingListener {
 public:
  // More slots are mapped, or the mapping ended (see above).
  virtual void Mapped() = 0;

 protected:
  ~MappingListener() = default;
};

struct DeviceCacheOptions {
  uint64_t capacity_bytes = 0;  // rounded down to whole slots; >= 1 slot
  uint32_t slot_bytes = 0;      // > 0 (the pipeline's block size)
  DeviceCacheInit init = DeviceCacheInit::kIncremental;
  // Incremental: bytes mapped per cuMemCreate/cuMemMap call. Rounded up to the
  // allocation granularity (cuMemGetAllocationGranularity, recommended) and
  // clamped to the reservation; the reservation itself is the capacity
  // rounded up to the granularity.
  uint64_t map_chunk_bytes = 1ull << 30;
  MappingListener* listener = nullptr;  // see above; null: none; outlives the cache
};

class DeviceCache {
 public:
  // Precondition: runtime outlives the cache. kDirect: cuMemAlloc failure is
  // returned (kNoMemory naming device_cache.size). kIncremental: reserve
  // failure is returned; mapping failures are not (see above).
  static Result<std::unique_ptr<DeviceCache>> Create(const Runtime& runtime,
                                                     const DeviceCacheOptions& options);
  // Stops and joins the mapping thread, then unmaps and releases everything.
  // Precondition: no copy into or out of the cache is still running.
  ~DeviceCache();
  DeviceCache(const DeviceCache&) = delete;
  DeviceCache& operator=(const DeviceCache&) = delete;

  uint32_t slot_count() const { return slot_count_; }
  uint32_t slot_bytes() const { return slot_bytes_; }
  uint64_t capacity_bytes() const { return uint64_t{slot_count_} * slot_bytes_; }
  DeviceCacheInit init() const { return init_; }

  // Slots [0, mapped_slots()) are backed by device memory. Monotonic.
  uint32_t mapped_slots() const { return mapped_slots_.load(std::memory_order_acquire); }
  uint64_t mapped_bytes() const { return uint64_t{mapped_slots()} * slot_bytes_; }
  // Mapping has ended: every slot is mapped, or a failure stopped it.
  bool mapping_done() const { return mapping_done_.load(std::memory_order_acquire); }
  bool fully_mapped() const { return mapped_slots() == slot_count_; }
  // Why mapping stopped early ("" = it did not). Valid once mapping_done().
  std::string map_error() const;
  // Seconds from Create to the end of mapping (-1 while mapping).
  double mapping_seconds() const;
  // Device allocations made: chunks mapped (kIncremental), 1 (kDirect).
  uint64_t map_calls() const { return map_calls_.load(std::memory_order_relaxed); }
  // kIncremental: the reservation (capacity rounded up to the granularity)
  // and the bytes per chunk after rounding; 0 for kDirect.
  uint64_t reserved_bytes() const { return reserved_bytes_; }
  uint64_t map_chunk_bytes() const { return map_chunk_; }

  // Device address of a slot (a CUdeviceptr). Precondition: slot < slot_count().
  uintptr_t address(uint32_t slot) const { return base_ + uint64_t{slot} * slot_bytes_; }

  // The lowest free mapped slot, or nullopt (none free, or none mapped yet).
  std::optional<uint32_t> Allocate();
  // Precondition: slot was allocated and not yet freed.
  void Free(uint32_t slot);
  uint32_t free_mapped_count() const;  // free slots below mapped_slots()
  uint32_t used_count() const { return used_; }

 private:
  DeviceCache() = default;
  void MapLoop(std::stop_token stop);
  // Records the end of mapping (error "" = complete) and publishes it.
  void FinishMapping(std::string error);
  void FreeEverySlot();  // Create, once the memory (or the range) is there

  const Runtime* runtime_ = nullptr;
  DeviceCacheInit init_ = DeviceCacheInit::kIncremental;
  uintptr_t base_ = 0;
  uint64_t reserved_bytes_ = 0;  // incremental: the reservation's size
  uint64_t map_chunk_ = 0;
  uint32_t slot_bytes_ = 0;
  uint32_t slot_count_ = 0;
  MappingListener* listener_ = nullptr;
  std::chrono::steady_clock::time_point started_{};  // Create, for mapping_seconds
  std::atomic<uint32_t> mapped_slots_{0};
  std::atomic<bool> mapping_done_{false};
  std::atomic<uint64_t> map_calls_{0};
  // Guards the mapping records and the error text. cairn::Mutex, not
  // std::mutex: Clang's -Wthread-safety only checks annotated capabilities.
  mutable Mutex mu_;
  std::string map_error_ CAIRN_GUARDED_BY(mu_);
  double mapping_seconds_ CAIRN_GUARDED_BY(mu_) = -1;
  // Incremental: (offset, size, handle) of each mapped chunk, for teardown.
  struct MappedChunk {
    uint64_t offset = 0;
    uint64_t size = 0;
    unsigned long long handle = 0;  // CUmemGenericAllocationHandle
  };
  std::vector<MappedChunk> chunks_ CAIRN_GUARDED_BY(mu_);
  // Slot bookkeeping (the pipeline's mutex).
  std::set<uint32_t> free_;  // every slot starts free; only mapped ones are handed out
  uint32_t used_ = 0;
  std::jthread mapper_;  // declared last: joined first
};

}  // namespace cairn::gpu
