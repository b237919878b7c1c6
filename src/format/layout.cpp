// Layout::Make: where each region and block of a data file goes
// (docs/format.md 2.2).
#include "format/layout.hpp"

namespace cairn::format {

Layout Layout::Make(const std::vector<RegionSpec>& regions, uint32_t block_bytes) {
  Layout l;
  l.block_bytes = block_bytes;
  l.regions.reserve(regions.size());
  uint64_t offset = kHeaderBytes;
  for (const RegionSpec& spec : regions) {
    Region r;
    r.spec = spec;
    r.data_offset = offset;
    r.first_block = static_cast<uint32_t>(l.blocks.size());
    const uint64_t n = (spec.bytes + block_bytes - 1) / block_bytes;
    r.block_count = static_cast<uint32_t>(n);
    const uint32_t region_index = static_cast<uint32_t>(l.regions.size());
    for (uint64_t j = 0; j < n; ++j) {
      Block b;
      b.region = region_index;
      b.offset = offset + j * block_bytes;
      b.length = static_cast<uint32_t>(j + 1 < n ? block_bytes : spec.bytes - j * block_bytes);
      l.blocks.push_back(b);
    }
    l.regions.push_back(r);
    offset += AlignUp(spec.bytes);
    l.payload_bytes += spec.bytes;
  }
  l.data_end = offset;
  return l;
}

}  // namespace cairn::format
