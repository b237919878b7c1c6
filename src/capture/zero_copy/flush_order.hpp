// The learned flush order of zero-copy epochs (AI-Ckpt's final algorithm;
// docs/design.md, "Zero-copy captures", "Flush order"). What an epoch saw of
// each page (its color, the sequence number of its first trapped write, when
// the reader finished it) ranks the pages for the next epoch:
//
//   pages RED last epoch, then ORANGE, then GREEN, then BLUE, then pages not
//   written (watched epochs) or not seen;
//   within a color by first-write order (pages with no trapped write after
//   those with one), ties by the last epoch's read order.
//
// Within the epoch, the reader (engine/zero_copy_capture.hpp) takes the block of any
// page that goes RED first, then of any page that goes ORANGE (to free its
// slot; only under COW pressure or without history: ZeroCopyOrder::Next),
// then the blocks by that rank. The ranks are relative orders, not
// times, so an epoch longer or shorter than the last one (an irregular
// checkpoint interval) keeps a valid order; a shifted pattern shows up as
// RED/ORANGE pages this epoch and is learned for the next one. Only the last
// epoch is remembered.
//
// Some patterns cannot be learned from the last epoch: an order that changes
// between epochs (reversed on odd ones, forward on even ones) makes the last
// epoch's ranks the worst order for this one. So each epoch also scores how
// well the ranks it was planned by foretold its first writes, against how
// well address order would have (ScoreOrders). Unless the ranks have been
// the clearly better forecast (FlushHistory::PrefersAddressOrder), the next
// epochs fall back to address order: planned by address (RED pages still
// first) and not watched, so they cost what checkpoint.zero_copy_order =
// address costs. The ranks must earn their watch: most of what a learned
// order costs where it cannot win is the watch, not the order
// (docs/results/2026-12-06-flush-order-predictors.md), and with a watch by
// blocks the ranks of pages without a first write are the last read order,
// so a plan from them is often file order already. An unwatched epoch
// read by address ranks its pages by read position, which says nothing of
// the application's order, so those epochs are not scored: after
// kProbeAfter of them the scores start afresh and the learned order is
// tried again.
//
// Thread safety: none (the capture's reader thread, one epoch at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace cairn::core {

// BLUE (first written after the version was complete) and kNone (not written
// between two checkpoints) are known only when the epoch was watched
// (capture/zero_copy/zero_copy.hpp); unwatched, every page read from memory is GREEN.
enum class PageColor : uint8_t { kRed = 0, kOrange = 1, kGreen = 2, kBlue = 3, kNone = 4 };

// What one epoch saw of one page.
struct PageSeen {
  PageColor color = PageColor::kNone;
  uint32_t first_write = 0;  // 1 + the sequence number of its first trapped write; 0 = none
  uint32_t read_pos = 0;     // when the reader finished it (0, 1, ...)
};

// The rank of each page for the next epoch (0 = first; a permutation);
// *red (optional): how many pages were RED (they hold ranks 0 .. *red - 1).
std::vector<uint32_t> RankPages(const std::vector<PageSeen>& seen, uint32_t* red = nullptr);

// Block indices sorted by key, ties by index (stable).
std::vector<uint32_t> OrderByKey(const std::vector<uint64_t>& key);

// How well two forecasts foretold an epoch's first writes: of the pages
// written (first_write > 0), taken in first-write order, the fraction of
// consecutive pairs that the forecast puts in the same order. `learned`
// forecasts by `prior_rank` (the ranks the epoch was planned by, one per
// page of the same ranges), `address` by page index (address order: the
// ranges are sorted by start). 1: the writes followed the forecast; 0: they
// ran against it; ~0.5: no relation. nullopt with fewer than
// kMinScoredWrites written pages (too few to judge an order by).
struct OrderScores {
  double learned = 0;
  double address = 0;
};
constexpr size_t kMinScoredWrites = 64;
std::optional<OrderScores> ScoreOrders(const std::vector<uint32_t>& prior_rank,
                                       const std::vector<PageSeen>& seen);

// The last epoch's page ranks, by address.
class FlushHistory {
 public:
  static constexpr uint32_t kUnknown = ~uint32_t{0};
  struct Range {
    uintptr_t start = 0;
    size_t bytes = 0;
    size_t first_page = 0;  // index of its first page in the epoch
    friend bool operator==(const Range&, const Range&) = default;
  };
  // ranges sorted by start; seen: one per page of the ranges. Over the same
  // ranges as the last epoch, also scores the last ranks (ScoreOrders),
  // unless the epoch followed address order (`followed_address`: the
  // fallback); other ranges start the scores afresh.
  void Learn(std::vector<Range> ranges, const std::vector<PageSeen>& seen, size_t page_bytes,
             bool followed_address = false);
  // The rank of the page at page-aligned address a, kUnknown if not seen.
  uint32_t RankOf(uintptr_t a) const;
  // Pages that were RED: they hold ranks 0 .. red_pages() - 1.
  uint32_t red_pages() const { return red_pages_; }
  bool empty() const { return ranges_.empty(); }
  size_t memory_bytes() const { return rank_.capacity() * sizeof(uint32_t); }

  // The forecasts' scores, each an average over the scored epochs that
  // weighs the last one by half (a pattern that changes is followed within
  // two epochs), and how many epochs were scored.
  const OrderScores& scores() const { return scores_; }
  uint32_t scored_epochs() const { return scored_epochs_; }
  // Over at least two scored epochs, the ranks did not forecast the first
  // writes better than address order by kLearnedMargin: the next epoch is
  // planned by address. So a sweep (both ~1), writes in a new random order
  // every epoch (both ~0.5) and an order that flips (the ranks ~0) fall
  // back; a steady reversed or random order (the ranks ~1, address ~0 or
  // ~0.5) keeps the ranks.
  static constexpr double kLearnedMargin = 0.1;
  bool PrefersAddressOrder() const {
    return scored_epochs_ >= 2 && scores_.learned < scores_.address + kLearnedMargin;
  }
  // Epochs that follow address order before the learned order is tried again.
  static constexpr uint32_t kProbeAfter = 8;

 private:
  void Score(const OrderScores& s);

  std::vector<Range> ranges_;
  std::vector<uint32_t> rank_;
  uint32_t red_pages_ = 0;
  size_t page_bytes_ = 4096;
  OrderScores scores_;
  uint32_t scored_epochs_ = 0;
  uint32_t address_epochs_ = 0;  // followed address order since the last scores reset
};

}  // namespace cairn::core
