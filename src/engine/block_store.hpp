// The host tier's state, with one owner: the host cache's chunks, which
// blocks hold them and which of those may be evicted (TierCache<HostTier>),
// the bytes captured but not yet written locally (dirty), and the
// checkpoints whose written blocks stay in the cache until the persister
// wrote them too (persist holds; docs/design.md, "Persistence"); and the
// state of every entry and of its blocks (entry.hpp), which only its
// transitions below write.
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
#include <utility>

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
  // Written to the local file (BlockState::written): no longer dirty;
  // evictable unless the persister still needs it (HeldForPersister).
  void WrittenLocally(Entry& e, uint32_t b);
  // Written to the persistent file (BlockState::persisted): evictable if it
  // is written locally too.
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

  // An entry's transitions ------------------------------------------------------
  // The only writers of an entry's stage state and of its blocks' (entry.hpp)
  // besides the tiers' eviction lists, named after what happened. A block:
  void SizeBlocks(Entry& e) { e.blocks_.resize(e.layout.blocks.size()); }  // planned
  void Place(Entry& e, uint32_t b, uint32_t chunk) {  // its payload goes to `chunk`
    e.blocks_[b].chunk = static_cast<int32_t>(chunk);
  }
  // Its chunk goes back to the cache unfilled (a rollback, a failed read).
  void Unplace(Entry& e, uint32_t b);
  void PlaceInSlot(Entry& e, uint32_t b, uint32_t slot) {  // the device cache's
    e.blocks_[b].slot = static_cast<int32_t>(slot);
  }
  void ClearSlot(Entry& e, uint32_t b) { e.blocks_[b].slot = -1; }  // the caller freed it
  void DeviceSealed(Entry& e, uint32_t b) { e.blocks_[b].dsealed = true; }
  // Its payload is complete in its chunk (captured, drained).
  void Sealed(Entry& e, uint32_t b) {
    e.blocks_[b].sealed = true;
    ++e.capture_.sealed_blocks;
    ++e.capture_.resident_blocks;
  }
  void Checksummed(Entry& e, uint32_t b, uint32_t crc) {
    e.blocks_[b].crc = crc;
    e.blocks_[b].crc_ready = true;
  }
  // Read back from its file into its chunk (a prefetch), verified against
  // `crc`: complete, written, evictable.
  void Loaded(Entry& e, uint32_t b, uint32_t crc);
  // The entry:
  void CaptureEnded(Entry& e) { e.capture_.done = true; }  // or rolled back
  // A prefetch filled the rest.
  void AllResident(Entry& e) {
    e.capture_.resident_blocks = static_cast<uint32_t>(e.blocks_.size());
  }
  // A history step known from its committed file (not captured here), with
  // its blocks' CRCs.
  void FromCommittedFile(Entry& e, const std::vector<uint32_t>& crcs);
  // The local tier:
  void FlushStarted(Entry& e) { e.local_.started = true; }
  void LocalCommitted(Entry& e) { e.local_.committed = true; }
  // The first failure sticks: e.failed() from now on. The caller books the
  // blocks (Failed below).
  void SetError(Entry& e, const Status& s) {
    if (e.local_.error.ok()) e.local_.error = s;
  }
  // The persistent tier:
  void SkipPersist(Entry& e) { e.persist_.skipped = true; }
  void BindPersist(Entry& e) { e.persist_.pending = true; }
  void QueueForPersister(Entry& e) { e.persist_.from_cache = true; }
  void PersistStarted(Entry& e) { e.persist_.started = true; }
  void PersisterDone(Entry& e) { e.persist_.from_cache = false; }  // with DropHold
  // The copy ended: committed there (s ok), or failed for good.
  void PersistEnded(Entry& e, const Status& s) {
    e.persist_.pending = false;
    if (s.ok()) {
      e.persist_.committed = true;
    } else {
      e.persist_.error = s;
    }
  }
  // Consumed or failed before it got there: never to be persisted (a wait
  // reports the local error or the consumption).
  void PersistDropped(Entry& e) { e.persist_.pending = false; }
  // Reads ahead, and pops (`ok` false: the read failed, it is not tried
  // again):
  void PrefetchStarted(Entry& e) { e.reads_.prefetching = true; }
  void PrefetchEnded(Entry& e, bool ok) {
    e.reads_.prefetching = false;
    if (!ok) e.reads_.prefetch_failed = true;
  }
  void DevicePrefetchStarted(Entry& e) { e.reads_.device_prefetching = true; }
  void DevicePrefetchEnded(Entry& e, bool ok) {
    e.reads_.device_prefetching = false;
    if (!ok) e.reads_.device_prefetch_failed = true;
  }
  void PopReading(Entry& e, bool reading) { e.reads_.pop_reading = reading; }
  // Its lifetime: pins keep its chunks; consumed, they go at the last unpin.
  void Pin(Entry& e) { ++e.pins_; }
  // True: that was the last pin of a consumed entry (release its chunks).
  bool Unpin(Entry& e) { return --e.pins_ == 0 && e.consumed_; }
  // True: newly consumed (false: it was already).
  bool Consume(Entry& e) { return !std::exchange(e.consumed_, true); }
  // True: newly settled (Layering is told once).
  bool SettleLayer(Entry& e) { return !std::exchange(e.layer_settled_, true); }

  // Persist holds ---------------------------------------------------------------
  // e's written blocks stay in the cache until the persister wrote them.
  void Hold(const EntryPtr& e);
  static bool HeldForPersister(const Entry& e, uint32_t b) {
    return e.persist().hold && !e.blocks_[b].persisted;
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
  std::deque<EntryPtr> holds_;  // persist().hold set, oldest first
  uint64_t* const holds_released_;
  std::condition_variable_any* const room_;
};

}  // namespace cairn::core
