// The bookkeeping of one cache tier over the blocks of the pipeline's
// entries: which unit (host-cache chunk, device-cache slot) holds a block,
// the tier's eviction list (CleanList) and the steps that free units:
//
//   MarkClean   the block's data is safe elsewhere: list it as evictable
//   Drop        unlist the block and free its unit (the entry goes)
//   EvictOne    free the lowest-ranked evictable unit (counted, traced)
//   TryAcquire  a free unit, evicting for it when the tier allows
//
// One template for both tiers; a policy says which BlockState fields a tier
// uses, what its storage is, which entries it may not evict from now, and
// whether it may evict at all (HostTier, DeviceTier below).
//
// No lock of its own: the pipeline holds it as state guarded by its mutex
// and calls it under that mutex. The storage is borrowed (Attach); entries
// must stay alive while their blocks are listed.
#pragma once

#include <cstdint>
#include <optional>

#include "tiers/clean_list.hpp"
#include "engine/entry.hpp"
#include "tiers/host_cache.hpp"
#include "engine/trace.hpp"
#include "tiers/device_cache.hpp"

namespace cairn::core {

template <typename Policy>
class TierCache {
 public:
  using Storage = typename Policy::Storage;

  // evictions: the statistics counter each eviction adds one to; tracer
  // (optional): where evictions are traced.
  TierCache(uint64_t* evictions, Tracer* tracer) : evictions_(evictions), tracer_(tracer) {}
  TierCache(const TierCache&) = delete;
  TierCache& operator=(const TierCache&) = delete;

  // The storage whose units the blocks name (null: the tier has none yet).
  void Attach(Storage* storage) { storage_ = storage; }

  // Lists block `block` of e as evictable, if this tier holds it.
  void MarkClean(Entry& e, uint32_t block) {
    if (e.blocks_[block].*Policy::kUnit >= 0) clean_.Add(e, block);
  }

  // Unlists the block and frees its unit; true when it held one.
  bool Drop(Entry& e, uint32_t block) {
    clean_.Remove(e, block);
    return Release(e, block);
  }

  // Evicts the lowest-ranked listed block of an entry ranked below
  // `below_seq` that the policy does not call busy; false when there is none.
  bool EvictOne(uint64_t below_seq) {
    const auto victim = clean_.Take(below_seq, &Policy::Busy);
    if (!victim) return false;
    auto [e, block] = *victim;
    if (Release(*e, block)) {
      ++*evictions_;
      if (tracer_) tracer_->Instant(Policy::kEvictSpan, "cache", e->layout.blocks[block].length, e->name);
    }
    return true;
  }

  // A unit from allocate(storage) (nullopt: none free), evicting blocks of
  // entries ranked below `below_seq`, one at a time, while the policy allows
  // eviction; never waits.
  template <typename Allocate>
  std::optional<uint32_t> TryAcquire(Allocate allocate, uint64_t below_seq = UINT64_MAX) {
    for (;;) {
      if (auto unit = allocate(*storage_)) return unit;
      if (!Policy::MayEvict(*storage_) || !EvictOne(below_seq)) return std::nullopt;
    }
  }

  // How many units EvictOne(e.seq) could free for e (not e's own), counted
  // up to `enough`.
  size_t CountEvictableFor(const Entry& e, size_t enough) const {
    return clean_.CountEvictableFor(e, enough, &Policy::Busy);
  }

  // Whether `missing` units can be had for e without evicting anything
  // ranked at or above it: `free` free ones, then evictable ones.
  bool HasRoomFor(const Entry& e, size_t free, size_t missing) const {
    return free >= missing || free + CountEvictableFor(e, missing - free) >= missing;
  }

  size_t listed() const { return clean_.size(); }
  void Clear() { clean_.Clear(); }  // teardown only

 private:
  bool Release(Entry& e, uint32_t block) {
    int32_t& unit = e.blocks_[block].*Policy::kUnit;
    if (unit < 0) return false;
    storage_->Free(static_cast<uint32_t>(unit));
    unit = -1;
    Policy::OnReleased(e, block);
    return true;
  }

  Storage* storage_ = nullptr;
  CleanList clean_{Policy::kListed};
  uint64_t* const evictions_;
  Tracer* const tracer_;
};

// The host cache: chunks; a block is evictable once written to its file.
struct HostTier {
  using Storage = HostCache;
  static constexpr int32_t BlockState::*kUnit = &BlockState::chunk;
  static constexpr bool BlockState::*kListed = &BlockState::clean;
  static constexpr const char* kEvictSpan = "evict";
  // Pinned by a reader or writer, or being prefetched into the host cache.
  static bool Busy(const Entry& e) { return e.pins() > 0 || e.reads().prefetching; }
  static bool MayEvict(const Storage&) { return true; }
  // `sealed` stays (the payload is complete, in the file); it is no longer
  // resident.
  static void OnReleased(Entry& e, uint32_t block) {
    if (e.blocks_[block].sealed) --e.capture_.resident_blocks;
  }
};

// The device cache: slots; a block is evictable once drained to the host
// tier.
struct DeviceTier {
  using Storage = gpu::DeviceCache;
  static constexpr int32_t BlockState::*kUnit = &BlockState::slot;
  static constexpr bool BlockState::*kListed = &BlockState::dclean;
  static constexpr const char* kEvictSpan = "device evict";
  static bool Busy(const Entry& e) { return e.pins() > 0 || e.reads().device_prefetching; }
  // HiPC'22 constraint 1: no eviction while the cache is still being
  // mapped; the unmapped part will be free room soon.
  static bool MayEvict(const Storage& s) { return s.mapping_done(); }
  static void OnReleased(Entry& e, uint32_t block) { e.blocks_[block].dsealed = false; }
};

}  // namespace cairn::core
