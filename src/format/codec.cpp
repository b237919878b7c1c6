// Header, table and footer encoding (docs/format.md, section 2). Integers are
// written byte by byte so the format is little-endian on any host.
#include "format/codec.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "format/codec_v2.hpp"
#include "format/corrupt.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"
#include "util/crc32c.hpp"

namespace cairn::format {
namespace {

// Header field offsets.
constexpr size_t kHMagic = 0, kHVersion = 8, kHHeaderBytes = 12, kHKind = 16, kHBlockBytes = 20,
                 kHNumber = 24, kHCreated = 32, kHRegionCount = 40, kHBlockCount = 44,
                 kHPayload = 48, kHFileBytes = 56, kHCrc = 64;
// Footer field offsets.
constexpr size_t kFTableOffset = 0, kFTableBytes = 8, kFTableCrc = 16, kFNameLen = 20,
                 kFNumber = 24, kFKind = 32, kFVersion = 36, kFFileBytes = 40,
                 kFExtentCount = 48, kFCrc = 52, kFMagic = 56;
// Header bytes [kHCrc + 4, kHeaderBytes) are reserved: zero, checked in version 2.
constexpr size_t kHReserved = kHCrc + 4;

using le::Get32;
using le::Get64;
using le::Put32;
using le::Put64;

Status CheckVersion(uint32_t version, const char* where) {
  if (version == kFormatVersion || version == kFormatVersion2) return Status::Ok();
  return Status::Unsupported("format version " + std::to_string(version) + " in " + where +
                             " is not supported (this build reads versions 1 and 2)");
}

bool ValidKind(uint32_t k) {
  return k == static_cast<uint32_t>(EntryKind::kCheckpoint) ||
         k == static_cast<uint32_t>(EntryKind::kHistoryStep);
}

}  // namespace

uint64_t TableBytes(const Layout& layout, size_t name_len) {
  if (layout.format_version == kFormatVersion2) {
    return TableBytesV2(layout.regions.size(), layout.extents.size(), layout.blocks.size(),
                        name_len);
  }
  return kRegionEntryBytes * layout.regions.size() + kBlockEntryBytes * layout.blocks.size() +
         name_len;
}

uint64_t FileBytes(const Layout& layout, size_t name_len) {
  return AlignUp(layout.data_end + TableBytes(layout, name_len) + kFooterBytes);
}

Header MakeHeader(const FileInfo& info, const Layout& layout) {
  Header h;
  h.format_version = layout.format_version;
  h.kind = info.kind;
  h.block_bytes = layout.block_bytes;
  h.number = info.number;
  h.created_unix_ns = info.created_unix_ns;
  h.region_count = static_cast<uint32_t>(layout.regions.size());
  h.block_count = static_cast<uint32_t>(layout.blocks.size());
  h.payload_bytes = layout.payload_bytes;
  h.file_bytes = FileBytes(layout, info.name.size());
  return h;
}

void EncodeHeader(const Header& h, uint8_t* out) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out + kHMagic, kHeaderMagic, sizeof kHeaderMagic);
  Put32(out + kHVersion, h.format_version);
  Put32(out + kHHeaderBytes, static_cast<uint32_t>(kHeaderBytes));
  Put32(out + kHKind, static_cast<uint32_t>(h.kind));
  Put32(out + kHBlockBytes, h.block_bytes);
  Put64(out + kHNumber, static_cast<uint64_t>(h.number));
  Put64(out + kHCreated, static_cast<uint64_t>(h.created_unix_ns));
  Put32(out + kHRegionCount, h.region_count);
  Put32(out + kHBlockCount, h.block_count);
  Put64(out + kHPayload, h.payload_bytes);
  Put64(out + kHFileBytes, h.file_bytes);
  Put32(out + kHCrc, crc32c::Value(out, kHCrc));
}

