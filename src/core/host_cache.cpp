#include "core/host_cache.hpp"

#include <string>

namespace cairn::core {

Result<HostCache> HostCache::Create(uint64_t capacity_bytes, uint32_t chunk_bytes,
                                    const os::MapOptions& options) {
  if (chunk_bytes == 0) return Status::InvalidArgument("host cache: block size is 0");
  uint64_t count = capacity_bytes / chunk_bytes;
  if (count < 2) {
    return Status::Config("host_cache.size (" + std::to_string(capacity_bytes) +
                          " bytes) must hold at least 2 blocks of " + std::to_string(chunk_bytes) +
                          " bytes");
  }
  if (count > UINT32_MAX) return Status::Config("host_cache.size: too many blocks");
  HostCache cache;
  CAIRN_ASSIGN_OR_RETURN(cache.mapping_, os::Mapping::Create(count * chunk_bytes, options));
  cache.chunk_bytes_ = chunk_bytes;
  cache.chunk_count_ = static_cast<uint32_t>(count);
  cache.progress_.assign(cache.chunk_count_, 0);
  cache.visited_.assign(cache.chunk_count_, false);
  for (uint32_t i = 0; i < cache.chunk_count_; ++i) {
    cache.free_untouched_.insert(cache.free_untouched_.end(), i);
  }
  if (options.populate) cache.MarkAllTouched();
  return cache;
}

void HostCache::MarkAllTouched() {
  for (uint32_t c : free_untouched_) free_touched_.insert(c);
  free_untouched_.clear();
  progress_.assign(chunk_count_, chunk_bytes_);
  touched_count_ = chunk_count_;
  visited_.assign(chunk_count_, true);
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

std::optional<uint32_t> HostCache::Allocate(bool* was_touched, uint32_t write_bytes) {
  std::set<uint32_t>* from = !free_touched_.empty() ? &free_touched_ : &free_untouched_;
  if (from->empty()) return std::nullopt;
  const uint32_t c = *from->begin();
  from->erase(from->begin());
  if (was_touched != nullptr) *was_touched = from == &free_touched_;
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
