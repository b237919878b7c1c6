// The read side of checkpoints: restore of versions (from the cache, else
// from the files: chain_restore.cpp, which also finds the latest version).
// History pops: history.cpp.
#include <chrono>
#include <cstring>

#include "capture/memory_copy.hpp"
#include "engine/reader.hpp"
#include "engine/region_match.hpp"
#include "format/naming.hpp"
#include "util/clock.hpp"

namespace cairn::core {

// Every target needs a region of the same id and size (region_match.hpp).
Status MatchRegions(const format::Layout& layout, const std::vector<RestoreTarget>& targets,
                    const std::string& label, std::vector<uint32_t>* index) {
  index->clear();
  for (const auto& t : targets) {
    bool found = false;
    for (uint32_t r = 0; r < layout.regions.size(); ++r) {
      const auto& spec = layout.regions[r].spec;
      if (spec.id != t.id) continue;
      if (spec.bytes != t.bytes) {
        return Status::SizeMismatch("region " + std::to_string(t.id) + " is protected with " +
                                    std::to_string(t.bytes) + " bytes but " + label + " has " +
                                    std::to_string(spec.bytes) + " bytes");
      }
      index->push_back(r);
      found = true;
      break;
    }
    if (!found) {
      return Status::NotFound("region " + std::to_string(t.id) + " is protected but not in " +
                              label);
    }
  }
  return Status::Ok();
}

void Pipeline::Reader::NoteRead(bool hit, uint64_t bytes, std::chrono::steady_clock::time_point t0,
                                const char* span, const std::string& name, int64_t number) {
  const auto t1 = std::chrono::steady_clock::now();
  hit ? ++p_->stats_.cache_hits : ++p_->stats_.cache_misses;
  p_->stats_.restore.bytes += bytes;
  p_->stats_.restore.ops += 1;
  p_->stats_.restore.seconds += SecondsBetween(t0, t1);
  p_->tracer_.Span(span, "app", t0, t1, bytes, name, number);
}

// Each block comes from the device cache when the target is device or
// managed memory and the block is there (device -> device), else from the
// host cache; host -> host copies run on the CopyEngine, everything else on
// the restore stream. e is pinned: its slots and chunks stay where they are,
// but the device mover may give blocks new slots (device prefetch) once mu_
// is dropped, so the sources are chosen before that.
Status Pipeline::Reader::CopyFromCache(const EntryPtr& e, const std::vector<RestoreTarget>& targets,
                                       bool* device_hit) {
  // Its blocks hold packed extents, not whole regions: copying them as
  // regions would restore wrong bytes. Restore reads layered versions through
  // their chains' files (chain_restore.cpp).
  if (e->layout.layered()) {
    return Status::Internal(format::EntryLabel(e->kind, e->name, e->number) +
                            " is layered: restored from its chain's files, not the cache");
  }
  std::vector<uint32_t> index;
  CAIRN_RETURN_IF_ERROR(
      MatchRegions(e->layout, targets, format::EntryLabel(e->kind, e->name, e->number), &index));
  std::vector<CopySegment> cpu, gpu;
  *device_hit = false;
  for (size_t t = 0; t < targets.size(); ++t) {
    const auto& region = e->layout.regions[index[t]];
    auto* dst = static_cast<uint8_t*>(targets[t].data);
    const bool device_target = targets[t].memory != MemoryKind::kHost;
    for (uint32_t b = region.first_block; b < region.first_block + region.block_count; ++b) {
      const auto& blk = e->layout.blocks[b];
      const bool from_slot = e->in_device(b) && (device_target || !e->in_host(b));
      const void* src = from_slot ? reinterpret_cast<const void*>(p_->dcache_->address(
                                        static_cast<uint32_t>(e->blocks()[b].slot)))
                                  : p_->store_.data(static_cast<uint32_t>(e->blocks()[b].chunk));
      *device_hit = *device_hit || from_slot;
      (from_slot || device_target ? gpu : cpu)
          .push_back(
              {.dst = dst + (blk.offset - region.data_offset), .src = src, .bytes = blk.length});
    }
  }
  MutexUnlock unlocked(&p_->mu_);  // the copies out of the cache
  Status s = gpu.empty() ? Status::Ok() : p_->dio_->RestoreCopy(gpu);
  if (s.ok()) CopyOut(MemoryKind::kHost, *p_->copier_, cpu);
  return s;
}

Status Pipeline::Restore(const std::string& name, int64_t version,
                         const std::vector<RestoreTarget>& targets, FileRead read) {
  return Reader(this).Restore(name, version, targets, read);
}

Status Pipeline::Reader::Restore(const std::string& name, int64_t version,
                                 const std::vector<RestoreTarget>& targets, FileRead read) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  const auto kind = format::EntryKind::kCheckpoint;
  auto t0 = std::chrono::steady_clock::now();
  p_->zero_copy_.WaitIdle();  // the targets may be protected by an epoch being read
  for (const auto& t : targets) {
    if (t.memory == MemoryKind::kHost) p_->layering_->BeforeRestore(t.data, t.bytes);
  }
  MutexLock lock(&p_->mu_);
  EntryPtr e = p_->catalog_.Find(kind, name, version);
  // A layered version's cached blocks hold only its changed extents: it is
  // restored from its chain's files, once they are committed.
  const bool layered = e && e->layout.layered();
  if (e) {
    // Evicted blocks imply the flush wrote them; wait for the commit so the
    // file is complete.
    p_->cv_app_.wait(lock, [&]() CAIRN_REQUIRES(p_->mu_) {
      return (e->fully_cached() && !layered) || e->local().committed || e->failed() ||
             e->consumed();
    });
  }
  Status s;
  bool hit = false;
  bool device_hit = false;
  if (e && e->fully_cached() && !e->consumed() && !layered) {
    p_->store_.Pin(*e);
    s = CopyFromCache(e, targets, &device_hit);
    p_->Unpin(e);
    hit = true;
  } else {
    if (e && e->failed() && !e->local().committed) {
      return e->local().error.WithContext(format::EntryLabel(kind, name, version) + " was lost");
    }
    lock.Unlock();
    s = ReadFromFiles(kind, name, version, targets, read);
    lock.Lock();
  }
  if (s.ok()) {
    uint64_t bytes = 0;
    for (const auto& t : targets) bytes += t.bytes;
    if (device_hit) ++p_->stats_.device.hits;
    NoteRead(hit, bytes, t0, hit ? "restore (cache hit)" : "restore (from file)", name, version);
  }
  return s;
}

