// Layout of one Cairn data file (a checkpoint version or a history step).
// docs/format.md is the normative description; this header mirrors it.
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

namespace cairn::format {

inline constexpr uint32_t kFormatVersion = 1;
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

struct Layout {
  struct Region {
    RegionSpec spec;
    uint64_t data_offset = 0;   // 4096-aligned file offset of the region's data
    uint32_t first_block = 0;   // index into blocks
    uint32_t block_count = 0;
  };
  struct Block {
    uint32_t region = 0;   // index into regions
    uint64_t offset = 0;   // file offset (4096-aligned)
    uint32_t length = 0;   // payload bytes (<= block_bytes)
  };
  uint32_t block_bytes = 0;
  std::vector<Region> regions;
  std::vector<Block> blocks;
  uint64_t data_end = 0;       // end of the data area (4096-aligned)
  uint64_t payload_bytes = 0;  // sum of region sizes

  // Lays regions out in the given order. Precondition: block_bytes is a
  // positive multiple of kAlignment.
  static Layout Make(const std::vector<RegionSpec>& regions, uint32_t block_bytes);
  // Offset of byte `pos` of the payload within region r's block list:
  // block index = first_block + pos / block_bytes.
};

// What the header and footer say about the file.
struct FileInfo {
  EntryKind kind = EntryKind::kCheckpoint;
  std::string name;
  int64_t number = 0;          // version (checkpoint) or step (history)
  int64_t created_unix_ns = 0;
};

inline uint64_t AlignUp(uint64_t n, uint64_t a = kAlignment) { return (n + a - 1) / a * a; }

}  // namespace cairn::format
