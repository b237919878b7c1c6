// Version 2 table area (docs/format.md 4.3): region table with packed-stream
// sizes and extent ranges, extent table, block table, version record, name.
// Internal to the codec: codec.cpp dispatches on the format version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.hpp"
#include "format/codec.hpp"

namespace cairn::format {

inline constexpr uint64_t kRegionEntryBytesV2 = 48;
inline constexpr uint64_t kExtentEntryBytes = 16;
inline constexpr uint64_t kVersionRecordBytes = 32;

inline uint64_t TableBytesV2(uint64_t regions, uint64_t extents, uint64_t blocks,
                             uint64_t name_len) {
  return kRegionEntryBytesV2 * regions + kExtentEntryBytes * extents + kBlockEntryBytes * blocks +
         kVersionRecordBytes + name_len;
}

void EncodeTablesV2(const Layout& layout, const std::vector<uint32_t>& crcs, std::string_view name,
                    uint8_t* out);
// The table CRC is already checked.
Status DecodeTablesV2(const uint8_t* in, const Header& h, const Footer& f, Layout* layout,
                      std::vector<uint32_t>* crcs, std::string* name);

}  // namespace cairn::format
