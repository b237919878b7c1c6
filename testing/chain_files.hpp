// Writes a chain of checkpoint versions straight into a tier directory with
// the format's writer (format v2: a full version, then layered versions that
// store only changed extents), as a capture that writes layered versions
// would: <dir>/<name>/v<N>.cairn. Tests of the pipeline's read and
// housekeeping paths (restore, latest, retention, the mover) open a client
// or a Mover on that directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/file_writer.hpp"
#include "format/layout.hpp"
#include "os/fs/fs.hpp"

namespace cairn::test {

struct ChainFiles {
  os::FileSystem* fs = nullptr;
  std::string dir;         // the tier's directory
  std::string name = "ckpt";
  int32_t region_id = 1;
  uint64_t bytes = 0;      // one host region of this size
  uint32_t block_bytes = 4096;
  format::WriterOptions options{.direct = false, .fsync = false, .mode = 0600};
  // Null: a failed write is a test failure. Else the first error goes here
  // (a power cut in the middle of a write, say).
  Status* error = nullptr;

  // Version `number`'s content, and its content id (what a layer names).
  struct Written {
    std::vector<uint8_t> content;
    uint64_t content_id = 0;
    uint32_t depth = 0;
  };

  // A full version `number` with pattern content (seeded by the number).
  Written WriteFull(int64_t number) const;
  // A layered version `number` on `base` (written as base_number): the
  // content of base with a few extents rewritten (seeded by the number).
  Written WriteLayer(int64_t number, int64_t base_number, const Written& base) const;
  // v<first> full and v<first+1> .. v<first+layers> each on the one before.
  std::vector<Written> WriteChain(int64_t first, int layers) const;

  // Writes `content` storing only `extents` (a full version when
  // record.base_version is -1); returns the content id.
  uint64_t Write(int64_t number, const std::vector<uint8_t>& content,
                 const ExtentList& extents, const format::VersionRecord& record) const;
};

}  // namespace cairn::test
