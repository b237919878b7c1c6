// A background thread that runs near the memory it works on (host_cache.numa,
// docs/design.md "Placement"): before the flusher, the persister or the
// prefetcher reads or writes a chunk of a NUMA-partitioned host cache, it
// moves to the CPUs of that chunk's node. One system call per change of
// node; nothing at all when the cache is not partitioned.
//
// Owned by the one thread that calls Follow (no lock): the chunk-to-node map
// is a copy of the cache's, fixed when the cache was created.
#pragma once

#include <cstdint>

#include "tiers/host_cache.hpp"
#include "os/mem/numa.hpp"

namespace cairn::core {

class NodeFollower {
 public:
  NodeFollower() = default;  // follows nothing
  // Follows the chunks of `cache` (partitioned or not) through `numa`.
  NodeFollower(os::Numa* numa, const HostCache& cache);

  // The caller is about to work on the chunk holding `p` (a pointer into the
  // cache): moves the calling thread to that chunk's node's CPUs unless it
  // is there already. Advisory: a refused affinity is not an error (the
  // thread stays where it was and does not retry for that node).
  void Follow(const void* p);
  int node() const { return node_; }  // -1: not moved yet

 private:
  os::Numa* numa_ = nullptr;
  ChunkNodes nodes_;
  uintptr_t base_ = 0;
  uint64_t chunk_bytes_ = 1;
  int node_ = -1;
};

}  // namespace cairn::core
