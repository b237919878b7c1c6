#include "api/placement_state.hpp"

namespace cairn::placement {

Status State::RegisterThread(int index) {
  if (index < 0) return Status::InvalidArgument("register thread: index " + std::to_string(index) + " is negative");
  MutexLock l(&mu_);
  threads_[index] = os::CurrentTid();
  return Status::Ok();
}

std::shared_ptr<const format::Placement> State::Record(int64_t number,
                                                       const std::vector<core::CaptureSource>& sources) {
  if (!record_) return nullptr;
  const os::Topology& t = numa_->topology();
  auto p = std::make_shared<format::Placement>();
  p->number = number;
  p->node_count = static_cast<uint32_t>(t.nodes());
  p->cpu_count = static_cast<uint32_t>(std::max(1, t.cpus()));
  p->granule_bytes = format::kPlacementGranule;
  for (const auto& s : sources) {
    if (s.spec.memory != MemoryKind::kHost) continue;
    auto r = core::RecordRegion(*numa_, s.spec.id, s.data, s.spec.bytes, p->granule_bytes);
    if (!r.ok()) return nullptr;  // no NUMA answer: no record (advisory)
    p->regions.push_back(std::move(r).value());
  }
  if (auto mine = numa_->GetAffinity(0); mine.ok() && !mine->empty()) {
    p->threads.push_back({.index = format::kCheckpointingThread, .cpus = std::move(mine).value()});
  }
  std::map<int, pid_t> threads;
  {
    MutexLock l(&mu_);
    threads = threads_;
  }
  for (const auto& [index, tid] : threads) {
    // A thread that has exited (ESRCH) is left out.
    if (auto cpus = numa_->GetAffinity(tid); cpus.ok() && !cpus->empty()) {
      p->threads.push_back({.index = index, .cpus = std::move(cpus).value()});
    }
  }
  return p;
}

std::vector<core::BoundRange> State::Bind(const format::Placement* p, const std::vector<core::RestoreTarget>& targets) {
  std::vector<core::BoundRange> bound;
  if (mode_ == core::PlacementMode::kKeep) return bound;
  for (const auto& t : targets) {
    if (t.memory != MemoryKind::kHost || t.data == nullptr) continue;
    const format::RegionPlacement* r = p != nullptr ? p->region(t.id) : nullptr;
    // A failed bind leaves the kernel's placement: the restore goes on.
    (void)core::ApplyRegion(*numa_, r, t.data, t.bytes, mode_, &bound);
  }
  return bound;
}

void State::Restored(const std::vector<core::BoundRange>& bound, std::optional<format::Placement> p) {
  (void)core::Unbind(*numa_, bound);
  MutexLock l(&mu_);
  restored_ = std::move(p);
}

Status State::RestoreAffinity(int index) {
  if (mode_ == core::PlacementMode::kKeep) return Status::Ok();
  std::vector<int> cpus;
  {
    MutexLock l(&mu_);
    if (!restored_) {
      return Status::State("restore affinity: no restored version with a placement record (restore first)");
    }
    const format::ThreadAffinity* t = restored_->thread(index);
    if (t == nullptr) {
      return Status::NotFound("restore affinity: the restored version " + std::to_string(restored_->number) +
                              " recorded no thread " + std::to_string(index));
    }
    cpus = t->cpus;
  }
  return numa_->SetAffinity(0, core::MapCpus(cpus, numa_->topology()));
}

}  // namespace cairn::placement
