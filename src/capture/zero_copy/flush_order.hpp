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
// Thread safety: none (the capture's reader thread, one epoch at a time).
#pragma once

#include <cstddef>
#include <cstdint>
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

// The last epoch's page ranks, by address.
class FlushHistory {
 public:
  static constexpr uint32_t kUnknown = ~uint32_t{0};
  struct Range {
    uintptr_t start = 0;
    size_t bytes = 0;
    size_t first_page = 0;  // index of its first page in the epoch
  };
  // ranges sorted by start; seen: one per page of the ranges.
  void Learn(std::vector<Range> ranges, const std::vector<PageSeen>& seen, size_t page_bytes);
  // The rank of the page at page-aligned address a, kUnknown if not seen.
  uint32_t RankOf(uintptr_t a) const;
  // Pages that were RED: they hold ranks 0 .. red_pages() - 1.
  uint32_t red_pages() const { return red_pages_; }
  bool empty() const { return ranges_.empty(); }
  size_t memory_bytes() const { return rank_.capacity() * sizeof(uint32_t); }

 private:
  std::vector<Range> ranges_;
  std::vector<uint32_t> rank_;
  uint32_t red_pages_ = 0;
  size_t page_bytes_ = 4096;
};

}  // namespace cairn::core
