// The learned flush order (capture/zero_copy/flush_order.hpp).
#include "capture/zero_copy/flush_order.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace cairn::core {

namespace {

// One stable counting-sort pass of `by` on the 16-bit digit digit(i); a pass
// whose digit is the same for every page changes nothing and is skipped.
template <typename Digit>
void SortPass(std::vector<uint32_t>& by, std::vector<uint32_t>& tmp, std::vector<uint32_t>& count, Digit digit) {
  std::fill(count.begin(), count.end(), 0u);
  for (const uint32_t i : by) ++count[digit(i)];
  if (!by.empty() && count[digit(by[0])] == by.size()) return;
  uint32_t sum = 0;
  for (uint32_t& c : count) sum += std::exchange(c, sum);
  for (const uint32_t i : by) tmp[count[digit(i)]++] = i;
  by.swap(tmp);
}

}  // namespace

// Runs at every checkpoint call that ends a watch, so it must be cheap for
// millions of pages: a least-significant-digit radix sort (stable, so ties
// stay in page order) by read_pos, then first_write - 1, then color, in
// 16-bit digits: a few linear passes instead of a comparison sort (~30 ms
// for 1 GiB of 4 KiB pages with std::stable_sort).
std::vector<uint32_t> RankPages(const std::vector<PageSeen>& seen, uint32_t* red) {
  std::vector<uint32_t> by(seen.size()), tmp(seen.size()), count(1u << 16);
  std::iota(by.begin(), by.end(), 0u);
  SortPass(by, tmp, count, [&](uint32_t i) { return seen[i].read_pos & 0xffffu; });
  SortPass(by, tmp, count, [&](uint32_t i) { return seen[i].read_pos >> 16; });
  // No trapped write: after every page with one (first_write - 1 wraps).
  SortPass(by, tmp, count, [&](uint32_t i) { return (seen[i].first_write - 1u) & 0xffffu; });
  SortPass(by, tmp, count, [&](uint32_t i) { return (seen[i].first_write - 1u) >> 16; });
  SortPass(by, tmp, count, [&](uint32_t i) { return static_cast<uint32_t>(seen[i].color); });
  // count[kRed] is now where RED ends, which is how many there are (also
  // when the pass was skipped: then it holds every page, or none).
  if (red != nullptr) *red = seen.empty() ? 0 : count[static_cast<uint32_t>(PageColor::kRed)];
  std::vector<uint32_t>& rank = tmp;  // reused: every slot is written below
  for (uint32_t r = 0; r < by.size(); ++r) rank[by[r]] = r;
  return std::move(rank);
}

std::vector<uint32_t> OrderByKey(const std::vector<uint64_t>& key) {
  std::vector<uint32_t> order(key.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key[a] < key[b]; });
  return order;
}

// Two radix passes over the written pages only, so that scoring costs the
// epoch's writes, not a sort of every page.
std::optional<OrderScores> ScoreOrders(const std::vector<uint32_t>& prior_rank,
                                       const std::vector<PageSeen>& seen) {
  if (prior_rank.size() != seen.size()) return std::nullopt;
  std::vector<uint32_t> by;
  for (uint32_t i = 0; i < seen.size(); ++i) {
    if (seen[i].first_write != 0) by.push_back(i);
  }
  if (by.size() < kMinScoredWrites) return std::nullopt;
  std::vector<uint32_t> tmp(by.size()), count(1u << 16);
  SortPass(by, tmp, count, [&](uint32_t i) { return (seen[i].first_write - 1u) & 0xffffu; });
  SortPass(by, tmp, count, [&](uint32_t i) { return (seen[i].first_write - 1u) >> 16; });
  size_t learned = 0, address = 0;
  for (size_t k = 1; k < by.size(); ++k) {
    learned += prior_rank[by[k - 1]] < prior_rank[by[k]] ? 1 : 0;
    address += by[k - 1] < by[k] ? 1 : 0;
  }
  const auto pairs = static_cast<double>(by.size() - 1);
  return OrderScores{.learned = static_cast<double>(learned) / pairs,
                     .address = static_cast<double>(address) / pairs};
}

void FlushHistory::Learn(std::vector<Range> ranges, const std::vector<PageSeen>& seen,
                         size_t page_bytes, bool followed_address) {
  const bool same = page_bytes == page_bytes_ && ranges == ranges_;
  if (!same || (followed_address && ++address_epochs_ >= kProbeAfter)) {
    scores_ = {};
    scored_epochs_ = 0;
    address_epochs_ = 0;
  } else if (!followed_address) {
    if (const std::optional<OrderScores> s = ScoreOrders(rank_, seen)) Score(*s);
  }
  ranges_ = std::move(ranges);
  rank_ = RankPages(seen, &red_pages_);
  page_bytes_ = page_bytes;
}

void FlushHistory::Score(const OrderScores& s) {
  if (scored_epochs_++ == 0) {
    scores_ = s;
    return;
  }
  scores_.learned = (scores_.learned + s.learned) / 2;
  scores_.address = (scores_.address + s.address) / 2;
}

uint32_t FlushHistory::RankOf(uintptr_t a) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), a,
                             [](uintptr_t x, const Range& r) { return x < r.start; });
  if (it == ranges_.begin()) return kUnknown;
  --it;
  if (a >= it->start + it->bytes) return kUnknown;
  const size_t i = it->first_page + (a - it->start) / page_bytes_;
  return i < rank_.size() ? rank_[i] : kUnknown;
}

}  // namespace cairn::core
