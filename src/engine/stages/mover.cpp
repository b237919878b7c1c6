#include "engine/stages/mover.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "format/chain.hpp"
#include "format/file_reader.hpp"
#include "format/file_writer.hpp"
#include "util/clock.hpp"

namespace cairn::core {

namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// Copies one committed file block by block, verifying each block's CRC.
Status CopyVerified(os::FileSystem* fs, const std::string& from, const tiers::FileTier& to,
                    uint32_t block_bytes) {
  CAIRN_ASSIGN_OR_RETURN(auto reader, format::FileReader::Open(fs, from));
  const auto& info = reader->info();
  CAIRN_RETURN_IF_ERROR(to.EnsureNameDir(info.name));
  CAIRN_ASSIGN_OR_RETURN(
      auto writer, format::FileWriter::Create(fs, to.EntryPath(info.name, info.kind, info.number),
                                              info, reader->layout(), to.writer_options()));
  std::unique_ptr<uint8_t, AlignedFree> buffer(
      static_cast<uint8_t*>(std::aligned_alloc(format::kAlignment, format::AlignUp(block_bytes))));
  if (!buffer) return Status::NoMemory("bounce buffer for the persistent copy");
  for (uint32_t b = 0; b < reader->layout().blocks.size(); ++b) {
    uint32_t length = reader->layout().blocks[b].length;
    std::memset(buffer.get() + length, 0, format::AlignUp(length) - length);
    CAIRN_RETURN_IF_ERROR(reader->ReadBlock(b, buffer.get(), /*verify=*/true));
    CAIRN_RETURN_IF_ERROR(writer->WriteBlock(b, buffer.get(), reader->block_crc(b)));
  }
  CAIRN_RETURN_IF_ERROR(writer->Commit());
  // Its placement record too (same created_unix_ns, so it still matches).
  if (info.kind == format::EntryKind::kCheckpoint)
    format::CopyPlacement(fs, from, writer->final_path());
  return Status::Ok();
}

// Whether `tier` holds the version `link` is (the same content id): a base
// copied before, or persisted from the cache.
bool Holds(const tiers::FileTier& tier, const format::FileReader& link) {
  const format::FileInfo& info = link.info();
  auto there =
      format::FileReader::Open(tier.fs(), tier.EntryPath(info.name, info.kind, info.number));
  return there.ok() && (*there)->record().content_id == link.record().content_id;
}

}  // namespace

Mover::Mover(Mutex* mu, std::condition_variable_any* done, const tiers::FileTier* local,
             const tiers::FileTier* persistent, uint32_t block_bytes, size_t keep, Views views,
             Owner* owner)
    : mu_(mu),
      local_(local),
      persistent_(persistent),
      block_bytes_(block_bytes),
      keep_(keep),
      catalog_(views.catalog),
      commits_(views.commits),
      owner_(owner),
      worker_(mu, done, this) {}

void Mover::RunJob(Task& t) {
  mu_->AssertHeld();  // the Worker runs jobs with *mu held
  if (t.kind == Task::Kind::kHistoryClosed) {
    owner_->RemoveNameDir(t.name);  // with *mu held: see Owner
    return;
  }
  MutexUnlock unlocked(mu_);  // the other tasks do their own I/O and locking
  switch (t.kind) {
    case Task::Kind::kCopy:
      CopyEntry(t.e);
      ApplyRetention(t.e->name);
      break;
    case Task::Kind::kRetain:
      ApplyRetention(t.name);
      break;
    case Task::Kind::kRemove:
      (void)t.tier->RemoveEntry(t.name, t.entry_kind, t.number);
      break;
    case Task::Kind::kRemoveAll: {
      auto versions = t.tier->ListCommitted(t.name, t.entry_kind);
      if (!versions.ok()) break;  // nothing listed: nothing to delete
      for (int64_t v : *versions) (void)t.tier->RemoveEntry(t.name, t.entry_kind, v);
      break;
    }
    case Task::Kind::kHistoryClosed:
      break;  // above
  }
}

void Mover::Copy(const EntryPtr& e) { worker_.Push(Task{.kind = Task::Kind::kCopy, .e = e}); }

void Mover::Resume(const std::string& name) {
  mu_->AssertHeld();  // the precondition
  std::vector<EntryPtr> waiting;
  std::erase_if(delayed_, [&](const EntryPtr& e) {
    if (e->name != name) return false;
    waiting.push_back(e);
    return true;
  });
  for (const EntryPtr& e : waiting) Copy(e);
}

void Mover::Retain(const std::string& name) {
  worker_.Push(Task{.kind = Task::Kind::kRetain, .name = name});
}

void Mover::Remove(const tiers::FileTier* tier, const std::string& name, format::EntryKind kind,
                   int64_t number) {
  worker_.Push(Task{.kind = Task::Kind::kRemove,
                    .name = name,
                    .tier = tier,
                    .entry_kind = kind,
                    .number = number});
}

