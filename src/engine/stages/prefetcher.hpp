// The host prefetcher: once a history is being popped, it reads the highest
// steps that are no longer in the host cache back into it, ahead of the pops
// (reverse order is the adjoint pattern), at most `depth` steps ahead
// (history.prefetch_depth; step_walk.hpp). It only takes free chunks or
// evicts clean blocks ranked below the step it loads (older captures), so it
// never pushes out a step that will be popped sooner; with no room it waits
// for pops to free some.
//
// It owns its Worker (a polling stage: no queue, take() walks the popped
// histories). The chunks it reads into and their bookkeeping are the
// BlockStore's (block_store.hpp); the catalog, the entries, the stats and
// the trace belong to its owner (the pipeline), reached through the narrow
// Owner interface below, so a test drives it with a small store over a temp
// dir or a FaultFs.
//
// Locking: it shares its owner's mutex (*mu), which guards the catalog and
// the entries' fields. Every lock-held step below requires *mu; LoadStep
// drops it (a MutexUnlock) for the file read, with the entry pinned and
// marked `prefetching` (its chunks are neither evicted nor freed meanwhile).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "engine/block_store.hpp"
#include "engine/catalog.hpp"
#include "engine/entry.hpp"
#include "engine/memory_movers.hpp"
#include "engine/node_follower.hpp"
#include "engine/step_walk.hpp"
#include "engine/worker.hpp"
#include "tiers/file_tier.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class Prefetcher {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // What it needs of its owner (the pipeline: stage_owners.hpp); each is
  // called with *mu held.
  class Owner {
   public:
    // The entries and the open histories, whose popped steps it walks (once
    // per look for work).
    virtual const Catalog& catalog() = 0;
    // A chunk of the store for a block of e whose first write_bytes bytes
    // the read fills: free, or freed by evicting a clean block ranked below
    // e; never waits (BlockStore::TryAcquire, and what a writer's take tells
    // the initializer).
    virtual std::optional<uint32_t> AcquireChunk(const Entry& e, uint32_t write_bytes) = 0;
    // Drops the prefetcher's pin; the owner releases a consumed entry's
    // chunks at its last pin.
    virtual void Unpin(const EntryPtr& e) = 0;
    // e was loaded (its read began at t0): stats and trace.
    virtual void Loaded(const EntryPtr& e, TimePoint t0) = 0;
    // After every step, loaded or not (the device mover may go on).
    virtual void Finished() = 0;

   protected:
    ~Owner() = default;
  };

  // depth: history.prefetch_depth (0: no limit). done: notified (under *mu)
  // after every step. store: the host cache the steps are read into (a
  // step larger than it is skipped; a read block is evictable). steps: the
  // file tier that holds the steps' files.
  Prefetcher(Mutex* mu, std::condition_variable_any* done, int depth, BlockStore* store,
             MemoryMovers* movers, const tiers::FileTier* steps, Owner* owner);

  // Before Start: the thread moves near each chunk it works on
  // (host_cache.numa; node_follower.hpp).
  void FollowNodes(NodeFollower follower) { follower_ = std::move(follower); }
  // Starts the thread (`name`: its name in the tracer's timeline).
  void Start(const char* name = nullptr, Tracer* tracer = nullptr) { worker_.Start(name, tracer); }
  void RequestStop() { worker_.RequestStop(); }
  void Stop() { worker_.Stop(); }  // joins
  // A pop started or ended, a chunk freed, a step committed: look again.
  void Wake() { worker_.Wake(); }

  // Precondition: *mu held. No step is being loaded.
  bool Idle() const { return worker_.Idle(); }

 private:
  friend class Worker<EntryPtr, Prefetcher>;
  // The Worker's (worker.hpp), with *mu held: the next step to load
  // (FindTarget), then its load.
  std::optional<EntryPtr> TakeJob(Worker<EntryPtr, Prefetcher>& w);
  void RunJob(EntryPtr& e);

  // The next step worth loading, or nullptr.
  EntryPtr FindTarget() CAIRN_REQUIRES(*mu_);
  // What step e is to this prefetcher.
  StepVerdict Judge(const Entry& e) const CAIRN_REQUIRES(*mu_);
  // Loads one step found by FindTarget. Drops *mu for the file read.
  void LoadStep(const EntryPtr& e) CAIRN_REQUIRES(*mu_);
  // Gives every block of e without a resident chunk a chunk: dst[b] is where
  // block b is read to (nullptr: resident already). False when a chunk could
  // not be had after all (those taken are given back).
  bool TakeChunks(Entry& e, std::vector<uint8_t*>* dst) CAIRN_REQUIRES(*mu_);
  // Reads the blocks with a dst from e's file, verified, with *mu dropped;
  // crcs: the file's checksum of every block.
  Status ReadBlocks(const EntryPtr& e, const std::vector<uint8_t*>& dst,
                    std::vector<uint32_t>* crcs) CAIRN_REQUIRES(*mu_);
  // The read blocks hold their data now: sealed, written, clean.
  void Publish(Entry& e, const std::vector<uint8_t*>& dst, const std::vector<uint32_t>& crcs)
      CAIRN_REQUIRES(*mu_);
  // Gives back the chunks of the blocks read into (the read failed).
  void GiveBack(Entry& e, const std::vector<uint8_t*>& dst) CAIRN_REQUIRES(*mu_);

  Mutex* const mu_;
  std::condition_variable_any* const done_;
  const int depth_;
  BlockStore* const store_ CAIRN_PT_GUARDED_BY(*mu_);
  MemoryMovers* const movers_;  // counts its block I/O (kBackgroundIo)
  const tiers::FileTier* const steps_;
  Owner* const owner_;
  NodeFollower follower_;    // used by the worker's thread only
  Worker<EntryPtr, Prefetcher> worker_;  // last: its thread is joined before the rest goes
};

}  // namespace cairn::core
