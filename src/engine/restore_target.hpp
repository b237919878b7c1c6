// What a restore reads into, and how it reads files: the arguments of
// Pipeline::Restore, also taken by the restore helpers (region_match.hpp)
// and the MPI layer's collective restore.
#pragma once

#include <cstdint>

#include "cairn/cairn.hpp"

namespace cairn::core {

// One region to restore into.
struct RestoreTarget {
  int32_t id = 0;
  MemoryKind memory = MemoryKind::kHost;
  void* data = nullptr;
  uint64_t bytes = 0;
};

// How a restore reads files: the way the tier writes them (O_DIRECT under
// storage.direct_io), or through the page cache, for a version that other
// processes of the node read at the same time: its files then come off the
// disk once for all of them instead of once per process.
enum class FileRead { kAsWritten, kThroughPageCache };

}  // namespace cairn::core
