// Version 2 tables (docs/format.md 4.3, checks 4.6). The region and block
// checks are those of version 1 over the packed stream, made strict (no gaps)
// so that no byte of the file escapes both the CRCs and the zero checks.
#include "format/codec_v2.hpp"

#include <cstdarg>
#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "format/corrupt.hpp"
#include "format/le.hpp"
#include "format/naming.hpp"

namespace cairn::format {
namespace {

using le::Get32;
using le::Get64;
using le::Put32;
using le::Put64;

// Where the parts of the table area start (T: uint8_t or const uint8_t).
template <typename T>
struct Parts {
  T* regions;
  T* extents;
  T* blocks;
  T* record;
  T* name;
};
template <typename T>
Parts<T> Split(T* in, uint64_t regions, uint64_t extents, uint64_t blocks) {
  Parts<T> p;
  p.regions = in;
  p.extents = p.regions + kRegionEntryBytesV2 * regions;
  p.blocks = p.extents + kExtentEntryBytes * extents;
  p.record = p.blocks + kBlockEntryBytes * blocks;
  p.name = p.record + kVersionRecordBytes;
  return p;
}

Status DecodeRecord(const uint8_t* p, int64_t number, VersionRecord* r) {
  r->content_id = Get64(p + 0);
  r->base_version = static_cast<int64_t>(Get64(p + 8));
  r->base_content_id = Get64(p + 16);
  r->depth = Get32(p + 24);
  const uint32_t reserved = Get32(p + 28);
  if (r->content_id == 0) return Status::Corrupt("version record: content_id is 0");
  if (reserved != 0) return CorruptF("version record: reserved field is 0x%08x, not zero", reserved);
  if (r->base_version == -1) {
    if (r->depth != 0 || r->base_content_id != 0) {
      return CorruptF("version record: full version with depth %u and base content id 0x%016llx",
                      r->depth, U(r->base_content_id));
    }
    return Status::Ok();
  }
  if (r->base_version < 0 || r->base_version >= number) {
    return CorruptF("version record: base version %lld is not in [0, %lld)", I(r->base_version),
                    I(number));
  }
  if (r->depth == 0 || r->base_content_id == 0) {
    return CorruptF("version record: layered version with depth %u and base content id 0x%016llx",
                    r->depth, U(r->base_content_id));
  }
  return Status::Ok();
}

// The region's extents (already appended to l.extents) against 4.6 item 4
// and, for a full version, the full extent.
Status CheckRegionExtents(const Layout& l, uint32_t r) {
  const Layout::Region& reg = l.regions[r];
  ExtentList list(l.extents.begin() + reg.first_extent,
                  l.extents.begin() + reg.first_extent + reg.extent_count);
  if (std::string what = ValidateExtents(list, reg.spec.bytes); !what.empty()) {
    return CorruptF("region %u (id %d): %s", r, reg.spec.id, what.c_str());
  }
  if (ExtentBytes(list) != reg.stored_bytes) {
    return CorruptF("region %u (id %d): extents hold %llu bytes, stored_bytes is %llu", r,
                    reg.spec.id, U(ExtentBytes(list)), U(reg.stored_bytes));
  }
  if (!l.record.layered() && reg.stored_bytes != reg.spec.bytes) {
    return CorruptF("region %u (id %d): a full version stores %llu of its %llu bytes", r,
                    reg.spec.id, U(reg.stored_bytes), U(reg.spec.bytes));
  }
  return Status::Ok();
}

// One region entry: fields, position, extents and blocks; appends to l.
Status DecodeRegion(const Parts<const uint8_t>& p, const Header& h, const Footer& f, uint32_t r,
                    Layout& l, std::vector<uint32_t>& crcs) {
  const uint8_t* e = p.regions + kRegionEntryBytesV2 * r;
  Layout::Region reg;
  reg.spec.id = static_cast<int32_t>(Get32(e + 0));
  const uint32_t memory = Get32(e + 4);
  reg.spec.bytes = Get64(e + 8);
  reg.stored_bytes = Get64(e + 16);
  reg.data_offset = Get64(e + 24);
  reg.first_block = Get32(e + 32);
  reg.block_count = Get32(e + 36);
  reg.first_extent = Get32(e + 40);
  reg.extent_count = Get32(e + 44);
  const int id = reg.spec.id;
  if (memory > static_cast<uint32_t>(MemoryKind::kManaged)) {
    return CorruptF("region %u (id %d): unknown memory kind %u", r, id, memory);
  }
  reg.spec.memory = static_cast<MemoryKind>(memory);
  const uint64_t expect_offset =
      l.regions.empty() ? kHeaderBytes
                        : l.regions.back().data_offset + AlignUp(l.regions.back().stored_bytes);
  if (reg.data_offset != expect_offset || reg.stored_bytes > f.table_offset ||
      AlignUp(reg.stored_bytes) > f.table_offset - reg.data_offset) {
    return CorruptF("region %u (id %d): data offset %llu (%llu stored bytes), expected %llu and "
                    "before the table at %llu",
                    r, id, U(reg.data_offset), U(reg.stored_bytes), U(expect_offset),
                    U(f.table_offset));
  }
  const uint64_t bb = h.block_bytes;
  const uint64_t expect_blocks = (reg.stored_bytes + bb - 1) / bb;
  if (reg.block_count != expect_blocks) {
    return CorruptF("region %u (id %d): %u blocks, expected %llu for %llu stored bytes", r, id,
                    reg.block_count, U(expect_blocks), U(reg.stored_bytes));
  }
  if (reg.first_block != l.blocks.size()) {
    return CorruptF("region %u (id %d): first block %u, expected %zu", r, id, reg.first_block,
                    l.blocks.size());
  }
  if (l.blocks.size() + reg.block_count > h.block_count) {
    return CorruptF("regions hold more blocks than the header's %u", h.block_count);
  }
  if (reg.first_extent != l.extents.size()) {
    return CorruptF("region %u (id %d): first extent %u, expected %zu", r, id, reg.first_extent,
                    l.extents.size());
  }
  if (l.extents.size() + reg.extent_count > f.extent_count) {
    return CorruptF("regions hold more extents than the footer's %u", f.extent_count);
  }
  for (uint32_t k = 0; k < reg.extent_count; ++k) {
    const uint8_t* x = p.extents + kExtentEntryBytes * (reg.first_extent + k);
    l.extents.push_back(Extent{Get64(x), Get64(x + 8)});
  }
  for (uint32_t j = 0; j < reg.block_count; ++j) {
    const uint32_t index = static_cast<uint32_t>(l.blocks.size());
    const uint8_t* b = p.blocks + kBlockEntryBytes * index;
    Layout::Block blk{r, reg.data_offset + j * bb, Get32(b + 4)};
    const uint64_t expect_len = j + 1 < reg.block_count ? bb : reg.stored_bytes - j * bb;
    if (blk.length != expect_len) {
      return CorruptF("block %u (region id %d): length %u, expected %llu", index, id, blk.length,
                      U(expect_len));
    }
    crcs.push_back(Get32(b + 0));
    l.blocks.push_back(blk);
  }
  l.regions.push_back(reg);
  l.payload_bytes += reg.spec.bytes;
  l.stored_bytes += reg.stored_bytes;
  return CheckRegionExtents(l, r);
}

}  // namespace

void EncodeTablesV2(const Layout& layout, const std::vector<uint32_t>& crcs, std::string_view name,
                    uint8_t* out) {
  const Parts<uint8_t> p = Split(out, layout.regions.size(), layout.extents.size(), layout.blocks.size());
  for (size_t r = 0; r < layout.regions.size(); ++r) {
    const Layout::Region& reg = layout.regions[r];
    uint8_t* e = p.regions + kRegionEntryBytesV2 * r;
    Put32(e + 0, static_cast<uint32_t>(reg.spec.id));
    Put32(e + 4, static_cast<uint32_t>(reg.spec.memory));
    Put64(e + 8, reg.spec.bytes);
    Put64(e + 16, reg.stored_bytes);
    Put64(e + 24, reg.data_offset);
    Put32(e + 32, reg.first_block);
    Put32(e + 36, reg.block_count);
    Put32(e + 40, reg.first_extent);
    Put32(e + 44, reg.extent_count);
  }
  for (size_t k = 0; k < layout.extents.size(); ++k) {
    uint8_t* x = p.extents + kExtentEntryBytes * k;
    Put64(x, layout.extents[k].offset);
    Put64(x + 8, layout.extents[k].bytes);
  }
  for (size_t i = 0; i < layout.blocks.size(); ++i) {
    uint8_t* b = p.blocks + kBlockEntryBytes * i;
    Put32(b + 0, crcs[i]);
    Put32(b + 4, layout.blocks[i].length);
  }
  uint8_t* rec = p.record;
  Put64(rec + 0, layout.record.content_id);
  Put64(rec + 8, static_cast<uint64_t>(layout.record.base_version));
  Put64(rec + 16, layout.record.base_content_id);
  Put32(rec + 24, layout.record.depth);
  Put32(rec + 28, 0);
  std::copy(name.begin(), name.end(), p.name);
}

Status DecodeTablesV2(const uint8_t* in, const Header& h, const Footer& f, Layout* layout,
                      std::vector<uint32_t>* crcs, std::string* name) {
  const Parts<const uint8_t> p = Split(in, h.region_count, f.extent_count, h.block_count);
  name->assign(reinterpret_cast<const char*>(p.name), f.name_len);
  if (Status s = ValidateName(*name); !s.ok()) return Status::Corrupt("bad name in table: " + s.message());
  Layout l;
  l.format_version = kFormatVersion2;
  l.block_bytes = h.block_bytes;
  CAIRN_RETURN_IF_ERROR(DecodeRecord(p.record, h.number, &l.record));
  crcs->clear();
  std::unordered_set<int32_t> ids;
  for (uint32_t r = 0; r < h.region_count; ++r) {
    CAIRN_RETURN_IF_ERROR(DecodeRegion(p, h, f, r, l, *crcs));
    if (!ids.insert(l.regions.back().spec.id).second) {
      return CorruptF("region id %d appears twice", l.regions.back().spec.id);
    }
  }
  if (l.blocks.size() != h.block_count) {
    return CorruptF("regions hold %zu blocks, header says %u", l.blocks.size(), h.block_count);
  }
  if (l.extents.size() != f.extent_count) {
    return CorruptF("regions hold %zu extents, footer says %u", l.extents.size(), f.extent_count);
  }
  if (l.payload_bytes != h.payload_bytes) {
    return CorruptF("regions hold %llu bytes, header says %llu", U(l.payload_bytes),
                    U(h.payload_bytes));
  }
  const uint64_t data_end =
      l.regions.empty() ? kHeaderBytes : l.regions.back().data_offset + AlignUp(l.regions.back().stored_bytes);
  if (data_end != f.table_offset) {
    return CorruptF("data ends at %llu, table starts at %llu (version 2 has no gaps)", U(data_end),
                    U(f.table_offset));
  }
  l.data_end = f.table_offset;
  *layout = std::move(l);
  return Status::Ok();
}

}  // namespace cairn::format
