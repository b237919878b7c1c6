// The host cache: one anonymous mapping allocated at open, cut into equal
// chunks of block_bytes (one chunk holds one file block). It never grows.
//
// Chunks are handed out lowest address first: memory that was touched before
// is reused before fresh memory (on this kind of VM the first write to fresh
// RAM costs ~1.5 s/GiB), and the fast-init work can touch ahead of the lowest
// free chunk.
//
// Not thread-safe: the Pipeline calls it under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>

#include "cairn/status.hpp"
#include "os/memory.hpp"

namespace cairn::core {

class HostCache {
 public:
  // capacity_bytes is rounded down to a whole number of chunks (>= 2).
  static Result<HostCache> Create(uint64_t capacity_bytes, uint32_t chunk_bytes, bool populate);

  uint32_t chunk_count() const { return chunk_count_; }
  uint32_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t capacity_bytes() const { return uint64_t{chunk_count_} * chunk_bytes_; }
  uint32_t free_count() const { return static_cast<uint32_t>(free_.size()); }
  uint64_t used_bytes() const { return uint64_t{chunk_count_ - free_count()} * chunk_bytes_; }

  // Lowest free chunk, or nullopt when none is free.
  std::optional<uint32_t> Allocate();
  // Precondition: chunk was allocated and not yet freed.
  void Free(uint32_t chunk);

  uint8_t* data(uint32_t chunk) const { return mapping_.data() + uint64_t{chunk} * chunk_bytes_; }

 private:
  os::Mapping mapping_;
  uint32_t chunk_bytes_ = 0;
  uint32_t chunk_count_ = 0;
  std::set<uint32_t> free_;
};

}  // namespace cairn::core