// Newest first, each through Restore (the cache, else one verifying pass over
// the local file, else the persistent one). A version that fails part-way has
// already written some of the targets; the next older one is restored into
// the same targets, so on success they hold exactly the version returned.
Result<int64_t> Pipeline::RestoreLatest(const std::string& name,
                                        const std::vector<RestoreTarget>& targets) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_ASSIGN_OR_RETURN(const std::set<int64_t> candidates, Reader(this).CommittedVersions(name));
  if (candidates.empty()) return Status::NotFound("no committed version of '" + name + "'");
  std::string damaged;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    Status s = Restore(name, *it, targets);
    if (s.ok()) return *it;
    // Damage or an unreadable file: try the next older version. Anything
    // else (a region of another size, no memory, ...) is not the file's fault.
    if (s.code() != Code::kCorrupt && s.code() != Code::kIo) return s;
    if (damaged.size() < 2000) damaged += "; " + s.message();
  }
  return Status::NotFound(
      "no valid version of '" + name + "': all " + std::to_string(candidates.size()) +
      " committed versions are damaged (the protected regions hold partial data)" + damaged);
}

// Not in this pipeline (retired, or written by an earlier run): committed
// files answer. An entry retired meanwhile had its file committed before it
// left the catalog, so asking without the lock answers the same.
Status Pipeline::Reader::WaitForFiles(format::EntryKind kind, const std::string& name,
                                      int64_t number, Level level) {
  const tiers::FileTier& tier = level == Level::kPersistent ? *p_->persistent_ : p_->local_;
  if (tier.Exists(name, kind, number)) return Status::Ok();
  return Status::NotFound("version " + std::to_string(number) + " of '" + name +
                          "' is unknown at " +
                          (level == Level::kPersistent ? "the persistent level" : "this level"));
}

}  // namespace cairn::core
