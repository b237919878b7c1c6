// The device cache (tiers/device_cache.hpp): slots of device memory, allocated
// at once (kDirect) or reserved and mapped chunk by chunk by a background
// thread (kIncremental) so that the first captures need not wait for all of
// it (HiPC'22, section IV-A; docs/gpu.md, "Device cache").
#include "tiers/device_cache.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "gpu/cuda_driver.hpp"
#include "gpu/runtime.hpp"
#include "util/clock.hpp"

namespace cairn::gpu {

namespace {

[[maybe_unused]] uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

}  // namespace

std::string DeviceCache::map_error() const {
  MutexLock lock(&mu_);
  return map_error_;
}

double DeviceCache::mapping_seconds() const {
  MutexLock lock(&mu_);
  return mapping_seconds_;
}

std::optional<uint32_t> DeviceCache::Allocate() {
  auto it = free_.begin();
  // Only mapped slots are handed out; free_ is ordered, so the lowest free
  // slot is the only candidate (all free slots above it are higher still).
  if (it == free_.end() || *it >= mapped_slots()) return std::nullopt;
  const uint32_t slot = *it;
  free_.erase(it);
  ++used_;
  return slot;
}

void DeviceCache::Free(uint32_t slot) {
  if (free_.insert(slot).second) --used_;
}

uint32_t DeviceCache::free_mapped_count() const {
  // Every allocated slot lies below mapped_slots() (Allocate hands out no
  // other), and mapped_slots() never shrinks.
  return mapped_slots() - used_;
}

void DeviceCache::FinishMapping(std::string error) {
  {
    MutexLock lock(&mu_);
    map_error_ = std::move(error);
    mapping_seconds_ = SecondsSince(started_);
  }
  mapping_done_.store(true, std::memory_order_release);
}

#if !CAIRN_GPU_HAVE_CUDA

Result<std::unique_ptr<DeviceCache>> DeviceCache::Create(const Runtime& /*runtime*/,
                                                         const DeviceCacheOptions& /*options*/) {
  return Status::Unsupported(
      "built without CUDA support (cuda.h was not found at build time, or "
      "CAIRN_WITH_CUDA=OFF): no device cache");
}

DeviceCache::~DeviceCache() = default;

void DeviceCache::MapLoop(std::stop_token /*stop*/) {}

#else

// Once the memory is there: a size the device cannot give fails before any
// per-slot bookkeeping is made (a set node per slot: 1 TiB of 1 MiB slots is
// a million of them).
void DeviceCache::FreeEverySlot() {
  for (uint32_t i = 0; i < slot_count_; ++i) free_.insert(free_.end(), i);
}

Result<std::unique_ptr<DeviceCache>> DeviceCache::Create(const Runtime& runtime,
                                                         const DeviceCacheOptions& options) {
  if (options.slot_bytes == 0) return Status::InvalidArgument("device cache slot size of 0 bytes");
  const uint64_t slots = options.capacity_bytes / options.slot_bytes;
  if (slots == 0) {
    return Status::InvalidArgument("device cache of " + std::to_string(options.capacity_bytes) +
                                   " bytes (device_cache.size) holds no slot of " +
                                   std::to_string(options.slot_bytes) + " bytes");
  }
  if (slots > std::numeric_limits<uint32_t>::max()) {
    return Status::InvalidArgument("device cache of " + std::to_string(options.capacity_bytes) +
                                   " bytes has too many slots of " +
                                   std::to_string(options.slot_bytes) + " bytes");
  }

  std::unique_ptr<DeviceCache> c(new DeviceCache());
  c->runtime_ = &runtime;
  c->init_ = options.init;
  c->slot_bytes_ = options.slot_bytes;
  c->slot_count_ = static_cast<uint32_t>(slots);
  c->listener_ = options.listener;
  c->started_ = std::chrono::steady_clock::now();
  const uint64_t capacity = c->capacity_bytes();
  const Driver& d = runtime.driver();
  CAIRN_RETURN_IF_ERROR(runtime.Usable());
  Runtime::Scope scope(runtime);

  if (options.init == DeviceCacheInit::kDirect) {
    CUdeviceptr p = 0;
    const CUresult r = d.cuMemAlloc(&p, static_cast<size_t>(capacity));
    if (r != CUDA_SUCCESS) {
      const Status s = runtime.Check(r, "cuMemAlloc");
      std::string m = "device cache (device_cache.size = " + std::to_string(capacity) +
                      " bytes, device " + std::to_string(runtime.device()) + "): " + s.message();
      if (s.code() == Code::kNoMemory) m += "; lower device_cache.size or free device memory";
      return Status(s.code(), std::move(m));
    }
    c->base_ = static_cast<uintptr_t>(p);
    c->FreeEverySlot();
    c->map_calls_.store(1, std::memory_order_relaxed);
    c->mapped_slots_.store(c->slot_count_, std::memory_order_release);
    c->FinishMapping("");
    return c;
  }

  // Incremental: the granularity decides every size (reservation, chunks).
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = runtime.device();
  size_t granularity = 0;
  CAIRN_RETURN_IF_ERROR(runtime.Check(
      d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      "cuMemGetAllocationGranularity"));
  const uint64_t g = std::max<uint64_t>(granularity, 1);
  c->reserved_bytes_ = RoundUp(capacity, g);
  uint64_t chunk = RoundUp(std::max<uint64_t>(options.map_chunk_bytes, 1), g);
  if (c->slot_bytes_ % g == 0) {
    chunk = RoundUp(chunk, c->slot_bytes_);  // chunk boundaries on slot boundaries
  } else if (chunk < c->slot_bytes_) {
    chunk = RoundUp(c->slot_bytes_, g);  // each chunk completes at least one slot
  }
  c->map_chunk_ = std::min(chunk, c->reserved_bytes_);

  CUdeviceptr base = 0;
  const CUresult r = d.cuMemAddressReserve(&base, static_cast<size_t>(c->reserved_bytes_), 0, 0, 0);
  if (r != CUDA_SUCCESS) {
    const Status s = runtime.Check(r, "cuMemAddressReserve");
    return Status(s.code(), "device cache (device_cache.size = " + std::to_string(capacity) +
                                " bytes, reserving " + std::to_string(c->reserved_bytes_) +
                                "): " + s.message());
  }
  c->base_ = static_cast<uintptr_t>(base);
  c->FreeEverySlot();
  DeviceCache* raw = c.get();
  c->mapper_ = std::jthread([raw](std::stop_token stop) { raw->MapLoop(std::move(stop)); });
  return c;
}

void DeviceCache::MapLoop(std::stop_token stop) {
  const Runtime& rt = *runtime_;
  const Driver& d = rt.driver();
  // The VMM calls need no current context; the scope is for drivers that
  // disagree, and costs two calls per thread.
  Runtime::Scope scope(*runtime_);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = runtime_->device();
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  uint64_t mapped = 0;
  std::string error;
  while (mapped < reserved_bytes_) {
    if (stop.stop_requested()) {
      FinishMapping("mapping stopped after " + std::to_string(mapped) +
                    " bytes: the device cache is being destroyed");
      return;  // the destructor stops us: no Mapped() while tearing down
    }
    const uint64_t size = std::min(map_chunk_, reserved_bytes_ - mapped);
    const CUdeviceptr at = static_cast<CUdeviceptr>(base_ + mapped);
    CUmemGenericAllocationHandle handle = 0;
    // Each step's failure names its call; the chunk is undone completely.
    // A context lost meanwhile (by a copy's sticky error) stops the mapping.
    Status s = runtime_->Usable();
    if (s.ok()) s = rt.Check(d.cuMemCreate(&handle, static_cast<size_t>(size), &prop, 0), "cuMemCreate");
    if (s.ok()) {
      s = rt.Check(d.cuMemMap(at, static_cast<size_t>(size), 0, handle, 0), "cuMemMap");
      if (s.ok()) {
        // "calling cuMemMap does not make the address accessible".
        s = rt.Check(d.cuMemSetAccess(at, static_cast<size_t>(size), &access, 1), "cuMemSetAccess");
        if (!s.ok()) (void)rt.Check(d.cuMemUnmap(at, static_cast<size_t>(size)), "cuMemUnmap");
      }
      if (!s.ok()) (void)rt.Check(d.cuMemRelease(handle), "cuMemRelease");
    }
    if (!s.ok()) {
      const uint64_t kept = mapped_bytes();
      error = s.message() + " after mapping " + std::to_string(mapped) + " of " +
              std::to_string(reserved_bytes_) + " bytes; the device cache keeps " +
              std::to_string(kept) + " bytes (" + std::to_string(mapped_slots()) + " of " +
              std::to_string(slot_count_) + " slots)";
      break;
    }
    {
      MutexLock lock(&mu_);
      chunks_.push_back(MappedChunk{mapped, size, static_cast<unsigned long long>(handle)});
    }
    mapped += size;
    map_calls_.fetch_add(1, std::memory_order_relaxed);
    // Published only now, after cuMemSetAccess: a slot below mapped_slots()
    // is usable by copies on any thread that reads it (acquire).
    const uint64_t slots = std::min<uint64_t>(slot_count_, mapped / slot_bytes_);
    mapped_slots_.store(static_cast<uint32_t>(slots), std::memory_order_release);
    if (listener_ != nullptr) listener_->Mapped();
  }
  FinishMapping(std::move(error));
  if (listener_ != nullptr) listener_->Mapped();
}

DeviceCache::~DeviceCache() {
  if (mapper_.joinable()) {
    mapper_.request_stop();
    mapper_.join();  // at most one chunk in flight
  }
  if (runtime_ == nullptr || base_ == 0) return;
  // Every release is made on a lost context too: CUDA returns the sticky
  // error (Check ignores it) and releases all the same.
  const Runtime& rt = *runtime_;
  const Driver& d = rt.driver();
  Runtime::Scope scope(rt);
  if (init_ == DeviceCacheInit::kDirect) {
    (void)rt.Check(d.cuMemFree(static_cast<CUdeviceptr>(base_)), "cuMemFree");
    return;
  }
  std::vector<MappedChunk> chunks;
  {
    MutexLock lock(&mu_);
    chunks.swap(chunks_);
  }
  for (const MappedChunk& ch : chunks) {
    (void)rt.Check(d.cuMemUnmap(static_cast<CUdeviceptr>(base_ + ch.offset), static_cast<size_t>(ch.size)),
                   "cuMemUnmap");
    (void)rt.Check(d.cuMemRelease(static_cast<CUmemGenericAllocationHandle>(ch.handle)), "cuMemRelease");
  }
  (void)rt.Check(d.cuMemAddressFree(static_cast<CUdeviceptr>(base_), static_cast<size_t>(reserved_bytes_)),
                 "cuMemAddressFree");
}

#endif  // CAIRN_GPU_HAVE_CUDA

}  // namespace cairn::gpu
