// The GPU tier's device mover (docs/gpu.md, "Pipeline"; HiPC'22): it hands
// out the device cache's slots to captures, drains captured slots to
// host-cache chunks in FIFO order (the order captures seal them), and when no
// drain is queued prefetches history steps host -> device ahead of the pops.
//
// It owns its Worker (drain queue, thread) and the device tier's block
// bookkeeping (TierCache<DeviceTier>: block -> slot, the evictable slots).
// The device cache and the copy streams (DeviceIo) are borrowed (Attach):
// captures and restores use them too. The host chunks, the pins, the
// entries' fate (checksum, failure), the stats, the trace and the popped
// histories belong to its owner (the pipeline), reached through the narrow
// Owner interface below, so a test drives it over the fake CUDA driver
// without a pipeline.
//
// Rules it keeps: a slot is evictable only once its block is in the host tier
// (drained, or device-prefetched from a host chunk), and nothing is evicted
// while the device cache is still being mapped (HiPC'22, constraint 1: the
// unmapped part will be free room soon; DeviceTier::MayEvict).
//
// Locking: it shares its owner's mutex (*mu), which guards the entries'
// fields, the tier and the queue. Every lock-held step below requires *mu;
// the driver copies run with it dropped (a MutexUnlock), on a pinned entry,
// so that neither its chunks nor its slots are freed or evicted meanwhile.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <vector>

