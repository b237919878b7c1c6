// Compaction (docs/format.md 4.8): rewrites a layered version as a full
// version-2 file with the same number and content id, so that versions
// referencing it stay valid and it no longer needs its bases.
#pragma once

#include <cstdint>
#include <string>

#include "format/file_writer.hpp"
#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::format {

struct CompactResult {
  uint32_t old_depth = 0;      // 0: the version was full already, nothing written
  uint64_t old_file_bytes = 0;
  uint64_t new_file_bytes = 0;
};

// Resolves the chain of <dir>/<name>/v<number>.cairn (every block read is
// verified), writes its logical content as a full version through FileWriter
// (temp, fsync, rename over the layered file, directory fsync) and returns
// what changed. The layered file stays in place on any error. Reads at most
// `window_bytes` (rounded to blocks) of logical content at a time.
Result<CompactResult> CompactVersion(os::FileSystem* fs, const std::string& dir,
                                     const std::string& name, int64_t number,
                                     EntryKind kind = EntryKind::kCheckpoint,
                                     const WriterOptions& options = {},
                                     uint64_t window_bytes = 16u << 20);

}  // namespace cairn::format
