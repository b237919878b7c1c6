// An entry is one checkpoint version or one history step travelling through
// the pipeline: captured block by block into host-cache chunks, checksummed,
// written to the local tier, optionally copied to the persistent tier,
// evicted, prefetched back, consumed.
//
// Its state is guarded by Pipeline::mu_. Chunk memory may be read outside
// the lock only while the entry is pinned (pins() > 0): pinned entries are
// never evicted and their chunks are never freed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "format/layout.hpp"
#include "format/placement.hpp"

namespace cairn::core {

// Where one block's payload is. Written, like the entry's state below, only
// by the BlockStore's transitions and by the tiers' eviction lists.
struct BlockState {
  int32_t chunk = -1;      // host-cache chunk holding the payload; -1 = not resident
  bool sealed = false;     // the payload in `chunk` is complete
  // GPU tier (device_mover.hpp): a device-cache slot holding the payload.
  int32_t slot = -1;       // -1 = not in the device cache
  bool dsealed = false;    // the payload in `slot` is complete
  bool dclean = false;     // listed in the device tier's eviction list (a host-tier copy exists)
  bool crc_ready = false;  // `crc` holds the payload's CRC32C
  uint32_t crc = 0;
  bool written = false;    // the payload is in the local file (temp or final)
  bool persisted = false;  // the payload is in the persistent file (temp or final)
  bool clean = false;      // listed in the host tier's eviction list (evictable)
};

// An entry's state, one struct per stage that moves it on. Each is changed
// only by the named transitions of the entry's owner, the pipeline's
// BlockStore (block_store.hpp): the store is guarded by the pipeline's mutex,
// so the thread-safety analysis checks every transition's caller. The
// stages and the pipeline read them through Entry's const accessors, under
// the same mutex.

// The capture (the application thread; the device mover's drains).
struct CaptureState {
  uint32_t sealed_blocks = 0;    // blocks with sealed == true
  uint32_t resident_blocks = 0;  // blocks with chunk >= 0 and sealed
  bool done = false;             // every block captured (or the capture rolled back)
};

// The local tier (the flusher).
struct LocalState {
  bool started = false;    // the flusher took it (a popped step is skipped before)
  bool committed = false;  // the final file exists in the local tier
  Status error;            // why the entry failed (sticky): Entry::failed()
};

// The persistent tier (checkpoints, with storage.persistent set; see
// "Persistence" in docs/design.md).
struct PersistState {
  bool skipped = false;     // not for it, though there is one (Capture's `persist`)
  bool pending = false;     // bound for it: not there yet, no error yet
  bool from_cache = false;  // queued for, or held by, the persister
  bool started = false;     // the persister took it
  // Its written blocks stay in the host cache (not evictable) until the
  // persister wrote them too; cleared when a capture needs the room (the
  // file copy takes over) or when the persister is done with it.
  bool hold = false;
  bool committed = false;
  Status error;  // why the persistent copy failed (sticky)
};

// Reads ahead into the caches, and pops.
struct ReadState {
  bool prefetching = false;  // the prefetcher is filling its chunks
  bool prefetch_failed = false;
  bool device_prefetching = false;  // the device mover is filling its slots
  bool device_prefetch_failed = false;
  bool pop_reading = false;  // a pop is reading it from its file: not worth prefetching
};

class Entry {
 public:
  // What it is. Set before the entry is published (Catalog::Add), immutable
  // after, so read without the lock.
  uint64_t seq = 0;  // capture order; the eviction rank (lowest goes first)
  format::EntryKind kind = format::EntryKind::kCheckpoint;
  std::string name;
  int64_t number = 0;
  format::Layout layout;
  // Checkpoints: the placement record written beside each committed file
  // (docs/format.md 5); null = none.
  std::shared_ptr<const format::Placement> placement;
  // With a NUMA-partitioned host cache (host_cache.numa): the node of each
  // block's source memory (-1: any), so its chunk is taken on that node.
  // Empty: no preference.
  std::vector<int32_t> block_nodes;

  // Where each block's payload is; sized when the capture is planned.
  const std::vector<BlockState>& blocks() const { return blocks_; }
  // The stages' state (see above).
  const CaptureState& capture() const { return capture_; }
  const LocalState& local() const { return local_; }
  const PersistState& persist() const { return persist_; }
  const ReadState& reads() const { return reads_; }
  // Readers and writers of its chunk memory outside the lock: a pinned
  // entry is never evicted and its chunks are never freed.
  int pins() const { return pins_; }
  // Popped (history) or retired: its chunks are released at the last unpin.
  bool consumed() const { return consumed_; }
  // A checkpoint: Layering was told of its commit or drop.
  bool layer_settled() const { return layer_settled_; }

  bool failed() const { return !local_.error.ok(); }
  bool fully_resident() const {
    return capture_.done && capture_.resident_blocks == blocks_.size();
  }
  bool in_device(uint32_t b) const { return blocks_[b].slot >= 0 && blocks_[b].dsealed; }
  bool in_host(uint32_t b) const { return blocks_[b].chunk >= 0 && blocks_[b].sealed; }
  // Every block is in the host cache or the device cache: a restore or pop
  // can be served without reading a file.
  bool fully_cached() const {
    if (!capture_.done) return false;
    for (uint32_t b = 0; b < blocks_.size(); ++b) {
      if (!in_host(b) && !in_device(b)) return false;
    }
    return true;
  }
  bool fully_in_device() const {
    if (!capture_.done) return false;
    for (uint32_t b = 0; b < blocks_.size(); ++b) {
      if (!in_device(b)) return false;
    }
    return true;
  }

 private:
  friend class BlockStore;   // the transitions
  friend struct HostTier;    // an evicted block is no longer resident
  friend struct DeviceTier;  // nor in the device
  friend class CleanList;    // a tier's eviction list marks what it lists
  template <typename Policy>
  friend class TierCache;         // a tier's eviction empties the block's unit
  friend struct EntryTestAccess;  // tests build entries in any state (testing/)

  std::vector<BlockState> blocks_;
  CaptureState capture_;
  LocalState local_;
  PersistState persist_;
  ReadState reads_;
  int pins_ = 0;
  bool consumed_ = false;
  bool layer_settled_ = false;
};

using EntryPtr = std::shared_ptr<Entry>;

}  // namespace cairn::core
