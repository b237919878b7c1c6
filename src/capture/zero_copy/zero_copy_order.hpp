// The order in which a zero-copy epoch's reader takes the blocks of a version
// (checkpoint.zero_copy_order; capture/zero_copy/flush_order.hpp for the algorithm).
// `address`: the blocks in file order. `learned`: the block of a page that
// went RED first, then of one that went ORANGE (its slot comes back sooner;
// only while the COW buffer is over half full, or without history: Next),
// then the blocks by their page that went RED last epoch, else by the last
// epoch's median rank of their pages; or, while the ranks do not foretell the
// last epochs' first writes better than address order (ZeroCopy::
// address_epoch: a sweep, an order that changes between epochs), the blocks
// in file order, RED and ORANGE pages first as above.
// Blocks sit at fixed file offsets (docs/format.md 3.3: any order), so the
// order changes no byte of the version.
//
// Thread safety: the reader thread's, during one epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "capture/layering.hpp"
#include "capture/zero_copy/zero_copy.hpp"
#include "format/layout.hpp"

namespace cairn::core {

class ZeroCopyOrder {
 public:
  // zc in an epoch over the host memory of `sources`; packed: PackedStarts.
  ZeroCopyOrder(const format::Layout& l, const std::vector<CaptureSource>& sources,
                const std::vector<uint64_t>& packed, ZeroCopy* zc, bool learned);
  // The next block to read (each once), nullopt when all were handed out.
  std::optional<uint32_t> Next();
  // Whether the reader should keep room for RED pages now (Pipeline::
  // HoldRoom): Next takes their blocks first (the learned order) and a first
  // write may go RED soon (no COW slot, or half of them in use).
  bool WantsSpares() const { return learned_ && zc_->CowHalfFullOrNone(); }
  // A page went RED and waits in the queue (learned order: Next takes its
  // block first; the page may have been read meanwhile).
  bool RedWaiting() const { return learned_ && zc_->RedQueued(); }
  // Every block was handed out: Next has nothing more.
  bool Done() const { return handed_out_ == taken_.size(); }
  // The planned order (before urgent pages): for tests.
  const std::vector<uint32_t>& planned() const { return order_; }
  // The learned order gave way to address order this epoch (stats:
  // zero_copy_address_epochs).
  bool address_fallback() const { return address_fallback_; }

 private:
  static constexpr uint32_t kNoBlock = ~uint32_t{0};
  bool Take(uint32_t b);  // marks block b taken; false if it was (or is kNoBlock)
  ZeroCopy* zc_;
  bool learned_;
  bool bootstrap_ = false;  // no history: ORANGE blocks always go first (Next)
  bool address_fallback_ = false;
  std::vector<uint32_t> order_;
  size_t pos_ = 0;
  std::vector<uint32_t> block_of_page_;  // epoch page -> the first block reading it
  std::vector<bool> taken_;
  size_t handed_out_ = 0;  // blocks taken
  std::vector<uint32_t> plan_pos_;  // block -> its place in order_
  // ORANGE pages' blocks not taken yet, soonest planned first (Next).
  std::priority_queue<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint32_t, uint32_t>>, std::greater<>>
      orange_;
};

}  // namespace cairn::core
