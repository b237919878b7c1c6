// Layout of one Cairn data file (a checkpoint version or a history step).
// docs/format.md is the normative description; this header mirrors it.
// Format version 2 (docs/format.md 4) stores per region a packed stream of
// extents instead of the whole region; a version-1 layout is the special case
// of one extent [0, bytes) per non-empty region, and Layout holds both alike.
//
//   [0, 4096)            header (68 meaningful bytes, rest zero)
//   [4096, data_end)     region data; each region starts 4096-aligned and is
//                        cut into blocks of block_bytes (the last one shorter)
//   [table_offset, ...)  region table, block table, name (little-endian)
//   last 64 bytes        footer; the file size is a multiple of 4096
//
// Every block carries a CRC32C; the header, the tables and the footer carry
// their own CRC32C. Offsets are 4096-aligned so files can be written with
// O_DIRECT straight from the host cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "util/extent.hpp"

namespace cairn::format {

inline constexpr uint32_t kFormatVersion = 1;   // what Layout::Make writes
inline constexpr uint32_t kFormatVersion2 = 2;  // layered versions (Layout::MakeV2)
inline constexpr uint32_t kNewestFormatVersion = kFormatVersion2;
inline constexpr uint64_t kAlignment = 4096;
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kFooterBytes = 64;
inline constexpr char kHeaderMagic[8] = {'C', 'A', 'I', 'R', 'N', 'D', 'A', 'T'};
inline constexpr char kFooterMagic[8] = {'C', 'A', 'I', 'R', 'N', 'E', 'N', 'D'};

enum class EntryKind : uint32_t { kCheckpoint = 1, kHistoryStep = 2 };

struct RegionSpec {
  int32_t id = 0;
  MemoryKind memory = MemoryKind::kHost;
  uint64_t bytes = 0;
};

// Version 2's version record (docs/format.md 4.3): which version this one
// builds on. Version-1 files read as a full version with content_id 0.
struct VersionRecord {
  uint64_t content_id = 0;       // 0: FileWriter draws one (version 2)
  int64_t base_version = -1;     // -1: full version
  uint64_t base_content_id = 0;
  uint32_t depth = 0;            // 0 full, else the base's depth + 1
  bool layered() const { return base_version >= 0; }
};

// A random non-zero content id (docs/format.md 4.3). The capture draws it,
// so that the local and the persistent file of one version carry the same.
uint64_t DrawContentId();

struct Layout {
  struct Region {
    RegionSpec spec;
    uint64_t stored_bytes = 0;  // packed stream length (= spec.bytes when full)
    uint64_t data_offset = 0;   // 4096-aligned file offset of the region's data
    uint32_t first_block = 0;   // index into blocks
    uint32_t block_count = 0;
    uint32_t first_extent = 0;  // index into extents
    uint32_t extent_count = 0;
  };
  struct Block {
    uint32_t region = 0;   // index into regions
    uint64_t offset = 0;   // file offset (4096-aligned)
    uint32_t length = 0;   // payload bytes (<= block_bytes)
  };
  uint32_t format_version = kFormatVersion;
  uint32_t block_bytes = 0;
  std::vector<Region> regions;
  std::vector<Block> blocks;
  std::vector<Extent> extents;  // region offsets; each region's list is canonical
  VersionRecord record;         // version 2 only (full for version 1)
  uint64_t data_end = 0;        // end of the data area (4096-aligned)
  uint64_t payload_bytes = 0;   // sum of region sizes (logical)
  uint64_t stored_bytes = 0;    // sum of stored_bytes (what the blocks hold)

  // A version-1 layout: regions in the given order, each stored whole.
  // Precondition: block_bytes is a positive multiple of kAlignment.
  static Layout Make(const std::vector<RegionSpec>& regions, uint32_t block_bytes);
  // A version-2 layout: region r stores the extents extents[r] (canonical,
  // inside the region; see ValidateExtents) as its packed stream. A full
  // version (record.base_version -1) passes FullExtents(regions).
  static Layout MakeV2(const std::vector<RegionSpec>& regions,
                       const std::vector<ExtentList>& extents, uint32_t block_bytes,
                       const VersionRecord& record);
  // One extent [0, bytes) per non-empty region.
  static std::vector<ExtentList> FullExtents(const std::vector<RegionSpec>& regions);

  // The extents of region r.
  const Extent* region_extents(uint32_t r) const { return extents.data() + regions[r].first_extent; }
  bool layered() const { return record.layered(); }
};

// Empty when `list` is canonical and inside [0, region_bytes), else what is
// wrong (for error messages).
std::string ValidateExtents(const ExtentList& list, uint64_t region_bytes);

// What the header and footer say about the file.
struct FileInfo {
  EntryKind kind = EntryKind::kCheckpoint;
  std::string name;
  int64_t number = 0;          // version (checkpoint) or step (history)
  int64_t created_unix_ns = 0;
};

inline uint64_t AlignUp(uint64_t n, uint64_t a = kAlignment) { return (n + a - 1) / a * a; }

}  // namespace cairn::format
