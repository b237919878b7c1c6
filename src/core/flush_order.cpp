// The learned flush order (core/flush_order.hpp).
#include "core/flush_order.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace cairn::core {

std::vector<uint32_t> RankPages(const std::vector<PageSeen>& seen) {
  std::vector<uint32_t> by(seen.size());
  std::iota(by.begin(), by.end(), 0u);
  // No trapped write: after every page with one (first_write - 1 wraps).
  auto key = [&](uint32_t i) {
    const PageSeen& s = seen[i];
    return std::tuple(static_cast<uint8_t>(s.color), s.first_write - 1u, s.read_pos);
  };
  std::stable_sort(by.begin(), by.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  std::vector<uint32_t> rank(seen.size());
  for (uint32_t r = 0; r < by.size(); ++r) rank[by[r]] = r;
  return rank;
}

std::vector<uint32_t> OrderByKey(const std::vector<uint64_t>& key) {
  std::vector<uint32_t> order(key.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key[a] < key[b]; });
  return order;
}

void FlushHistory::Learn(std::vector<Range> ranges, const std::vector<PageSeen>& seen, size_t page_bytes) {
  ranges_ = std::move(ranges);
  rank_ = RankPages(seen);
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