#include "cairn/status.hpp"
#include "engine/block_store.hpp"
#include "engine/catalog.hpp"
#include "engine/entry.hpp"
#include "engine/memory_movers.hpp"
#include "engine/stages/device_io.hpp"
#include "engine/step_walk.hpp"
#include "engine/trace.hpp"
#include "engine/worker.hpp"
#include "tiers/device_cache.hpp"
#include "tiers/tier_cache.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class DeviceMover {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // What it needs of its owner (the pipeline: stage_owners.hpp); each is
  // called with *mu held.
  class Owner {
   public:
    // A chunk of the store for a block of write_bytes (evicting as the
    // host tier allows, taking back the room held for the persister), or
    // nullopt: none now (a drain waits on `done`).
    virtual std::optional<uint32_t> TryAcquireChunk(uint32_t write_bytes) = 0;
    // Drops a pin the mover took (its chunks' bytes are written or read with
    // *mu dropped meanwhile); the owner releases a consumed entry's chunks at
    // its last pin.
    virtual void Unpin(const EntryPtr& e) = 0;
    // Block `block` of e was copied device -> host (t0..t1, through a bounce
    // buffer or not) and is sealed in its chunk: stats, trace, and its host
    // path (queued for its checksum; evictable at once if e failed or was
    // consumed meanwhile).
    virtual void Drained(const EntryPtr& e, uint32_t block, TimePoint t0, TimePoint t1,
                         bool bounced) = 0;
    // A drain of a live entry failed (s names the entry, version and block).
    virtual void Fail(const EntryPtr& e, const Status& s) = 0;
    // e's missing blocks (`bytes`) were copied host -> device from t0.
    virtual void Prefetched(const EntryPtr& e, uint64_t bytes, TimePoint t0) = 0;
    // A capture waits for a slot (`span` says why); the wait is the
    // application's blocking. Returns after one wake-up of `done`.
    virtual void WaitForSlot(const char* span) = 0;

   protected:
    ~Owner() = default;
  };

  // done: notified (under *mu) after every job and whenever a slot frees, for
  // captures waiting for room. evictions: the counter each slot eviction adds
  // one to; tracer (optional): where evictions are traced. store: the host
  // tier the drains fill and the device prefetches read. catalog: the
  // owner's entries and histories (under *mu), whose popped steps it
  // prefetches, at most `depth` ahead of the pops (history.prefetch_depth;
  // 0: no limit) as the host prefetcher does (WalkPoppedSteps).
  DeviceMover(Mutex* mu, std::condition_variable_any* done, uint64_t* evictions, Tracer* tracer,
              BlockStore* store, MemoryMovers* movers, const Catalog* catalog, int depth,
              Owner* owner);

  // The device cache (null: none) and the copy streams; before Start.
  void Attach(gpu::DeviceCache* cache, DeviceIo* io);
  // Starts the thread (`name`: its name in the tracer's timeline).
  void Start(const char* name = nullptr, Tracer* tracer = nullptr) { worker_.Start(name, tracer); }
  void RequestStop() { worker_.RequestStop(); }
  void Stop() { worker_.Stop(); }  // joins
  // A slot, a chunk or a popped step changed, or the cache mapped more: the
  // mover looks again.
  void Wake() { worker_.Wake(); }

  // Precondition (all below): *mu held.
  // Slots exist or are coming (the cache is still being mapped).
  bool CacheUsable() const;
  // A mapped free slot, evicting drained slots of older entries once the
  // cache is fully mapped; waits (Owner::wait_for_slot) for mapping or
  // draining. nullopt when the cache has no slot at all (mapping failed
  // before the first chunk).
  std::optional<int32_t> AcquireSlot();
  std::optional<uint32_t> TryAcquireSlot();  // no waiting
  // Frees the block's slot (if any), waking captures.
  void DropSlot(Entry& e, uint32_t block);
  // A block of e was captured into its slot: queued for its drain, or, when
  // e failed or was consumed, nothing to drain: the slot is evictable at once.
  void Push(const EntryPtr& e, uint32_t block);
  // Blocks wait to be drained, or one is being drained.
  bool DrainsPending() const;
  void Clear();  // teardown: forgets the evictable slots

 private:
  struct Job {  // drain one block device -> host, or prefetch a step host -> device
    EntryPtr e;
    uint32_t block = 0;
    bool drain = true;
  };
  friend class Worker<Job, DeviceMover>;

  // The Worker's (worker.hpp), with *mu held: Take(), then the drain or the
  // prefetch.
  std::optional<Job> TakeJob(Worker<Job, DeviceMover>& w);
  void RunJob(Job& j);
  std::optional<Job> Take() CAIRN_REQUIRES(*mu_);  // drains first (FIFO), then a prefetch
  // Copies one captured block from its slot into a host chunk, where the
  // checksum and flush stages take over. Drops *mu for the copy.
  void DrainBlock(const EntryPtr& e, uint32_t block) CAIRN_REQUIRES(*mu_);
  // Consumed before it was drained (served from the device), or failed: the
  // slot is evictable (or freed), nothing goes to the host. Wakes waiters.
  bool NothingToDrain(const EntryPtr& e, uint32_t block) CAIRN_REQUIRES(*mu_);
  // Waits for a host chunk (the entry not pinned meanwhile).
  uint32_t WaitForChunk(uint32_t write_bytes) CAIRN_REQUIRES(*mu_);
  void DrainFailed(const EntryPtr& e, uint32_t block, const Status& s) CAIRN_REQUIRES(*mu_);
  // The next history step worth copying host -> device, or nullptr.
  EntryPtr FindPrefetchTarget() CAIRN_REQUIRES(*mu_);
  StepVerdict JudgeStep(const Entry& e) const CAIRN_REQUIRES(*mu_);
  // Copies a host-resident step into slots. Drops *mu for the copies.
  void Prefetch(const EntryPtr& e) CAIRN_REQUIRES(*mu_);
  // Slots for e's blocks not in the device, and the copies into them.
  void PlanPrefetch(const EntryPtr& e, std::vector<CopySegment>* segments,
                    std::vector<uint32_t>* filled) CAIRN_REQUIRES(*mu_);

  Mutex* const mu_;
  std::condition_variable_any* const done_;
  BlockStore* const store_ CAIRN_PT_GUARDED_BY(*mu_);
  const Catalog* const catalog_ CAIRN_PT_GUARDED_BY(*mu_);
  const int depth_;
  MemoryMovers* const movers_;  // counts its block I/O (kBackgroundIo)
  Tracer* const tracer_;        // optional
  Owner* const owner_;
  gpu::DeviceCache* cache_ CAIRN_GUARDED_BY(mu_) = nullptr;
  DeviceIo* io_ CAIRN_GUARDED_BY(mu_) = nullptr;
  TierCache<DeviceTier> tier_ CAIRN_GUARDED_BY(mu_);
  Worker<Job, DeviceMover> worker_;  // last: its thread is joined before the rest goes
};

}  // namespace cairn::core
