// An entry is one checkpoint version or one history step travelling through
// the pipeline: captured block by block into host-cache chunks, checksummed,
// written to the local tier, optionally copied to the persistent tier,
// evicted, prefetched back, consumed.
//
// All fields are guarded by Pipeline::mu_. Chunk memory may be read outside the
// lock only while the entry is pinned (pins > 0): pinned entries are never
// evicted and their chunks are never freed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "format/layout.hpp"
#include "format/placement.hpp"

namespace cairn::core {

struct BlockState {
  int32_t chunk = -1;      // host-cache chunk holding the payload; -1 = not resident
  bool sealed = false;     // the payload in `chunk` is complete
  // GPU tier (device_mover.hpp): a device-cache slot holding the payload.
  int32_t slot = -1;       // -1 = not in the device cache
  bool dsealed = false;    // the payload in `slot` is complete
  bool dclean = false;     // listed in Pipeline::dclean_ (a host-tier copy exists)
  bool crc_ready = false;  // `crc` holds the payload's CRC32C
  uint32_t crc = 0;
  bool written = false;    // the payload is in the local file (temp or final)
  bool persisted = false;  // the payload is in the persistent file (temp or final)
  bool clean = false;      // listed in Pipeline::clean_ (evictable)
};

struct Entry {
  uint64_t seq = 0;  // capture order; the eviction rank (lowest goes first)
  format::EntryKind kind = format::EntryKind::kCheckpoint;
  std::string name;
  int64_t number = 0;
  format::Layout layout;
  std::vector<BlockState> blocks;
  // Checkpoints: the placement record written beside each committed file
  // (docs/format.md 5); null = none. Set before the entry is published,
  // immutable after.
  std::shared_ptr<const format::Placement> placement;
  // With a NUMA-partitioned host cache (host_cache.numa): the node of each
  // block's source memory (-1: any), so its chunk is taken on that node.
  // Empty: no preference. Set before the entry is published, immutable after.
  std::vector<int32_t> block_nodes;

  uint32_t sealed_blocks = 0;    // blocks with sealed == true
  uint32_t resident_blocks = 0;  // blocks with chunk >= 0 and sealed
  bool capture_done = false;

  bool flush_started = false;
  bool local_committed = false;       // final file exists in the local tier
  // The persistent tier (checkpoints, with storage.persistent set; see
  // "Persistence" in docs/design.md):
  bool persist_pending = false;       // bound for it: not there yet, no error yet
  bool persist_started = false;       // the persister opened its file
  bool persist_from_cache = false;    // queued for, or held by, the persister
  // Its written blocks stay in the host cache (not evictable) until the
  // persister wrote them too; cleared when a capture needs the room (the
  // file copy takes over) or when the persister is done with it.
  bool persist_hold = false;
  bool persistent_committed = false;
  bool persist_skipped = false;  // not for it, though there is one (Capture's `persist`)
  Status local_error;       // why the local flush failed (sticky)
  Status persistent_error;  // why the persistent copy failed (sticky)

  bool layer_settled = false;  // checkpoint: Layering told of its commit or drop
  bool consumed = false;     // popped (history) or retired: chunks are released
  bool prefetching = false;  // the prefetcher is filling its chunks
  bool pop_reading = false;  // a pop is reading it from its file: not worth prefetching
  bool device_prefetching = false;  // the device mover is filling its slots
  bool device_prefetch_failed = false;
  bool prefetch_failed = false;
  int pins = 0;

  bool fully_resident() const {
    return capture_done && resident_blocks == blocks.size();
  }
  bool in_device(uint32_t b) const { return blocks[b].slot >= 0 && blocks[b].dsealed; }
  bool in_host(uint32_t b) const { return blocks[b].chunk >= 0 && blocks[b].sealed; }
  // Every block is in the host cache or the device cache: a restore or pop
  // can be served without reading a file.
  bool fully_cached() const {
    if (!capture_done) return false;
    for (uint32_t b = 0; b < blocks.size(); ++b) {
      if (!in_host(b) && !in_device(b)) return false;
    }
    return true;
  }
  bool fully_in_device() const {
    if (!capture_done) return false;
    for (uint32_t b = 0; b < blocks.size(); ++b) {
      if (!in_device(b)) return false;
    }
    return true;
  }
  bool failed() const { return !local_error.ok(); }
};

using EntryPtr = std::shared_ptr<Entry>;

}  // namespace cairn::core
