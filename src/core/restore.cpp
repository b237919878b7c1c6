// The read side of checkpoints: restore of versions (from the cache or in one
// pass over a file) and latest-version discovery. History pops: history.cpp.
#include <chrono>
#include <cstring>

#include "core/memory_copy.hpp"
#include "core/pipeline.hpp"
#include "format/block_reader.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"
#include "os/page_backing.hpp"
#include "util/clock.hpp"

namespace cairn::core {

namespace {


// Checks that every target has a region of the same id and size in the layout
// before anything is copied. Fills `index` with each target's region index.
Status MatchRegions(const format::Layout& layout, const std::vector<RestoreTarget>& targets,
                    const std::string& label, std::vector<uint32_t>* index) {
  index->clear();
  // Its blocks hold packed extents, not whole regions: reading them as
  // regions would restore wrong bytes with good CRCs. Until restore resolves
  // chains (format::Chain), refuse (issue 15).
  if (layout.layered()) {
    return Status::Unsupported(label + " is a layered version; this restore path reads only "
                               "full versions");
  }
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
      return Status::NotFound("region " + std::to_string(t.id) + " is protected but not in " + label);
    }
  }
  return Status::Ok();
}

// Host regions from this size on are asked whether huge pages back them (a
// read of smaps, ~1 ms); smaller ones are staged without asking, which costs
// a memcpy of a few MiB at most.
constexpr uint64_t kAskPagesFrom = 64ull << 20;

// Whether direct reads into a host target go through the staging buffer
// (format::BlockRead::stage): unless huge pages back it. An unanswerable
// question stages, the choice that is never far off.
bool StageInto(const RestoreTarget& t) {
  if (t.bytes < kAskPagesFrom) return true;
  Result<bool> huge = os::BackedByHugePages(t.data, t.bytes);
  return !huge.ok() || !*huge;
}

// Where each block of the matched regions goes: the plan of one pass over the
// file (format::ReadBlocks). `direct`: the file will be read with O_DIRECT.
std::vector<format::BlockRead> ReadPlan(const format::Layout& layout,
                                        const std::vector<RestoreTarget>& targets,
                                        const std::vector<uint32_t>& index, bool direct) {
  std::vector<format::BlockRead> plan;
  for (size_t t = 0; t < targets.size(); ++t) {
    const auto& region = layout.regions[index[t]];
    const bool host = targets[t].memory == MemoryKind::kHost;
    const bool stage = direct && host && region.block_count > 0 && StageInto(targets[t]);
    for (uint32_t b = region.first_block; b < region.first_block + region.block_count; ++b) {
      plan.push_back({.block = b,
                      .dst = static_cast<uint8_t*>(targets[t].data) +
                             (layout.blocks[b].offset - region.data_offset),
                      .host = host,
                      .stage = stage});
    }
  }
  return plan;
}

}  // namespace

void Pipeline::NoteRead(bool hit, uint64_t bytes, std::chrono::steady_clock::time_point t0,
                        const char* span, const std::string& name, int64_t number) {
  const auto t1 = std::chrono::steady_clock::now();
  hit ? ++stats_.cache_hits : ++stats_.cache_misses;
  stats_.restore.bytes += bytes;
  stats_.restore.ops += 1;
  stats_.restore.seconds += SecondsBetween(t0, t1);
  tracer_.Span(span, "app", t0, t1, bytes, name, number);
}

