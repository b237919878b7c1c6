// The checksum stage: the CRC32C of every sealed block, on its own thread and
// ahead of the flusher, so that checksums cost no flush bandwidth. Blocks are
// queued by captures (host blocks) and by the device mover (drained blocks).
//
// It owns its Worker (queue, thread) and nothing else: the entries, the chunk
// memory and the pins belong to its owner (the pipeline), reached through the
// narrow Owner interface below, so a test drives it with a fake cache.
//
// Locking: it shares its owner's mutex (*mu), which guards the entries' fields
// and the queue. ChecksumBlock pins the entry and drops *mu for the CRC (a
// pinned entry's chunks are never freed, entry.hpp).
//
// Yielding: while the owner says `paused` (an application thread is copying a
// capture), it takes no further block; a block in hand is finished. The CRC
// reads as many bytes as the capture writes and would share the cores and
// the memory bandwidth with the very copy the application is blocked on
// (docs/design.md, "Capture precedence"). The owner calls Wake() when the
// pause ends.
#pragma once

#include <condition_variable>
#include <cstdint>

#include "engine/entry.hpp"
#include "engine/worker.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class Checksummer {
 public:
  // What it needs of its owner (the pipeline: stage_owners.hpp); each is
  // called with *mu held.
  class Owner {
   public:
    // The bytes of a host-cache chunk (read with *mu dropped, while the
    // chunk's entry is pinned).
    virtual const uint8_t* ChunkData(uint32_t chunk) = 0;
    // Pins e while its chunk is read with *mu dropped (entry.hpp); Unpin
    // drops the pin, and the owner releases a consumed entry's chunks at
    // its last pin.
    virtual void Pin(const EntryPtr& e) = 0;
    virtual void Unpin(const EntryPtr& e) = 0;
    // Block b's checksum is `crc`: the owner books it (before the unpin: a
    // consumed entry's last unpin releases its chunks) and wakes the flusher.
    virtual void Checksummed(const EntryPtr& e, uint32_t b, uint32_t crc) = 0;
    // True while the next block must wait (asked before each one).
    virtual bool Paused() { return false; }

   protected:
    ~Owner() = default;
  };

  // done: notified (under *mu) after every block, for waiters on progress.
  // owner: outlives the checksummer.
  Checksummer(Mutex* mu, std::condition_variable_any* done, Owner* owner);

  // Starts the thread (`name`: its name in the tracer's timeline).
  void Start(const char* name = nullptr, Tracer* tracer = nullptr) { worker_.Start(name, tracer); }
  void RequestStop() { worker_.RequestStop(); }
  void Stop() { worker_.Stop(); }  // joins
  void Wake() { worker_.Wake(); }

  // Precondition (both): *mu held.
  // Queues a sealed block of e (its chunk set) for its checksum.
  void Push(const EntryPtr& e, uint32_t block) { worker_.Push(Job{.e = e, .block = block}); }
  bool Idle() const { return worker_.Idle(); }

 private:
  struct Job {
    EntryPtr e;
    uint32_t block = 0;
  };
  friend class Worker<Job, Checksummer>;

  // The Worker's (worker.hpp), with *mu held: nothing while the owner says
  // paused, else the queue's front; then the block's checksum.
  std::optional<Job> TakeJob(Worker<Job, Checksummer>& w);
  void RunJob(Job& j);

  // The block's checksum (Owner::Checksummed), unless the entry was
  // consumed or the block left the host cache meanwhile. Drops *mu for the CRC.
  void ChecksumBlock(const EntryPtr& e, uint32_t block) CAIRN_REQUIRES(*mu_);

  Mutex* const mu_;
  Owner* const owner_;
  Worker<Job, Checksummer> worker_;  // last: its thread is joined before the rest goes
};

}  // namespace cairn::core
