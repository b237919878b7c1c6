// The host cache: one anonymous mapping reserved at open, cut into equal
// chunks of block_bytes (one chunk holds one file block).
//
// Growth (host_cache.grow): the mapping may reserve more address space than
// the cache's capacity (MAP_NORESERVE: no memory until touched). Grow makes
// more of the reserved chunks usable, as untouched free chunks; nothing ever
// shrinks. Only an unbound, unpopulated cache reserves beyond its capacity:
// the NUMA ranges and the eager population cover the whole mapping.
//
// Fast initialization (docs/design.md): the mapping is not populated at open
// (except for the eager strategy). Each chunk is either *touched* (its pages
// are backed by RAM, so writes run at memcpy speed) or *untouched* (the first
// write faults every page in: several times slower). Chunks become touched
// when the cache initializer touches them in the background, or when a writer
// is given one (its write touches it).
//
// Allocation order: the lowest free touched chunk, else the lowest free
// untouched one. A capture never waits for touching: it takes untouched
// memory when no touched chunk is free. The initializer touches the lowest
// free untouched chunk, so touched memory builds up right where the next
// allocations go.
//
// NUMA (host_cache.numa, docs/design.md "Placement"): with a Numa layer the
// chunks are split into one contiguous range per node, each range bound to
// its node (mbind through os::Numa) before any page is touched; Allocate
// takes a chunk of the node it is asked for first. Without one (the default
// on one node) nothing is bound and `node` is ignored.
//
// Not thread-safe: the Pipeline calls it under its mutex. Touching runs
// outside that mutex on a chunk *claimed* for it (off the free lists), so no
// writer can be given a chunk while it is being touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "cairn/status.hpp"
#include "os/mem/memory.hpp"
#include "os/mem/numa.hpp"

namespace cairn::core {

// Which node each chunk's memory is bound to: chunk c is on the node k with
// begin[k] <= c < begin[k + 1]. Fixed at Create; copied by the threads that
// follow their chunks' nodes (NodeFollower), so they read it without a lock.
struct ChunkNodes {
  std::vector<uint32_t> begin;  // nodes + 1 entries; empty: not partitioned
  bool partitioned() const { return !begin.empty(); }
  int node_of(uint32_t chunk) const;  // -1 when not partitioned
};

class HostCache {
 public:
  // capacity_bytes is rounded down to a whole number of chunks (>= 2).
  // populate: every page is faulted in now and every chunk starts touched.
  // reserve_bytes > capacity_bytes (ignored with populate or numa): address
  // space for Grow up to that many bytes.
  static Result<HostCache> Create(uint64_t capacity_bytes, uint32_t chunk_bytes,
                                  const os::MapOptions& options, os::Numa* numa = nullptr,
                                  uint64_t reserve_bytes = 0);

  // Usable chunks (Grow raises it); chunk indices are below it.
  uint32_t chunk_count() const { return chunk_count_; }
  uint32_t reserved_count() const { return reserved_count_; }
  // Makes the cache `chunks` chunks large, as far as the reservation allows;
  // the new chunks are free and untouched. Returns how many were added (0
  // when it is that large already).
  uint32_t Grow(uint32_t chunks);
  uint32_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t capacity_bytes() const { return uint64_t{chunk_count_} * chunk_bytes_; }
  uint32_t free_count() const {
    return static_cast<uint32_t>(free_touched_.size() + free_untouched_.size());
  }
  uint64_t used_bytes() const {
    return uint64_t{chunk_count_ - free_count() - (claimed_ ? 1u : 0u)} * chunk_bytes_;
  }

  // A free chunk (touched first, lowest address first), or nullopt. The
  // caller is about to write its first `write_bytes` bytes (default: all), so
  // those pages count as touched from now on; a shorter write leaves the
  // chunk partly touched, to be finished by the initializer.
  // `was_touched` (optional) tells whether the chunk was fully touched before.
  // `node` >= 0 (a partitioned cache): a free chunk of that node first, in
  // the same order (touched, then untouched); another node's when it has none.
  std::optional<uint32_t> Allocate(bool* was_touched = nullptr, uint32_t write_bytes = UINT32_MAX,
                                   int node = -1);
  // Precondition: chunk was allocated and not yet freed.
  void Free(uint32_t chunk);

  // Touch bookkeeping (the initializer) ---------------------------------------
  bool fully_touched() const { return touched_count_ == chunk_count_; }
  // Every chunk has been given to a writer at least once (lazy pins then).
  bool all_visited() const { return visited_count_ == chunk_count_; }
  uint32_t touched_count() const { return touched_count_; }
  uint32_t free_touched_count() const { return static_cast<uint32_t>(free_touched_.size()); }
  // Takes the lowest free untouched (or partly touched) chunk off the free
  // lists for touching.
  // At most one claim at a time. nullopt when none is free.
  std::optional<uint32_t> ClaimForTouch();
  // Bytes of the claimed chunk already touched (a paused touch resumes there).
  uint32_t touch_progress(uint32_t chunk) const { return progress_[chunk]; }
  // Ends the claim: `progress` bytes from the chunk's start are now touched.
  // A fully touched chunk goes to the touched free list.
  void ReleaseClaim(uint32_t chunk, uint32_t progress);
  // Marks every chunk touched (after the eager strategy populated the mapping).
  void MarkAllTouched();

  const ChunkNodes& nodes() const { return nodes_; }
  int node_of(uint32_t chunk) const { return nodes_.node_of(chunk); }

  uint8_t* data(uint32_t chunk) const { return mapping_.data() + uint64_t{chunk} * chunk_bytes_; }
  uint8_t* base() const { return mapping_.data(); }
  size_t mapped_bytes() const { return mapping_.size(); }

 private:
  Status BindNodes(os::Numa& numa);
  std::optional<uint32_t> TakeOnNode(int node, bool* was_touched);
  void MarkTouched(uint32_t chunk);
  void AddProgress(uint32_t chunk, uint32_t bytes);

  os::Mapping mapping_;
  uint32_t chunk_bytes_ = 0;
  uint32_t chunk_count_ = 0;
  uint32_t reserved_count_ = 0;  // chunks the mapping has room for
  std::set<uint32_t> free_touched_;
  std::set<uint32_t> free_untouched_;
  std::vector<uint32_t> progress_;  // touched bytes from each chunk's start
  uint32_t touched_count_ = 0;      // chunks with progress_ == chunk_bytes_
  std::vector<bool> visited_;       // given to a writer at least once
  uint32_t visited_count_ = 0;
  std::optional<uint32_t> claimed_;
  ChunkNodes nodes_;
};

}  // namespace cairn::core
