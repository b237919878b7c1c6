// Restore from files and latest-version discovery over chains (docs/design.md,
// "Restore from files" and "Chains"). A version is read through format::Chain:
// a version-1 or full version-2 file is a chain of one link, a layered version
// names its base, which names its own, down to a full version. Every byte
// comes from the newest link that stores it (format::ChainPlan); each link's
// blocks are read once, verified as they land. A chain that lacks a link or
// whose link does not match its reference cannot be restored: it counts as
// damage of the tip (kCorrupt naming the broken link), so restore falls back
// to the persistent tier's chain and RestoreLatest / Latest to older versions.
#include <optional>
#include <set>

#include "engine/reader.hpp"
#include "engine/region_match.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "os/mem/page_backing.hpp"
#include "os/mem/prefault.hpp"

namespace cairn::core {

namespace {

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

// Host targets from this size on that are not faulted in yet (a new
// process's buffer) are faulted in by a helper thread ahead of the reads
// (os/mem/prefault.hpp says why); smaller ones are not worth a thread.
constexpr uint64_t kPrefaultFrom = 16ull << 20;

// The Prefaulter for the host targets that need one, or none.
std::optional<os::Prefaulter> PrefaultHostTargets(const std::vector<RestoreTarget>& targets) {
  std::vector<os::Range> fresh;
  for (const RestoreTarget& t : targets) {
    if (t.memory == MemoryKind::kHost && t.bytes >= kPrefaultFrom &&
        !os::SampledPagesResident(t.data, t.bytes)) {
      fresh.push_back({t.data, t.bytes});
    }
  }
  if (fresh.empty()) return std::nullopt;
  return std::optional<os::Prefaulter>(std::in_place, std::move(fresh));
}

// Opens version `number` and its bases in `tier`, checking every link's
// header, footer, tables and reference (no data read). kNotFound only when
// the version itself is not there; a missing base is a broken chain, which
// makes the version unrestorable from this tier: kCorrupt naming the link.
Result<format::Chain> OpenChain(os::FileSystem* fs, const tiers::FileTier& tier,
                                format::EntryKind kind, const std::string& name, int64_t number) {
  auto chain = format::Chain::Open(fs, tier.dir(), name, number, kind);
  if (chain.ok() || chain.status().code() != Code::kNotFound) return chain;
  if (!tier.Exists(name, kind, number)) return chain.status();
  return Status::Corrupt("broken chain: " + chain.status().message());
}

}  // namespace

// One pass per link, by default in the way the tier writes: O_DIRECT for
// checkpoint files written with storage.direct_io (not in the page cache
// anyway, and a lone buffered read needs a page cache as large as the version
// beside the application's memory: 2.6-3.5x slower cold,
// docs/results/2026-11-25-development-vm.md),
// buffered for scratch history steps, which the page cache usually still
// holds. kThroughPageCache reads buffered: several processes reading the same
// files share the page cache's one read from the disk. Device and managed
// targets go through the restore stream.
Status Pipeline::Reader::ReadChain(const format::Chain& chain, const tiers::FileTier& tier,
                                   const std::string& label,
                                   const std::vector<RestoreTarget>& targets, FileRead read) {
  std::vector<uint32_t> index;
  CAIRN_RETURN_IF_ERROR(MatchRegions(chain.tip().layout(), targets, label, &index));
  const bool direct = tier.writer_options().direct && read == FileRead::kAsWritten;
  std::vector<format::RegionTarget> to;
  to.reserve(targets.size());
  for (const RestoreTarget& t : targets) {
    const bool host = t.memory == MemoryKind::kHost;
    to.push_back({.id = t.id,
                  .dst = t.data,
                  .host = host,
                  .stage = direct && host && t.bytes > 0 && StageInto(t)});
  }
  CAIRN_ASSIGN_OR_RETURN(const format::ChainPlan plan, format::ChainPlan::Make(chain, to));
  const std::optional<os::Prefaulter> prefault = PrefaultHostTargets(targets);
  return plan.Execute(p_->fs_,
                      [this](void* dst, const void* src, size_t n) {
                        const CopySegment seg{.dst = dst, .src = src, .bytes = n};
                        return p_->dio_->RestoreCopy({&seg, 1});
                      },
                      {.direct = direct});
}

// Reads from the local tier's chain, falling back to the persistent tier's
// chain of the same version when the local one is missing, damaged or broken
// (a chain is never mixed across tiers). Returns the local error if both fail.
Status Pipeline::Reader::ReadFromFiles(format::EntryKind kind, const std::string& name,
                                       int64_t number, const std::vector<RestoreTarget>& targets,
                                       FileRead read) {
  const std::string label = format::EntryLabel(kind, name, number);
  // The application waits on this read, from the chain's first open to its
  // last block.
  const RestoreWait waiting(*p_);
  std::vector<const tiers::FileTier*> tiers{&p_->tier_for(kind)};
  if (p_->persistent_ && kind == format::EntryKind::kCheckpoint) tiers.push_back(&*p_->persistent_);
  Status first;
  bool any_file = false;
  for (const tiers::FileTier* tier : tiers) {
    auto chain = OpenChain(p_->fs_, *tier, kind, name, number);
    Status s = chain.status();
    if (s.code() == Code::kNotFound) continue;
    any_file = true;
    if (s.ok()) s = ReadChain(*chain, *tier, label, targets, read);
    // Layout mismatches are the caller's problem, not the file's: no fallback.
    if (s.code() == Code::kSizeMismatch || s.code() == Code::kNotFound) return s;
    if (s.code() == Code::kCorrupt) s = s.WithContext(label + " is damaged");
    if (s.ok()) return s;
    if (first.ok()) first = s;
  }
  if (!any_file) {
    std::string where = p_->tier_for(kind).dir();
    if (p_->persistent_ && kind == format::EntryKind::kCheckpoint)
      where += " or " + p_->persistent_->dir();
    return Status::NotFound(label + " is not in the cache nor in " + where);
  }
  return first;
}

Result<std::set<int64_t>> Pipeline::Reader::CommittedVersions(const std::string& name) {
  std::set<int64_t> candidates;
  std::vector<const tiers::FileTier*> tiers{&p_->local_};
  if (p_->persistent_) tiers.push_back(&*p_->persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto versions = tier->ListCommitted(name, format::EntryKind::kCheckpoint);
    if (!versions.ok()) return versions.status();
    candidates.insert(versions->begin(), versions->end());
  }
  return candidates;
}

// Checks the structure only (every link's header, footer, tables and their
// CRCs, and every reference): reading the data here would read it twice,
// since a restore verifies every block as it reads it. Damaged data is found
// by Restore / RestoreLatest. Appends what is wrong to *damaged (up to ~2000
// characters).
bool Pipeline::Reader::Intact(const std::string& name, int64_t version, std::string* damaged) {
  const auto kind = format::EntryKind::kCheckpoint;
  {
    // A committed full version still fully in the cache needs no file (a
    // layered one needs its bases' files: the cache holds only its extents).
    MutexLock lock(&p_->mu_);
    EntryPtr e = p_->catalog_.Find(kind, name, version);
    if (e && e->local().committed && e->fully_cached() && !e->layout.layered()) return true;
  }
  std::vector<const tiers::FileTier*> tiers{&p_->local_};
  if (p_->persistent_) tiers.push_back(&*p_->persistent_);
  for (const tiers::FileTier* tier : tiers) {
    auto chain = OpenChain(p_->fs_, *tier, kind, name, version);
    Status s = chain.status();
    if (s.code() == Code::kNotFound) continue;
    if (s.ok()) return true;
    if (damaged->size() < 2000) *damaged += "; " + s.message();
  }
  return false;
}

Result<int64_t> Pipeline::Latest(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_ASSIGN_OR_RETURN(const std::set<int64_t> candidates, Reader(this).CommittedVersions(name));
  std::string damaged;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (Reader(this).Intact(name, *it, &damaged)) return *it;
  }
  if (candidates.empty()) return Status::NotFound("no committed version of '" + name + "'");
  return Status::NotFound("no valid version of '" + name + "': all " +
                          std::to_string(candidates.size()) +
                          " committed versions are damaged or their chains broken" + damaged);
}

Result<std::vector<int64_t>> Pipeline::IntactVersions(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  CAIRN_ASSIGN_OR_RETURN(const std::set<int64_t> candidates, Reader(this).CommittedVersions(name));
  std::vector<int64_t> intact;
  std::string damaged;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (Reader(this).Intact(name, *it, &damaged)) intact.push_back(*it);
  }
  return intact;
}

}  // namespace cairn::core
