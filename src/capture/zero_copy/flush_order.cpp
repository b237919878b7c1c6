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

void FlushHistory::Learn(std::vector<Range> ranges, const std::vector<PageSeen>& seen, size_t page_bytes) {
  ranges_ = std::move(ranges);
  rank_ = RankPages(seen, &red_pages_);
  page_bytes_ = page_bytes;
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
