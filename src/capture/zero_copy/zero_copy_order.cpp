// The reader's block order of a zero-copy epoch (capture/zero_copy/zero_copy_order.hpp).
#include "capture/zero_copy/zero_copy_order.hpp"

#include <algorithm>

#include "engine/source_pieces.hpp"
#include "os/mem/memory.hpp"

namespace cairn::core {

ZeroCopyOrder::ZeroCopyOrder(const format::Layout& l, const std::vector<CaptureSource>& sources,
                             const std::vector<uint64_t>& packed, ZeroCopy* zc, bool learned)
    : zc_(zc), learned_(learned), taken_(l.blocks.size(), false) {
  const auto nblocks = static_cast<uint32_t>(l.blocks.size());
  const uintptr_t page = os::PageSize();
  const FlushHistory& history = zc->history();
  bootstrap_ = history.empty();
  address_fallback_ = learned_ && zc->address_epoch();
  if (learned_) block_of_page_.assign(zc->pages(), kNoBlock);
  // A block with a page that went RED last epoch (the application waited
  // for it) goes by that page's rank, as the slides put RED pages first.
  // Otherwise it is read at once, so it goes by the median rank of its
  // pages: when half of them were needed last epoch. Its earliest page
  // would let one stray write, which the COW buffer absorbed (ORANGE), move
  // the block to the front, and a few stray writes per block (an irregular
  // pattern) turned the whole order into last epoch's stray writes, which
  // do not recur; a stray write that does come early is trapped and taken
  // first (Next), or absorbed again.
  std::vector<uint64_t> key(nblocks, FlushHistory::kUnknown);
  std::vector<uint32_t> ranks;
  bool page_aligned = true;
  for (uint32_t b = 0; b < nblocks && learned_; ++b) {
    const auto base = reinterpret_cast<uintptr_t>(sources[l.blocks[b].region].data);
    ranks.clear();
    SourcePieces(l, packed, b, [&](uint64_t from, uint64_t, uint64_t n) {
      if ((base + from) % page != 0 || n % page != 0) page_aligned = false;
      for (uintptr_t a = (base + from) / page * page; a < base + from + n; a += page) {
        // Planned by address: every key stays kUnknown (ties: file order).
        const uint32_t r = address_fallback_ ? FlushHistory::kUnknown : history.RankOf(a);
        if (r != FlushHistory::kUnknown) ranks.push_back(r);
        const int64_t i = zc->PageIndex(a);
        if (i >= 0 && block_of_page_[static_cast<size_t>(i)] == kNoBlock) block_of_page_[static_cast<size_t>(i)] = b;
      }
    });
    if (!ranks.empty()) {
      const auto red = std::min_element(ranks.begin(), ranks.end());
      if (*red < history.red_pages()) {
        key[b] = *red;
        continue;
      }
      const auto mid = ranks.begin() + static_cast<std::ptrdiff_t>((ranks.size() - 1) / 2);
      std::nth_element(ranks.begin(), mid, ranks.end());
      key[b] = *mid;
    }
  }
  // A page shared by two blocks must be read piece by piece in address order
  // (ZeroCopy::Read): such layouts (extents not page-aligned) keep file order.
  if (!page_aligned) {
    learned_ = false;
    address_fallback_ = false;
    block_of_page_.clear();
    std::fill(key.begin(), key.end(), 0);
  }
  order_ = OrderByKey(key);
  if (learned_) {
    plan_pos_.resize(nblocks);
    for (uint32_t i = 0; i < nblocks; ++i) plan_pos_[order_[i]] = i;
  }
}

// RED pages always jump the queue: the application waits for them. An
// ORANGE page's block only frees a slot, and taking it breaks the planned
// order: a stray write per block (an irregular pattern) would hand the reader
// every block in the strays' random order, and the application's regular
// writes then overtake it. So ORANGE blocks go first only while the COW
// buffer is more than half full, soonest planned first (the least change to
// the plan), or, in trap order, in an epoch without history: there the
// reader following the application's trapped writes is what makes the read
// order worth learning (a sweep is read as it is written).
std::optional<uint32_t> ZeroCopyOrder::Next() {
  if (learned_) {
    for (int64_t p; (p = zc_->NextRedPage()) >= 0;) {
      if (const uint32_t b = block_of_page_[static_cast<size_t>(p)]; Take(b)) return b;
    }
    for (int64_t p; (p = zc_->NextOrangePage()) >= 0;) {
      const uint32_t b = block_of_page_[static_cast<size_t>(p)];
      if (bootstrap_) {
        if (Take(b)) return b;
      } else if (b != kNoBlock && !taken_[b]) {
        orange_.push({plan_pos_[b], b});
      }
    }
    while (!orange_.empty() && zc_->CowOverHalf()) {
      const uint32_t b = orange_.top().second;
      orange_.pop();
      if (Take(b)) return b;
    }
  }
  while (pos_ < order_.size()) {
    if (const uint32_t b = order_[pos_++]; Take(b)) return b;
  }
  return std::nullopt;
}

bool ZeroCopyOrder::Take(uint32_t b) {
  if (b == kNoBlock || taken_[b]) return false;
  taken_[b] = true;
  ++handed_out_;
  return true;
}

}  // namespace cairn::core