Status DecodeHeader(const uint8_t* in, Header* h) {
  if (std::memcmp(in + kHMagic, kHeaderMagic, sizeof kHeaderMagic) != 0) {
    return Status::Corrupt("not a Cairn data file (bad header magic)");
  }
  // The version is checked before anything whose position a later version
  // might change (docs/format.md 2.7).
  const uint32_t version = Get32(in + kHVersion);
  CAIRN_RETURN_IF_ERROR(CheckVersion(version, "header"));
  const uint32_t stored = Get32(in + kHCrc);
  const uint32_t computed = crc32c::Value(in, kHCrc);
  if (stored != computed) {
    return CorruptF("header checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, computed);
  }
  const uint32_t header_bytes = Get32(in + kHHeaderBytes);
  if (header_bytes != kHeaderBytes) return CorruptF("header_bytes is %u, expected 4096", header_bytes);
  const uint32_t kind = Get32(in + kHKind);
  if (!ValidKind(kind)) return CorruptF("unknown entry kind %u in header", kind);
  if (version == kFormatVersion2) {
    // No CRC covers them: version 2 checks that they are zero (format.md 4.6).
    for (size_t i = kHReserved; i < kHeaderBytes; ++i) {
      if (in[i] != 0) return CorruptF("reserved header byte %zu is 0x%02x, not zero", i, in[i]);
    }
  }
  h->format_version = version;
  h->kind = static_cast<EntryKind>(kind);
  h->block_bytes = Get32(in + kHBlockBytes);
  if (h->block_bytes == 0 || h->block_bytes % kAlignment != 0) {
    return CorruptF("block_bytes %u is not a positive multiple of 4096", h->block_bytes);
  }
  h->number = static_cast<int64_t>(Get64(in + kHNumber));
  if (h->number < 0) return CorruptF("negative number %lld in header", I(h->number));
  h->created_unix_ns = static_cast<int64_t>(Get64(in + kHCreated));
  h->region_count = Get32(in + kHRegionCount);
  h->block_count = Get32(in + kHBlockCount);
  h->payload_bytes = Get64(in + kHPayload);
  h->file_bytes = Get64(in + kHFileBytes);
  return Status::Ok();
}

void EncodeFooter(const Footer& f, uint8_t* out) {
  std::memset(out, 0, kFooterBytes);
  Put64(out + kFTableOffset, f.table_offset);
  Put64(out + kFTableBytes, f.table_bytes);
  Put32(out + kFTableCrc, f.table_crc);
  Put32(out + kFNameLen, f.name_len);
  Put64(out + kFNumber, static_cast<uint64_t>(f.number));
  Put32(out + kFKind, static_cast<uint32_t>(f.kind));
  Put32(out + kFVersion, f.format_version);
  Put64(out + kFFileBytes, f.file_bytes);
  if (f.format_version == kFormatVersion2) Put32(out + kFExtentCount, f.extent_count);
  Put32(out + kFCrc, crc32c::Value(out, kFCrc));
  std::memcpy(out + kFMagic, kFooterMagic, sizeof kFooterMagic);
}

Status DecodeFooter(const uint8_t* in, Footer* f) {
  if (std::memcmp(in + kFMagic, kFooterMagic, sizeof kFooterMagic) != 0) {
    return Status::Corrupt("bad footer magic (file incomplete or overwritten)");
  }
  const uint32_t version = Get32(in + kFVersion);
  CAIRN_RETURN_IF_ERROR(CheckVersion(version, "footer"));
  const uint32_t stored = Get32(in + kFCrc);
  const uint32_t computed = crc32c::Value(in, kFCrc);
  if (stored != computed) {
    return CorruptF("footer checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, computed);
  }
  const uint32_t kind = Get32(in + kFKind);
  if (!ValidKind(kind)) return CorruptF("unknown entry kind %u in footer", kind);
  f->table_offset = Get64(in + kFTableOffset);
  f->table_bytes = Get64(in + kFTableBytes);
  f->table_crc = Get32(in + kFTableCrc);
  f->name_len = Get32(in + kFNameLen);
  f->number = static_cast<int64_t>(Get64(in + kFNumber));
  f->kind = static_cast<EntryKind>(kind);
  f->format_version = version;
  f->file_bytes = Get64(in + kFFileBytes);
  // Version 1 readers ignore the reserved field; version 2 stores a count.
  f->extent_count = version == kFormatVersion2 ? Get32(in + kFExtentCount) : 0;
  return Status::Ok();
}

Status CheckFooter(const Footer& f, const Header& h) {
  if (f.format_version != h.format_version) {
    return CorruptF("footer says format version %u, header says %u", f.format_version,
                    h.format_version);
  }
  if (f.number != h.number) {
    return CorruptF("footer says number %lld, header says %lld", I(f.number), I(h.number));
  }
  if (f.kind != h.kind) {
    return CorruptF("footer says kind %u, header says %u", static_cast<uint32_t>(f.kind),
                    static_cast<uint32_t>(h.kind));
  }
  if (f.file_bytes != h.file_bytes) {
    return CorruptF("footer says %llu file bytes, header says %llu", U(f.file_bytes),
                    U(h.file_bytes));
  }
  if (f.name_len == 0 || f.name_len > kMaxNameBytes) {
    return CorruptF("name length %u outside 1..%u", f.name_len, kMaxNameBytes);
  }
  const uint64_t expect_table =
      h.format_version == kFormatVersion2
          ? TableBytesV2(h.region_count, f.extent_count, h.block_count, f.name_len)
          : kRegionEntryBytes * h.region_count + kBlockEntryBytes * h.block_count + f.name_len;
  if (f.table_bytes != expect_table) {
    return CorruptF(
        "table_bytes %llu does not match %u regions, %u extents, %u blocks and a %u-byte name",
        U(f.table_bytes), h.region_count, f.extent_count, h.block_count, f.name_len);
  }
  if (f.table_offset < kHeaderBytes || f.table_offset % kAlignment != 0 ||
      f.table_offset > h.file_bytes ||
      AlignUp(f.table_offset + f.table_bytes + kFooterBytes) != h.file_bytes) {
    return CorruptF("table at offset %llu (%llu bytes) does not fit a %llu-byte file",
                    U(f.table_offset), U(f.table_bytes), U(h.file_bytes));
  }
  return Status::Ok();
}

void EncodeTables(const Layout& layout, const std::vector<uint32_t>& crcs, std::string_view name,
                  uint8_t* out) {
  if (layout.format_version == kFormatVersion2) return EncodeTablesV2(layout, crcs, name, out);
  uint8_t* p = out;
  for (const Layout::Region& r : layout.regions) {
    Put32(p + 0, static_cast<uint32_t>(r.spec.id));
    Put32(p + 4, static_cast<uint32_t>(r.spec.memory));
    Put64(p + 8, r.spec.bytes);
    Put64(p + 16, r.data_offset);
    Put32(p + 24, r.first_block);
    Put32(p + 28, r.block_count);
    p += kRegionEntryBytes;
  }
  for (size_t i = 0; i < layout.blocks.size(); ++i) {
    Put32(p + 0, crcs[i]);
    Put32(p + 4, layout.blocks[i].length);
    p += kBlockEntryBytes;
  }
  std::memcpy(p, name.data(), name.size());
}

namespace {

// Version 1's region entry r (at p) and its blocks' entries, checked
// against the header, the footer and the regions before it (*next_free:
// where the previous region's data ended, aligned; *ids: their ids).
Status DecodeRegionV1(const uint8_t* p, uint32_t r, const uint8_t* blocks_in, const Header& h,
                      const Footer& f, uint64_t* next_free, std::unordered_set<int32_t>* ids,
                      Layout* l, std::vector<uint32_t>* crcs) {
  Layout::Region reg;
  reg.spec.id = static_cast<int32_t>(Get32(p + 0));
  const uint32_t memory = Get32(p + 4);
  reg.spec.bytes = Get64(p + 8);
  reg.data_offset = Get64(p + 16);
  reg.first_block = Get32(p + 24);
  reg.block_count = Get32(p + 28);
  if (memory > static_cast<uint32_t>(MemoryKind::kManaged)) {
    return CorruptF("region %u (id %d): unknown memory kind %u", r, reg.spec.id, memory);
  }
  reg.spec.memory = static_cast<MemoryKind>(memory);
  if (!ids->insert(reg.spec.id).second) return CorruptF("region id %d appears twice", reg.spec.id);
  if (reg.spec.bytes > f.table_offset) {
    return CorruptF("region %u (id %d): %llu bytes do not fit before the table", r, reg.spec.id,
                    U(reg.spec.bytes));
  }
  const uint64_t bb = h.block_bytes;
  const uint64_t expect_blocks = (reg.spec.bytes + bb - 1) / bb;
  if (reg.block_count != expect_blocks) {
    return CorruptF("region %u (id %d): %u blocks, expected %llu for %llu bytes", r, reg.spec.id,
                    reg.block_count, U(expect_blocks), U(reg.spec.bytes));
  }
  if (reg.first_block != l->blocks.size()) {
    return CorruptF("region %u (id %d): first block %u, expected %zu", r, reg.spec.id,
                    reg.first_block, l->blocks.size());
  }
  if (l->blocks.size() + reg.block_count > h.block_count) {
    return CorruptF("regions hold more blocks than the header's %u", h.block_count);
  }
  if (reg.data_offset % kAlignment != 0 || reg.data_offset < *next_free ||
      reg.data_offset > f.table_offset ||
      AlignUp(reg.spec.bytes) > f.table_offset - reg.data_offset) {
    return CorruptF(
        "region %u (id %d): data offset %llu (%llu bytes) is misaligned, overlaps "
        "or lies outside [%llu, %llu)",
        r, reg.spec.id, U(reg.data_offset), U(reg.spec.bytes), U(*next_free), U(f.table_offset));
  }
  for (uint32_t j = 0; j < reg.block_count; ++j) {
    const uint32_t index = static_cast<uint32_t>(l->blocks.size());
    const uint8_t* b = blocks_in + kBlockEntryBytes * index;
    Layout::Block blk;
    blk.region = r;
    blk.offset = reg.data_offset + j * bb;
    blk.length = Get32(b + 4);
    const uint64_t expect_len = j + 1 < reg.block_count ? bb : reg.spec.bytes - j * bb;
    if (blk.length != expect_len) {
      return CorruptF("block %u (region id %d): length %u, expected %llu", index, reg.spec.id,
                      blk.length, U(expect_len));
    }
    crcs->push_back(Get32(b + 0));
    l->blocks.push_back(blk);
  }
  *next_free = reg.data_offset + AlignUp(reg.spec.bytes);
  // Version 1 stores every region whole: its implicit extent table.
  reg.stored_bytes = reg.spec.bytes;
  reg.first_extent = static_cast<uint32_t>(l->extents.size());
  if (reg.spec.bytes > 0) l->extents.push_back(Extent{0, reg.spec.bytes});
  reg.extent_count = static_cast<uint32_t>(l->extents.size() - reg.first_extent);
  l->payload_bytes += reg.spec.bytes;
  l->stored_bytes += reg.spec.bytes;
  l->regions.push_back(reg);
  return Status::Ok();
}

}  // namespace

Status DecodeTables(const uint8_t* in, const Header& h, const Footer& f, Layout* layout,
                    std::vector<uint32_t>* crcs, std::string* name) {
  const uint32_t stored = f.table_crc;
  const uint32_t computed = crc32c::Value(in, f.table_bytes);
  if (stored != computed) {
    return CorruptF("table checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, computed);
  }
  if (h.format_version == kFormatVersion2) return DecodeTablesV2(in, h, f, layout, crcs, name);
  const uint8_t* blocks_in = in + kRegionEntryBytes * h.region_count;
  const uint8_t* name_in = blocks_in + kBlockEntryBytes * h.block_count;
  name->assign(reinterpret_cast<const char*>(name_in), f.name_len);
  if (Status s = ValidateName(*name); !s.ok()) return Status::Corrupt("bad name in table: " + s.message());

  Layout l;
  l.block_bytes = h.block_bytes;
  l.regions.reserve(h.region_count);
  l.blocks.reserve(h.block_count);
  crcs->clear();
  crcs->reserve(h.block_count);
  std::unordered_set<int32_t> ids;
  uint64_t next_free = kHeaderBytes;  // end of the previous region, aligned
  for (uint32_t r = 0; r < h.region_count; ++r) {
    CAIRN_RETURN_IF_ERROR(
        DecodeRegionV1(in + kRegionEntryBytes * r, r, blocks_in, h, f, &next_free, &ids, &l, crcs));
  }
  if (l.blocks.size() != h.block_count) {
    return CorruptF("regions hold %zu blocks, header says %u", l.blocks.size(), h.block_count);
  }
  if (l.payload_bytes != h.payload_bytes) {
    return CorruptF("regions hold %llu bytes, header says %llu", U(l.payload_bytes),
                    U(h.payload_bytes));
  }
  l.data_end = f.table_offset;
  *layout = std::move(l);
  return Status::Ok();
}

}  // namespace cairn::format
