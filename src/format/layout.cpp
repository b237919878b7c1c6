// Layout::Make: where each region and block of a data file goes
// (docs/format.md 2.2).
#include "format/layout.hpp"

namespace cairn::format {

Layout Layout::Make(const std::vector<RegionSpec>& regions, uint32_t block_bytes) {
  VersionRecord full;
  Layout l = MakeV2(regions, FullExtents(regions), block_bytes, full);
  l.format_version = kFormatVersion;
  return l;
}

std::vector<ExtentList> Layout::FullExtents(const std::vector<RegionSpec>& regions) {
  std::vector<ExtentList> out(regions.size());
  for (size_t r = 0; r < regions.size(); ++r) AppendExtent(out[r], 0, regions[r].bytes);
  return out;
}

Layout Layout::MakeV2(const std::vector<RegionSpec>& regions,
                      const std::vector<ExtentList>& extents, uint32_t block_bytes,
                      const VersionRecord& record) {
  Layout l;
  l.format_version = kFormatVersion2;
  l.block_bytes = block_bytes;
  l.record = record;
  l.regions.reserve(regions.size());
  uint64_t offset = kHeaderBytes;
  for (size_t i = 0; i < regions.size(); ++i) {
    Region r;
    r.spec = regions[i];
    r.first_extent = static_cast<uint32_t>(l.extents.size());
    if (i < extents.size()) l.extents.insert(l.extents.end(), extents[i].begin(), extents[i].end());
    r.extent_count = static_cast<uint32_t>(l.extents.size() - r.first_extent);
    for (uint32_t k = 0; k < r.extent_count; ++k) r.stored_bytes += l.extents[r.first_extent + k].bytes;
    r.data_offset = offset;
    r.first_block = static_cast<uint32_t>(l.blocks.size());
    const uint64_t n = (r.stored_bytes + block_bytes - 1) / block_bytes;
    r.block_count = static_cast<uint32_t>(n);
    const uint32_t region_index = static_cast<uint32_t>(l.regions.size());
    for (uint64_t j = 0; j < n; ++j) {
      Block b;
      b.region = region_index;
      b.offset = offset + j * block_bytes;
      b.length = static_cast<uint32_t>(j + 1 < n ? block_bytes : r.stored_bytes - j * block_bytes);
      l.blocks.push_back(b);
    }
    offset += AlignUp(r.stored_bytes);
    l.payload_bytes += r.spec.bytes;
    l.stored_bytes += r.stored_bytes;
    l.regions.push_back(r);
  }
  l.data_end = offset;
  return l;
}

std::string ValidateExtents(const ExtentList& list, uint64_t region_bytes) {
  uint64_t next = 0;  // the first offset the next extent may start at
  for (size_t k = 0; k < list.size(); ++k) {
    const Extent& e = list[k];
    const std::string at = "extent " + std::to_string(k) + " [" + std::to_string(e.offset) + ", +" +
                           std::to_string(e.bytes) + ")";
    if (e.bytes == 0) return at + " is empty";
    if (k > 0 && e.offset < next) return at + " overlaps or touches the previous one";
    if (e.offset > region_bytes || e.bytes > region_bytes - e.offset) {
      return at + " ends past the region's " + std::to_string(region_bytes) + " bytes";
    }
    next = e.end() + 1;
  }
  return "";
}

}  // namespace cairn::format