void Mover::RemoveAll(const tiers::FileTier* tier, const std::string& name,
                      format::EntryKind kind) {
  worker_.Push(
      Task{.kind = Task::Kind::kRemoveAll, .name = name, .tier = tier, .entry_kind = kind});
}

void Mover::HistoryClosed(const std::string& name) {
  worker_.Push(Task{.kind = Task::Kind::kHistoryClosed, .name = name});
}

// name, kind and number of an entry never change once it is captured: read
// without the lock.
void Mover::CopyEntry(const EntryPtr& e) {
  const auto t0 = std::chrono::steady_clock::now();
  bool delayed = false;
  Status s = CopyChain(e, &delayed);
  if (delayed) return;  // booked when Resume queues it again
  const double seconds = SecondsSince(t0);
  if (!s.ok()) {
    s = s.WithContext("copy of '" + e->name + "' " + std::to_string(e->number) +
                      " to the persistent tier");
  }
  MutexLock lock(mu_);
  owner_->Copied(e, s, t0, seconds);
}

// A broken local chain fails the copy (its error names the link) and copies
// nothing of it: the persistent tier never holds a tip without its bases.
Status Mover::CopyChain(const EntryPtr& e, bool* delayed) {
  os::FileSystem* fs = local_->fs();
  CAIRN_ASSIGN_OR_RETURN(const format::Chain chain,
                         format::Chain::Open(fs, local_->dir(), e->name, e->number, e->kind));
  const auto& links = chain.links();
  for (size_t i = links.size() - 1; i > 0; --i) {  // the bases, oldest first
    const format::FileReader& base = *links[i];
    if (Holds(*persistent_, base)) continue;
    {
      MutexLock lock(mu_);
      if (catalog_->Persisting(e->name, base.info().number)) {
        delayed_.push_back(e);
        *delayed = true;
        return Status::Ok();
      }
    }
    CAIRN_RETURN_IF_ERROR(CopyVerified(fs, base.path(), *persistent_, block_bytes_));
  }
  return CopyVerified(fs, links[0]->path(), *persistent_, block_bytes_);
}

void Mover::AddChain(const tiers::FileTier& tier, const std::string& name, int64_t v,
                     std::set<int64_t>* needed) {
  const auto kind = format::EntryKind::kCheckpoint;
  // A version met before: its chain is in already. Base numbers decrease.
  while (needed->insert(v).second) {
    std::optional<int64_t> base;
    {
      MutexLock lock(mu_);
      base = catalog_->BaseOf(name, v);
    }
    if (!base) {
      auto r = format::FileReader::Open(tier.fs(), tier.EntryPath(name, kind, v));
      if (!r.ok()) return;
      base = (*r)->record().base_version;
    }
    if (*base < 0) return;
    v = *base;
  }
}

// Per tier: the newest keep_ versions stay, and so does every version their
// chains read there (a layered version is unrestorable without its bases);
// the rest goes unless its owner still needs it, in which case its chain
// stays too. Newest first, so a tip goes before its base: no broken chain is
// ever left behind, not even for a moment. A local file still needed (not
// yet persisted) is kept; a later pass removes it.
void Mover::ApplyRetention(const std::string& name) {
  const auto kind = format::EntryKind::kCheckpoint;
  std::vector<const tiers::FileTier*> tiers{local_};
  if (persistent_) tiers.push_back(persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto versions = tier->ListCommitted(name, kind);
    if (!versions.ok() || versions->size() <= keep_) continue;
    const auto first_kept = versions->end() - static_cast<ptrdiff_t>(keep_);
    std::set<int64_t> needed;
    for (auto it = first_kept; it != versions->end(); ++it) AddChain(*tier, name, *it, &needed);
    int64_t global = -1;
    if (commits_ != nullptr) {
      MutexLock lock(mu_);
      global = commits_->Global(name);
    }
    if (global >= 0) {
      // The newest keep_ versions up to the global commit, too.
      const auto end = std::upper_bound(versions->begin(), versions->end(), global);
      const auto begin = end - std::min(end - versions->begin(), static_cast<ptrdiff_t>(keep_));
      for (auto it = begin; it != end; ++it) AddChain(*tier, name, *it, &needed);
    }
    for (auto it = std::make_reverse_iterator(first_kept); it != versions->rend(); ++it) {
      if (needed.contains(*it)) continue;
      bool retire;
      {
        MutexLock lock(mu_);
        retire = owner_->MayRetire(name, *it, tier == local_);
      }
      if (retire) {
        (void)tier->RemoveEntry(name, kind, *it);
      } else {
        AddChain(*tier, name, *it, &needed);
      }
    }
  }
}

}  // namespace cairn::core