// Each block comes from the device cache when the target is device or
// managed memory and the block is there (device -> device), else from the
// host cache; host -> host copies run on the CopyEngine, everything else on
// the restore stream. e is pinned: its slots and chunks stay where they are,
// but the device mover may give blocks new slots (device prefetch) once mu_
// is dropped, so the sources are chosen before that.
Status Pipeline::CopyFromCache(const EntryPtr& e, const std::vector<RestoreTarget>& targets,
                               bool* device_hit) {
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
      const void* src = from_slot ? reinterpret_cast<const void*>(dcache_->address(static_cast<uint32_t>(e->blocks[b].slot)))
                                  : cache_->data(static_cast<uint32_t>(e->blocks[b].chunk));
      *device_hit = *device_hit || from_slot;
      (from_slot || device_target ? gpu : cpu)
          .push_back({.dst = dst + (blk.offset - region.data_offset), .src = src, .bytes = blk.length});
    }
  }
  MutexUnlock unlocked(&mu_);  // the copies out of the cache
  Status s = gpu.empty() ? Status::Ok() : dio_->RestoreCopy(gpu);
  if (s.ok()) CopyOut(MemoryKind::kHost, *copier_, cpu);
  return s;
}

// Reads from the local tier, falling back to the persistent tier when the
// local copy is missing or damaged. Returns the local error if both fail.
Status Pipeline::ReadFromFiles(const EntryPtr& /*e*/, format::EntryKind kind, const std::string& name,
                               int64_t number, const std::vector<RestoreTarget>& targets) {
  const std::string label = format::EntryLabel(kind, name, number);
  std::vector<const tiers::FileTier*> tiers{&tier_for(kind)};
  if (persistent_ && kind == format::EntryKind::kCheckpoint) tiers.push_back(&*persistent_);
  Status first;
  bool any_file = false;
  for (const tiers::FileTier* tier : tiers) {
    const std::string path = tier->EntryPath(name, kind, number);
    auto reader = format::FileReader::Open(fs_, path);
    Status s = reader.status();
    if (s.code() == Code::kNotFound) continue;
    any_file = true;
    std::vector<uint32_t> index;
    if (s.ok()) s = MatchRegions((*reader)->layout(), targets, label, &index);
    // Layout mismatches are the caller's problem, not the file's: no fallback.
    if (s.code() == Code::kSizeMismatch || (s.code() == Code::kNotFound)) return s;
    // One pass: every block is read once, several at a time, and verified as
    // it lands; device and managed targets go through the restore stream.
    if (s.ok()) {
      // Read the way the tier writes: O_DIRECT for checkpoint files
      // written with storage.direct_io (not in the page cache anyway, and a
      // buffered read would need a page cache as large as the version beside
      // the application's memory: measured 2.6-3.5x slower cold on this VM,
      // docs/bench.md), buffered for scratch history steps, which the page
      // cache usually still holds.
      const bool direct = tier->writer_options().direct;
      const auto plan = ReadPlan((*reader)->layout(), targets, index, direct);
      // The application waits on this read: the cache's background touch
      // pauses meanwhile (Initializer::MustPauseTouching says why).
      UseBandwidth(+1, Initializer::Mover::kRestore);
      s = format::ReadBlocks(
          fs_, **reader, plan,
          [this](void* dst, const void* src, size_t n) {
            const CopySegment seg{.dst = dst, .src = src, .bytes = n};
            return dio_->RestoreCopy({&seg, 1});
          },
          {.direct = direct});
      UseBandwidth(-1, Initializer::Mover::kRestore);
    }
    if (s.code() == Code::kCorrupt) s = s.WithContext(label + " is damaged");
    if (s.ok()) return s;
    if (first.ok()) first = s;
  }
  if (!any_file) {
    std::string where = tier_for(kind).dir();
    if (persistent_ && kind == format::EntryKind::kCheckpoint) where += " or " + persistent_->dir();
    return Status::NotFound(label + " is not in the cache nor in " + where);
  }
  return first;
}

