#include "tiers/host_cache.hpp"

#include <algorithm>
#include <string>

namespace cairn::core {

int ChunkNodes::node_of(uint32_t chunk) const {
  if (begin.empty()) return -1;
  return static_cast<int>(std::upper_bound(begin.begin(), begin.end(), chunk) - begin.begin()) - 1;
}

Result<HostCache> HostCache::Create(uint64_t capacity_bytes, uint32_t chunk_bytes,
                                    const os::MapOptions& options, os::Numa* numa,
                                    uint64_t reserve_bytes) {
  if (chunk_bytes == 0) return Status::InvalidArgument("host cache: block size is 0");
  uint64_t count = capacity_bytes / chunk_bytes;
  if (count < 2) {
    return Status::Config("host_cache.size (" + std::to_string(capacity_bytes) +
                          " bytes) must hold at least 2 blocks of " + std::to_string(chunk_bytes) +
                          " bytes");
  }
  if (count > UINT32_MAX) return Status::Config("host_cache.size: too many blocks");
  uint64_t reserved = count;
  if (numa == nullptr && !options.populate) {
    reserved = std::clamp<uint64_t>(reserve_bytes / chunk_bytes, count, UINT32_MAX);
  }
  HostCache cache;
  // Bound before the first touch, so that populating (eager) or the
  // initializer's touching allocates every page on its node at once.
  os::MapOptions map = options;
  if (numa != nullptr) map.populate = false;
  CAIRN_ASSIGN_OR_RETURN(cache.mapping_, os::Mapping::Create(reserved * chunk_bytes, map));
  cache.chunk_bytes_ = chunk_bytes;
  cache.chunk_count_ = static_cast<uint32_t>(count);
  cache.reserved_count_ = static_cast<uint32_t>(reserved);
  if (numa != nullptr) {
    CAIRN_RETURN_IF_ERROR(cache.BindNodes(*numa));
    if (options.populate) os::TouchPages(cache.mapping_.data(), cache.mapping_.size());
  }
  cache.progress_.assign(cache.reserved_count_, 0);
  cache.visited_.assign(cache.reserved_count_, false);
  for (uint32_t i = 0; i < cache.chunk_count_; ++i) {
    cache.free_untouched_.insert(cache.free_untouched_.end(), i);
  }
  if (options.populate) cache.MarkAllTouched();
  return cache;
}

// Node k gets chunks [count * k / n, count * (k + 1) / n): equal shares, in
// node order, one mbind each. A node left with no chunk (more nodes than
// chunks) is skipped.
Status HostCache::BindNodes(os::Numa& numa) {
  const auto n = static_cast<uint64_t>(numa.topology().nodes());
  nodes_.begin.resize(n + 1);
  for (uint64_t k = 0; k <= n; ++k) nodes_.begin[k] = static_cast<uint32_t>(chunk_count_ * k / n);
  for (uint64_t k = 0; k < n; ++k) {
    const uint32_t first = nodes_.begin[k];
    const uint32_t end = nodes_.begin[k + 1];
    if (first == end) continue;
    Status s = numa.Bind(data(first), uint64_t{end - first} * chunk_bytes_, os::Binding{.node = static_cast<int>(k)});
    if (!s.ok()) return s.WithContext("binding host cache chunks to NUMA node " + std::to_string(k));
  }
  return Status::Ok();
}

uint32_t HostCache::Grow(uint32_t chunks) {
  const uint32_t target = std::min(chunks, reserved_count_);
  if (target <= chunk_count_) return 0;
  for (uint32_t c = chunk_count_; c < target; ++c) free_untouched_.insert(free_untouched_.end(), c);
  const uint32_t added = target - chunk_count_;
  chunk_count_ = target;
  return added;
}

// Only before any growth: a populated cache reserves nothing beyond its size.
void HostCache::MarkAllTouched() {
  for (uint32_t c : free_untouched_) free_touched_.insert(c);
  free_untouched_.clear();
  std::fill(progress_.begin(), progress_.begin() + chunk_count_, chunk_bytes_);
  touched_count_ = chunk_count_;
  std::fill(visited_.begin(), visited_.begin() + chunk_count_, true);
  visited_count_ = chunk_count_;
}

void HostCache::MarkTouched(uint32_t chunk) {
  if (progress_[chunk] == chunk_bytes_) return;
  progress_[chunk] = chunk_bytes_;
  ++touched_count_;
}

void HostCache::AddProgress(uint32_t chunk, uint32_t bytes) {
  const uint64_t page = os::PageSize();
  const uint64_t rounded = (uint64_t{bytes} + page - 1) / page * page;
  if (rounded >= chunk_bytes_) {
    MarkTouched(chunk);
  } else if (rounded > progress_[chunk]) {
    progress_[chunk] = static_cast<uint32_t>(rounded);
  }
}

// The lowest free chunk of `node`: touched, else untouched.
std::optional<uint32_t> HostCache::TakeOnNode(int node, bool* touched) {
  const uint32_t lo = nodes_.begin[node];
  const uint32_t hi = nodes_.begin[node + 1];
  for (std::set<uint32_t>* from : {&free_touched_, &free_untouched_}) {
    auto it = from->lower_bound(lo);
    if (it != from->end() && *it < hi) {
      const uint32_t c = *it;
      from->erase(it);
      *touched = from == &free_touched_;
      return c;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> HostCache::Allocate(bool* was_touched, uint32_t write_bytes, int node) {
  bool touched = false;
  std::optional<uint32_t> local;
  if (node >= 0 && nodes_.partitioned() && static_cast<size_t>(node) + 1 < nodes_.begin.size()) {
    local = TakeOnNode(node, &touched);
  }
  if (!local) {
    std::set<uint32_t>* from = !free_touched_.empty() ? &free_touched_ : &free_untouched_;
    if (from->empty()) return std::nullopt;
    local = *from->begin();
    from->erase(from->begin());
    touched = from == &free_touched_;
  }
  const uint32_t c = *local;
  if (was_touched != nullptr) *was_touched = touched;
  if (!visited_[c]) {
    visited_[c] = true;
    ++visited_count_;
  }
  // The writer's copy faults in the pages it covers.
  AddProgress(c, write_bytes);
  return c;
}

void HostCache::Free(uint32_t chunk) {
  (progress_[chunk] == chunk_bytes_ ? free_touched_ : free_untouched_).insert(chunk);
}

std::optional<uint32_t> HostCache::ClaimForTouch() {
  if (claimed_ || free_untouched_.empty()) return std::nullopt;
  claimed_ = *free_untouched_.begin();
  free_untouched_.erase(free_untouched_.begin());
  return claimed_;
}

void HostCache::ReleaseClaim(uint32_t chunk, uint32_t progress) {
  claimed_.reset();
  AddProgress(chunk, progress);
  Free(chunk);
}

}  // namespace cairn::core
