#include "engine/node_follower.hpp"

namespace cairn::core {

NodeFollower::NodeFollower(os::Numa* numa, const HostCache& cache)
    : numa_(cache.nodes().partitioned() ? numa : nullptr),
      nodes_(cache.nodes()),
      base_(reinterpret_cast<uintptr_t>(cache.base())),
      chunk_bytes_(cache.chunk_bytes()) {}

void NodeFollower::Follow(const void* p) {
  if (numa_ == nullptr) return;
  const auto chunk = static_cast<uint32_t>((reinterpret_cast<uintptr_t>(p) - base_) / chunk_bytes_);
  const int node = nodes_.node_of(chunk);
  if (node < 0 || node == node_) return;
  node_ = node;
  const auto& cpus = numa_->topology().node_cpus[static_cast<size_t>(node)];
  if (!cpus.empty()) (void)numa_->SetAffinity(0, cpus);  // memory-only node: stay
}

}  // namespace cairn::core
