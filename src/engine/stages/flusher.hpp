// The flush stage: writes entries in FIFO order (the order captures queue
// them) to a file tier, block by block as the blocks' checksums become ready
// (checksummer.hpp), then commits the file (temp + fsync + rename + dir
// fsync, format::FileWriter). It streams an entry that is still being
// captured, which is how a checkpoint larger than the cache passes.
//
// Two run in a pipeline, each with its Marks: the flusher (host cache ->
// local tier, every entry) and the persister (host cache -> persistent tier,
// checkpoints, concurrently with the flusher). A block must be in the host
// cache to be written: the flusher's blocks always are (dirty blocks are
// never evicted), the persister's may have been evicted once written locally,
// and then it gives the entry up (nothing booked) and its owner copies the
// local file instead.
//
// It owns its Worker (queue, thread) and its writer. The chunks it writes
// from and their bookkeeping are the BlockStore's (block_store.hpp): a
// written block goes through the store's transition for its tier (Marks).
// The entries, the stats and what follows a commit belong to its owner (the
// pipeline), reached through the narrow Owner interface below, so a test
// drives it with a small store over a temp dir or a FaultFs.
//
// Locking: it shares its owner's mutex (*mu), which guards the entries'
// fields and the queue. Every lock-held step below requires *mu and drops it
// (a MutexUnlock) for the directory/file creation, each block write, the
// commit and an abort; the entry is pinned while a block write reads its
// chunk.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cairn/status.hpp"
#include "engine/block_store.hpp"
#include "engine/entry.hpp"
#include "engine/memory_movers.hpp"
#include "engine/node_follower.hpp"
#include "engine/worker.hpp"
#include "format/file_writer.hpp"
#include "tiers/file_tier.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

// Which of an entry's flags a flusher keeps: a block is in its file, the
// entry's file was opened; and the store's transition for a block written
// (called before the unpin). The defaults are the local tier's.
// The file tier a flusher writes each kind of entry to (the persister's has
// checkpoints only: history steps are never persisted).
struct FlushTiers {
  tiers::FileTier* checkpoints = nullptr;
  tiers::FileTier* steps = nullptr;  // history steps
  // The name directories known to exist (the owner's, under *mu): a flush
  // creates its name's directory only when it is not in, and adds it.
  std::set<std::string>* known_dirs = nullptr;
  tiers::FileTier& For(format::EntryKind kind) const {
    return *(kind == format::EntryKind::kCheckpoint ? checkpoints : steps);
  }
};

// Which of an entry's two flushes a Flusher makes: to the local tier (its
// blocks' `written`, LocalState::started, BlockStore::WrittenLocally) or to
// the persistent one (`persisted`, PersistState::started,
// WrittenPersistently).
struct FlushMarks {
  bool persistent = false;
  bool Written(const BlockState& bs) const { return persistent ? bs.persisted : bs.written; }
};

class Flusher {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Marks = FlushMarks;

  // What it needs of its owner (the pipeline: stage_owners.hpp); each is
  // called with *mu held.
  class Owner {
   public:
    // Drops the pin a block write took (its chunk is read with *mu
    // dropped meanwhile); the owner releases a consumed entry's chunks at
    // its last pin.
    virtual void Unpin(const EntryPtr& e) = 0;
    // The flush of a live entry failed (s names the step, entry and version).
    virtual void Fail(const EntryPtr& e, const Status& s) = 0;
    // An entry consumed before its file was committed: not written.
    virtual void Skipped() = 0;
    // e's file is committed: stats, trace, what the mover does next.
    virtual void Committed(const EntryPtr& e, TimePoint flush_start, double io_seconds) = 0;
    // After every entry, whatever became of it.
    virtual void Flushed(const EntryPtr& e) = 0;

   protected:
    ~Owner() = default;
  };

  // done: notified (under *mu) after every block written and every entry.
  // verify: recompute each block's CRC32C from its chunk before writing it,
  // and fail the write (kCorrupt) if the chunk no longer matches the CRC
  // taken at capture (the persister: what reaches the persistent tier
  // matches what the application handed over).
  // store: the host tier whose chunks it writes; tiers: where to.
  Flusher(Mutex* mu, std::condition_variable_any* done, BlockStore* store, MemoryMovers* movers,
          FlushTiers tiers, Owner* owner, Marks marks = {}, bool verify = false);