Status Pipeline::Restore(const std::string& name, int64_t version,
                         const std::vector<RestoreTarget>& targets) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  const auto kind = format::EntryKind::kCheckpoint;
  auto t0 = std::chrono::steady_clock::now();
  MutexLock lock(&mu_);
  EntryPtr e = catalog_.Find(kind, name, version);
  if (e) {
    // Evicted blocks imply the flush wrote them; wait for the commit so the
    // file is complete.
    cv_app_.wait(lock, [&]() CAIRN_REQUIRES(mu_) {
      return e->fully_cached() || e->local_committed || e->failed() || e->consumed;
    });
  }
  Status s;
  bool hit = false;
  bool device_hit = false;
  if (e && e->fully_cached() && !e->consumed) {
    ++e->pins;
    s = CopyFromCache(e, targets, &device_hit);
    Unpin(e);
    hit = true;
  } else {
    if (e && e->failed() && !e->local_committed) {
      return e->local_error.WithContext(format::EntryLabel(kind, name, version) + " was lost");
    }
    lock.Unlock();
    s = ReadFromFiles(e, kind, name, version, targets);
    lock.Lock();
  }
  if (s.ok()) {
    uint64_t bytes = 0;
    for (const auto& t : targets) bytes += t.bytes;
    if (device_hit) ++stats_.device.hits;
    NoteRead(hit, bytes, t0, hit ? "restore (cache hit)" : "restore (from file)", name, version);
  }
  return s;
}

Result<std::set<int64_t>> Pipeline::CommittedVersions(const std::string& name) {
  std::set<int64_t> candidates;
  std::vector<const tiers::FileTier*> tiers{&local_};
  if (persistent_) tiers.push_back(&*persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto versions = tier->ListCommitted(name, format::EntryKind::kCheckpoint);
    if (!versions.ok()) return versions.status();
    candidates.insert(versions->begin(), versions->end());
  }
  return candidates;
}

// Checks the structure only (header, footer, tables and their CRCs): reading
// the data here would read it twice, since a restore verifies every block as
// it reads it. Damaged data is found by Restore / RestoreLatest. Appends what
// is wrong with a damaged version to *damaged (up to ~2000 characters).
bool Pipeline::Intact(const std::string& name, int64_t version, std::string* damaged) {
  const auto kind = format::EntryKind::kCheckpoint;
  {
    // A committed version still fully in the cache needs no file.
    MutexLock lock(&mu_);
    EntryPtr e = catalog_.Find(kind, name, version);
    if (e && e->local_committed && e->fully_cached()) return true;
  }
  std::vector<const tiers::FileTier*> tiers{&local_};
  if (persistent_) tiers.push_back(&*persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto reader = format::FileReader::Open(fs_, tier->EntryPath(name, kind, version));
    Status s = reader.status();
    if (s.code() == Code::kNotFound) continue;
    if (s.ok()) return true;
    if (damaged->size() < 2000) *damaged += "; " + s.message();
  }
  return false;
}

Result<int64_t> Pipeline::Latest(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_ASSIGN_OR_RETURN(const std::set<int64_t> candidates, CommittedVersions(name));
  std::string damaged;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (Intact(name, *it, &damaged)) return *it;
  }
  if (candidates.empty()) return Status::NotFound("no committed version of '" + name + "'");
  return Status::NotFound("no valid version of '" + name + "': all " +
                          std::to_string(candidates.size()) + " committed versions are damaged" +
                          damaged);
}

Result<std::vector<int64_t>> Pipeline::IntactVersions(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_ASSIGN_OR_RETURN(const std::set<int64_t> candidates, CommittedVersions(name));
  std::vector<int64_t> intact;
  std::string damaged;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (Intact(name, *it, &damaged)) intact.push_back(*it);
  }
  return intact;
}

// Newest first, each through Restore (the cache, else one verifying pass over
// the local file, else the persistent one). A version that fails part-way has
// already written some of the targets; the next older one is restored into
// the same targets, so on success they hold exactly the version returned.
Result<int64_t> Pipeline::RestoreLatest(const std::string& name,
                                        const std::vector<RestoreTarget>& targets) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_ASSIGN_OR_RETURN(const std::set<int64_t> candidates, CommittedVersions(name));
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
  return Status::NotFound("no valid version of '" + name + "': all " +
                          std::to_string(candidates.size()) +
                          " committed versions are damaged (the protected regions hold partial data)" +
                          damaged);
}

}  // namespace cairn::core
