// The host tier's state, with one owner: the host cache's chunks, which
// blocks hold them and which of those may be evicted (TierCache<HostTier>),
// the bytes captured but not yet written locally (dirty), and the
// checkpoints whose written blocks stay in the cache until the persister
// wrote them too (persist holds; docs/design.md, "Persistence").
//
// The pipeline and its stages change this state only through the named
// transitions below, never field by field: a block is Captured (dirty),
// WrittenLocally or WrittenPersistently, MarkClean when its data is safe
// elsewhere, and its chunk goes with Release; an entry that Failed can never
// be flushed.
//
// No lock of its own: every method is called under the pipeline's mutex.
// The pipeline declares its BlockStore CAIRN_GUARDED_BY that mutex and the
// stages hold their pointer to it CAIRN_PT_GUARDED_BY the same one, so the
// thread-safety analysis checks every caller. Chunk memory (data()) is read
// and written outside the lock only while its entry is pinned (entry.hpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <optional>

#include "engine/entry.hpp"
#include "engine/trace.hpp"
#include "tiers/host_cache.hpp"
#include "tiers/tier_cache.hpp"

namespace cairn::core {

class BlockStore {
 public:
  // The statistics counters the store adds to (Stats::evictions and
  // persist_holds_released).
  struct Counters {
    uint64_t* evictions = nullptr;
    uint64_t* holds_released = nullptr;
  };
  // tracer (optional): where evictions are traced. room: notified whenever
  // chunks may have become free or evictable (the pipeline's cv_app_).
  BlockStore(Counters counters, Tracer* tracer, std::condition_variable_any* room);
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  // The cache ----------------------------------------------------------------
  // Takes the cache the initializer mapped; has_cache() from then on.
  void Adopt(HostCache&& cache);
  bool has_cache() const { return cache_.has_value(); }
  // Precondition for these: has_cache().
  HostCache& cache() { return *cache_; }
  const HostCache& cache() const { return *cache_; }
  uint8_t* data(uint32_t chunk) const { return cache_->data(chunk); }
  uint32_t chunk_count() const { return cache_->chunk_count(); }
  // A chunk that no block holds (a capture rolled back, a prefetch undone).
  void Free(uint32_t chunk) { cache_->Free(chunk); }
  // Whether the cache is pinned by registration with the GPU driver
  // (cuMemHostRegister): a device copy then goes straight into a chunk, not
  // through a bounce buffer. The initializer says so once it pinned it.
  bool host_registered() const { return host_registered_; }
  void SetHostRegistered(bool registered) { host_registered_ = registered; }
  // Teardown, every thread joined: the lists and holds are cleared and the
  // cache is handed to the caller (to unpin and unmap without the lock).
  std::optional<HostCache> Close();

  // Room -----------------------------------------------------------------------
  // A free chunk for a writer of write_bytes bytes (HostCache::Allocate),
  // evicting clean blocks of entries ranked below `below_seq` for it; never
  // waits, keeps the holds.
  std::optional<uint32_t> TryAcquire(uint32_t write_bytes, bool* was_touched, uint64_t below_seq,
                                     int node);
  // Whether `missing` chunks can be had for e without evicting anything
  // ranked at or above it.
  bool HasRoomFor(const Entry& e, size_t missing) const {
    return tier_.HasRoomFor(e, cache_->free_count(), missing);
  }

  // A block's transitions -----------------------------------------------------
  // Its payload is now complete in its chunk (copied, or drained from the
  // device). True: bound for the files (dirty; the caller queues its
  // checksum); false: e failed or was consumed meanwhile, so the block is
  // evictable at once.
  bool Captured(Entry& e, uint32_t b);
  // Its data is safe elsewhere (a file, or it never needs one): evictable.
  void MarkClean(Entry& e, uint32_t b) { tier_.MarkClean(e, b); }
  // Written to the local file: no longer dirty; evictable unless the
  // persister still needs it (HeldForPersister).
  void WrittenLocally(Entry& e, uint32_t b);
  // Written to the persistent file: evictable if it is written locally too.
  void WrittenPersistently(Entry& e, uint32_t b);
  // e failed: its data stays restorable while resident but can never be
  // flushed, so its captured blocks stop counting as dirty and become
  // evictable (captures keep making progress).
  void Failed(Entry& e);
  // e's chunks go (consumed, at its last unpin).
  void Release(Entry& e);
  uint64_t dirty_bytes() const { return dirty_; }
  // A sample of the cache's occupancy (used and dirty bytes) in the trace.
  void TraceOccupancy(Tracer& tracer) const;

  // Persist holds ---------------------------------------------------------------
  // e's written blocks stay in the cache until the persister wrote them.
  void Hold(const EntryPtr& e);
  static bool HeldForPersister(const Entry& e, uint32_t b) {
    return e.persist_hold && !e.blocks[b].persisted;
  }
  // Lets the oldest held entry's written blocks go (evictable; counted in
  // holds_released); false when nothing is held. The application's room
  // comes first: the persister gives the entry up if it then meets an
  // evicted block, and the mover copies its file instead.
  bool ReleaseOldestHold();
  // Ends e's hold, if it has one: its written blocks become evictable.
  void DropHold(const EntryPtr& e);

 private:
  std::optional<HostCache> cache_;
  TierCache<HostTier> tier_;
  uint64_t dirty_ = 0;          // bytes of Captured blocks not yet written locally
  bool host_registered_ = false;
  std::deque<EntryPtr> holds_;  // persist_hold set, oldest first
  uint64_t* const holds_released_;
  std::condition_variable_any* const room_;
};

}  // namespace cairn::core