  // Before Start: the thread moves near each chunk it works on
  // (host_cache.numa; node_follower.hpp).
  void FollowNodes(NodeFollower follower) { follower_ = std::move(follower); }
  // Starts the thread (`name`: its name in the tracer's timeline).
  void Start(const char* name = nullptr, Tracer* tracer = nullptr) { worker_.Start(name, tracer); }
  void RequestStop() { worker_.RequestStop(); }
  void Stop() { worker_.Stop(); }  // joins
  // A checksum is ready, an entry was consumed or failed: a flush waiting
  // inside WriteBlocks looks again.
  void Wake() { worker_.Wake(); }

  // Precondition (all below): *mu held.
  void Push(const EntryPtr& e) { worker_.Push(e); }
  bool Idle() const { return worker_.Idle(); }
  const std::deque<EntryPtr>& queue() const { return worker_.queue(); }
  const std::optional<EntryPtr>& in_hand() const { return worker_.in_hand(); }

 private:
  friend class Worker<EntryPtr, Flusher>;
  // The Worker's (worker.hpp), with *mu held: flushes the queue's front.
  void RunJob(EntryPtr& e);

  // Writes and commits one entry, or skips or fails it (booked).
  void FlushEntry(const EntryPtr& e) CAIRN_REQUIRES(*mu_);
  // Creates the entry's name directory (once) and its file writer.
  Status OpenWriter(const EntryPtr& e, std::unique_ptr<format::FileWriter>* writer,
                    double* io_seconds) CAIRN_REQUIRES(*mu_);
  // Writes the entry's blocks as their checksums become ready; false when
  // the flush ended early (skipped or failed, booked; the writer aborted).
  bool WriteBlocks(const EntryPtr& e, format::FileWriter& writer, double* io_seconds)
      CAIRN_REQUIRES(*mu_);
  // Waits until some block at or above `lowest` is ready and unwritten; its
  // index, or nullopt when the entry was consumed or failed meanwhile, or
  // when that block is no longer in the host cache (given up).
  std::optional<uint32_t> WaitForReadyBlock(const Entry& e, uint32_t lowest) CAIRN_REQUIRES(*mu_);
  // Writes block b of the pinned entry with *mu dropped.
  Status WriteBlock(const EntryPtr& e, uint32_t b, format::FileWriter& writer, double* io_seconds)
      CAIRN_REQUIRES(*mu_);
  Status Commit(format::FileWriter& writer, double* io_seconds) CAIRN_REQUIRES(*mu_);
  // The checkpoint's placement record beside its committed file; best
  // effort (docs/format.md 5.1: a lost record only loses the placement).
  void WritePlacement(const EntryPtr& e, const format::FileWriter& writer) CAIRN_REQUIRES(*mu_);
  void AbortWriter(format::FileWriter& writer) CAIRN_REQUIRES(*mu_);
  // A flush failure is the application's problem only while someone still
  // needs the entry; for a consumed one it is just a skipped flush.
  void FailFlush(const EntryPtr& e, const Status& s, const char* what) CAIRN_REQUIRES(*mu_);
  bool Written(const Entry& e, uint32_t b) const { return marks_.Written(e.blocks()[b]); }

  Mutex* const mu_;
  std::condition_variable_any* const done_;
  BlockStore* const store_ CAIRN_PT_GUARDED_BY(*mu_);
  MemoryMovers* const movers_;  // counts its block I/O (kBackgroundIo)
  const FlushTiers tiers_;
  std::set<std::string>* const known_dirs_ CAIRN_PT_GUARDED_BY(*mu_);
  Owner* const owner_;
  NodeFollower follower_;  // used by the worker's thread only
  const Marks marks_;
  const bool verify_;
  Worker<EntryPtr, Flusher> worker_;  // last: its thread is joined before the rest goes
};

}  // namespace cairn::core
