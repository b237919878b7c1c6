// Encoding and decoding of the fixed parts of a data file: header, tables and
// footer (docs/format.md, section 2). Shared by FileWriter and FileReader so
// that field offsets live in one place. Decoders check everything a reader
// must check (docs/format.md 2.5) and return kCorrupt (or kUnsupported for an
// unknown format version) with a message that does not name the file: the
// caller prefixes the path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.hpp"
#include "format/layout.hpp"

namespace cairn::format {

struct Header {
  uint32_t format_version = kFormatVersion;
  EntryKind kind = EntryKind::kCheckpoint;
  uint32_t block_bytes = 0;
  int64_t number = 0;
  int64_t created_unix_ns = 0;
  uint32_t region_count = 0;
  uint32_t block_count = 0;
  uint64_t payload_bytes = 0;
  uint64_t file_bytes = 0;
};

struct Footer {
  uint64_t table_offset = 0;
  uint64_t table_bytes = 0;
  uint32_t table_crc = 0;
  uint32_t name_len = 0;
  int64_t number = 0;
  EntryKind kind = EntryKind::kCheckpoint;
  uint32_t format_version = kFormatVersion;
  uint64_t file_bytes = 0;
  uint32_t extent_count = 0;  // version 2 (bytes 48..51; reserved in version 1)
};

inline constexpr uint64_t kRegionEntryBytes = 32;
inline constexpr uint64_t kBlockEntryBytes = 8;
inline constexpr uint32_t kMaxNameBytes = 128;

// Unpadded size of region table + block table + name.
uint64_t TableBytes(const Layout& layout, size_t name_len);
// Total size of the file: align(data_end + table_bytes + footer).
uint64_t FileBytes(const Layout& layout, size_t name_len);

// The header and footer a writer puts into a file with this layout.
Header MakeHeader(const FileInfo& info, const Layout& layout);

// out: kHeaderBytes bytes, fully written (reserved bytes zero).
void EncodeHeader(const Header& h, uint8_t* out);
// in: kHeaderBytes bytes. Checks magic, version, header_bytes, CRC, kind,
// block_bytes and number, and in version 2 that the reserved bytes are zero.
Status DecodeHeader(const uint8_t* in, Header* h);

// out: kFooterBytes bytes.
void EncodeFooter(const Footer& f, uint8_t* out);
// in: kFooterBytes bytes. Checks magic, version and CRC only; CheckFooter
// relates it to the header.
Status DecodeFooter(const uint8_t* in, Footer* f);
// Footer fields against the header and the file: number, kind, version,
// file_bytes, table placement and table size (docs/format.md 2.5, items 3-4).
Status CheckFooter(const Footer& f, const Header& h);

// out: TableBytes(layout, name.size()) bytes. crcs has one entry per block.
void EncodeTables(const Layout& layout, const std::vector<uint32_t>& crcs, std::string_view name,
                  uint8_t* out);
// in: f.table_bytes bytes read at f.table_offset. Verifies the table CRC, the
// name and every region and block entry (items 5-7; version 2: also 4.6
// items 2-6 but 6, whose bytes the caller checks), and rebuilds the layout
// (block offsets derived), the block CRCs and the name.
Status DecodeTables(const uint8_t* in, const Header& h, const Footer& f, Layout* layout,
                    std::vector<uint32_t>* crcs, std::string* name);

}  // namespace cairn::format
