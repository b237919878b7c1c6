#include "core/host_cache.hpp"

#include <string>

namespace cairn::core {

Result<HostCache> HostCache::Create(uint64_t capacity_bytes, uint32_t chunk_bytes, bool populate) {
  if (chunk_bytes == 0) return Status::InvalidArgument("host cache: block size is 0");
  uint64_t count = capacity_bytes / chunk_bytes;
  if (count < 2) {
    return Status::Config("host_cache.size (" + std::to_string(capacity_bytes) +
                          " bytes) must hold at least 2 blocks of " + std::to_string(chunk_bytes) +
                          " bytes");
  }
  if (count > UINT32_MAX) return Status::Config("host_cache.size: too many blocks");
  HostCache cache;
  CAIRN_ASSIGN_OR_RETURN(cache.mapping_,
                         os::Mapping::Create(count * chunk_bytes, os::MapOptions{.populate = populate}));
  cache.chunk_bytes_ = chunk_bytes;
  cache.chunk_count_ = static_cast<uint32_t>(count);
  for (uint32_t i = 0; i < cache.chunk_count_; ++i) cache.free_.insert(cache.free_.end(), i);
  return cache;
}

std::optional<uint32_t> HostCache::Allocate() {
  if (free_.empty()) return std::nullopt;
  uint32_t c = *free_.begin();
  free_.erase(free_.begin());
  return c;
}

void HostCache::Free(uint32_t chunk) { free_.insert(chunk); }

}  // namespace cairn::core
