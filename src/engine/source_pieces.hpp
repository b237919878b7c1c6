// Where a version's stored bytes come from (capture.cpp and the zero-copy
// flush order, capture/zero_copy/zero_copy_order.cpp): each block's payload
// as pieces of its region's memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "format/layout.hpp"

namespace cairn::core {

// Where each extent of `l` starts in its region's packed stream.
inline std::vector<uint64_t> PackedStarts(const format::Layout& l) {
  std::vector<uint64_t> starts(l.extents.size());
  for (const auto& r : l.regions) {
    uint64_t at = 0;
    for (uint32_t k = r.first_extent; k < r.first_extent + r.extent_count; ++k) {
      starts[k] = at;
      at += l.extents[k].bytes;
    }
  }
  return starts;
}

// Calls fn(region_offset, payload_offset, bytes) for the pieces of block b's
// payload, in order: one for a region stored whole, one per extent (or part
// of one) the block covers in a layered region's packed stream.
template <typename Fn>
void SourcePieces(const format::Layout& l, const std::vector<uint64_t>& packed, uint32_t b, Fn&& fn) {
  const auto& blk = l.blocks[b];
  const auto& region = l.regions[blk.region];
  const uint64_t first = blk.offset - region.data_offset;  // the block's start in the packed stream
  const auto begin = packed.begin() + region.first_extent;
  const auto end = begin + region.extent_count;
  // The extent holding `first`: the last one starting at or before it.
  auto k = std::upper_bound(begin, end, first) - 1;
  for (uint64_t done = 0; done < blk.length; ++k) {
    const Extent& x = l.extents[static_cast<size_t>(k - packed.begin())];
    const uint64_t skip = first + done - *k;
    const uint64_t n = std::min<uint64_t>(x.bytes - skip, blk.length - done);
    fn(x.offset + skip, done, n);
    done += n;
  }
}

}  // namespace cairn::core
