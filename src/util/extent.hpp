// A byte range of one region (or of one file), and sorted lists of them.
//
// Change detection (which parts of a region changed since the previous
// version) and format v2's layered versions (which parts a version stores
// and which it takes from its base) both speak in extents, so the type is
// declared once here. A list is *canonical* when its extents are sorted by
// offset, non-empty, and neither overlap nor touch (AppendExtent keeps a list
// canonical when offsets come in ascending order).
#pragma once

#include <cstdint>
#include <vector>

namespace cairn {

struct Extent {
  uint64_t offset = 0;  // from the start of the region (or file)
  uint64_t bytes = 0;
  uint64_t end() const { return offset + bytes; }
  friend bool operator==(const Extent&, const Extent&) = default;
};

using ExtentList = std::vector<Extent>;

// Appends [offset, offset + bytes) to `list`, merging it into the last
// extent when they overlap or touch. Precondition: offset >= the last
// extent's offset (ascending order); an empty range is ignored.
inline void AppendExtent(ExtentList& list, uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  if (!list.empty() && offset <= list.back().end()) {
    const uint64_t end = offset + bytes;
    if (end > list.back().end()) list.back().bytes = end - list.back().offset;
    return;
  }
  list.push_back(Extent{offset, bytes});
}

// Total bytes of a canonical list.
inline uint64_t ExtentBytes(const ExtentList& list) {
  uint64_t n = 0;
  for (const Extent& e : list) n += e.bytes;
  return n;
}

}  // namespace cairn
