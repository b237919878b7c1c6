// Pipeline::CopyCached and what goes with it (pipeline.hpp): a version's
// file bytes, served from the host cache where its blocks are, before and
// after its local commit.
#include <algorithm>
#include <cstring>

#include "engine/pipeline.hpp"
#include "format/codec.hpp"

namespace cairn::core {

ExtentList Pipeline::CopyCached(const std::string& name, int64_t number, uint64_t offset,
                                uint64_t bytes, uint8_t* dst) {
  const uint64_t end = offset + bytes;
  // A block's bytes in the range: [at, at + payload) from the cache, then
  // `zeros` bytes of its padding.
  struct Piece {
    uint64_t at;
    const uint8_t* src;
    uint64_t payload, zeros;
  };
  std::vector<Piece> pieces;
  EntryPtr e;
  {
    MutexLock lock(&mu_);
    e = catalog_.Find(format::EntryKind::kCheckpoint, name, number);
    if (!e || !e->capture().done || e->failed() || e->consumed()) return {{offset, bytes}};
    // Blocks lie in ascending offsets (Layout::Make, MakeV2): the first one
    // that ends past `offset` is found by bisection, not by a scan of every
    // block per chunk. Were a table out of order, a block this skips would
    // be reported as a gap and read from the file.
    const auto& blocks = e->layout.blocks;
    const auto first =
        std::partition_point(blocks.begin(), blocks.end(), [&](const format::Layout::Block& lb) {
          return lb.offset + format::AlignUp(lb.length) <= offset;
        });
    for (auto b = static_cast<uint32_t>(first - blocks.begin());
         b < blocks.size() && blocks[b].offset < end; ++b) {
      const format::Layout::Block& lb = blocks[b];
      const uint64_t lo = std::max(offset, lb.offset);
      const uint64_t hi = std::min(end, lb.offset + format::AlignUp(lb.length));
      if (lo >= hi || !e->in_host(b)) continue;
      const uint64_t payload_end = std::min(hi, lb.offset + lb.length);
      const uint64_t payload = payload_end > lo ? payload_end - lo : 0;
      pieces.push_back(
          {.at = lo,
           .src = store_.data(static_cast<uint32_t>(e->blocks()[b].chunk)) + (lo - lb.offset),
           .payload = payload,
           .zeros = hi - lo - payload});
    }
    if (pieces.empty()) return {{offset, bytes}};
    store_.Pin(*e);  // its chunks stay while they are copied below
  }
  for (const Piece& p : pieces) {
    std::memcpy(dst + (p.at - offset), p.src, p.payload);
    std::memset(dst + (p.at - offset) + p.payload, 0, p.zeros);
  }
  {
    MutexLock lock(&mu_);
    Unpin(e);
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.at < b.at; });
  ExtentList gaps;
  uint64_t at = offset;
  for (const Piece& p : pieces) {
    if (p.at > at) AppendExtent(gaps, at, p.at - at);
    at = std::max(at, p.at + p.payload + p.zeros);
  }
  if (at < end) AppendExtent(gaps, at, end - at);
  return gaps;
}

Result<uint64_t> Pipeline::PlannedFileBytes(const std::string& name, int64_t number) {
  MutexLock lock(&mu_);
  const EntryPtr e = catalog_.Find(format::EntryKind::kCheckpoint, name, number);
  if (!e || !e->capture().done || e->failed() || e->layout.layered()) {
    return Status::NotFound("version " + std::to_string(number) + " of '" + name +
                            "': not captured whole as a full version");
  }
  return format::FileBytes(e->layout, name.size());
}

Result<bool> Pipeline::CommittedLocally(const std::string& name, int64_t number) {
  MutexLock lock(&mu_);
  const EntryPtr e = catalog_.Find(format::EntryKind::kCheckpoint, name, number);
  if (e && e->failed()) return e->local().error;
  if (e) return e->local().committed;
  if (commits_.NewestLocal(name).version >= number) return true;
  return Status::NotFound("version " + std::to_string(number) + " of '" + name +
                          "' is not in the pipeline");
}

}  // namespace cairn::core
