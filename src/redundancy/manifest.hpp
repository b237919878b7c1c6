// The global manifest of an MPI job's name (docs/format.md 3.6, normative):
// per rank directory, the newest version every rank has committed. Version 2
// keeps two CRC-checked slots in one 8192-byte file and records by
// overwriting the older slot in place (pwrite + fdatasync: no size or
// directory change, so no journal commit behind other files' traffic);
// version 1 (text, replaced whole) is still read. Local, MPI-free; every
// call goes through the os::FileSystem, so tests inject torn writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/config.hpp"
#include "cairn/status.hpp"

namespace cairn::os {
class FileSystem;
}

namespace cairn::collective {

struct Manifest {
  int64_t ranks = 0;
  int64_t committed = -1;
  int64_t persistent = -1;
  int64_t ranks_per_node = 0;  // CAIRN_MPI_RANKS_PER_NODE; 0 = real nodes
};

// Raises committed / persistent of dir/name/global to the given values (-1 =
// leave; the file's ranks and ranks_per_node must be `shape`'s, else it
// starts afresh). Writes nothing when the file already records them; else
// overwrites the older slot in place, or creates the file with temp + fsync
// + rename + directory fsync when it is absent, version 1, without a valid
// slot, or of another shape (3.6.1). The fsyncs follow config.fsync. Local.
Status RecordGlobal(os::FileSystem* fs, const Config& config, const std::string& dir,
                    const std::string& name, const Manifest& shape, int64_t committed,
                    int64_t persistent);

// Parses a manifest's bytes (either version); kCorrupt naming what is wrong.
Result<Manifest> ParseManifest(std::string_view bytes, std::string_view path);
// Reads and parses dir/name/global: kNotFound when absent.
Result<Manifest> ReadManifest(os::FileSystem* fs, const std::string& dir, const std::string& name);

// Manifest version 2's layout (docs/format.md 3.6.1), for tests.
inline constexpr size_t kManifestSlotBytes = 4096;
inline constexpr size_t kManifestBytes = 2 * kManifestSlotBytes;

}  // namespace cairn::collective
