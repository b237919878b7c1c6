// cairn::Client and cairn::History: argument checking and the protected-region
// registry in front of core::Pipeline.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "api/placement_state.hpp"
#include "cairn/cairn.hpp"
#include "cairn/group.hpp"
#include "engine/pipeline.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "models/interval_model.hpp"
#include "redundancy/background.hpp"
#include "redundancy/collective.hpp"
#include "redundancy/global_commit.hpp"
#include "redundancy/levels.hpp"
#include "redundancy/saved.hpp"
#include "redundancy/solo_group.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"
#include "util/mutex.hpp"

namespace cairn {

namespace {

struct Region {
  void* ptr = nullptr;
  size_t bytes = 0;
  MemoryKind memory = MemoryKind::kHost;
  std::optional<ChangeDetection> changes;  // ProtectOptions::changes
};

}  // namespace

// Shared by a Client and its Histories, so that a History outliving its
// Client fails cleanly (kState) instead of touching freed memory.
struct ClientCore {
  // Calls hold it shared; Close() takes it exclusively, so it waits for
  // in-flight calls and no call starts on a closed pipeline.
  std::shared_mutex lifecycle;
  std::unique_ptr<core::Pipeline> pipeline;  // null once closed
  Mutex regions_mu;
  std::map<int, Region> regions CAIRN_GUARDED_BY(regions_mu);

  // Where a restore of the protected regions copies to.
  std::vector<core::RestoreTarget> RestoreTargets() CAIRN_EXCLUDES(regions_mu) {
    MutexLock regions_lock(&regions_mu);
    std::vector<core::RestoreTarget> targets;
    for (const auto& [id, r] : regions) {
      targets.push_back({.id = id, .memory = r.memory, .data = r.ptr, .bytes = r.bytes});
    }
    return targets;
  }
};

struct Client::Impl {
  std::shared_ptr<ClientCore> core = std::make_shared<ClientCore>();
  Config config;
  // Set when opened in a group (OpenInGroup): Latest, RestoreLatest, Restore
  // and Wait are then collective (collective.hpp, docs/mpi.md).
  std::unique_ptr<Group> group;
  // The configuration before the rank's subdirectories (= config when not
  // in a group): the roots where a saved job's ranks are found.
  Config root;
  // In a group: the redundancy levels L2-L4, their turns, recoveries and
  // stats (levels.hpp).
  std::unique_ptr<redundancy::Levels> levels;
  // Placement recording and restoring (placement_state.hpp).
  std::unique_ptr<placement::State> placement;

  // A restore of `version` (or of what `restore` returns, for
  // RestoreLatest) with the placement of its record: bound before when the
  // version is known, moved after otherwise (docs/design.md, "Placement").
  Status PlacedRestore(const std::string& name, int64_t version, const std::function<Status()>& restore) {
    std::optional<format::Placement> rec;
    if (placement->mode() != cairn::core::PlacementMode::kKeep) {
      if (auto p = core->pipeline->PlacementOf(name, version); p.ok()) rec = std::move(p).value();
    }
    auto bound = placement->Bind(rec ? &*rec : nullptr, core->RestoreTargets());
    Status s = restore();
    placement->Restored(bound, s.ok() ? std::move(rec) : std::nullopt);
    return s;
  }
  void PlaceAfter(const std::string& name, int64_t version) {
    (void)PlacedRestore(name, version, [] { return Status::Ok(); });
  }
  bool redundant() const { return levels && levels->redundant(); }
  // In a group: the global commit learned in the background and every
  // manifest record (global_commit.hpp). Its rounds are progressed only on
  // the thread that opened the client, the one that may call MPI.
  std::unique_ptr<collective::GlobalCommit> global;
  std::thread::id opener;
  // BeginRestore's waits not yet ended (EndRestore, Close).
  Mutex restores_mu;
  std::vector<std::unique_ptr<core::Pipeline::RestoreWait>> restores CAIRN_GUARDED_BY(restores_mu);
  // In a group whose transport allows it (Group::thread_multiple): Cairn's
  // own threads progress `global` and `levels` instead of the opener's
  // Cairn calls. Declared after them: stopped before they go.
  std::unique_ptr<redundancy::Background> progress;

  // CheckpointDue's model (models/interval_model.hpp), fed with the blocking
  // time of every successful Checkpoint, Wait and restore, and the stats
  // of its last decision.
  Mutex interval_mu;
  core::IntervalModel interval CAIRN_GUARDED_BY(interval_mu);
  IntervalStats interval_stats CAIRN_GUARDED_BY(interval_mu);
  SteadyTime Now() const { return config.now != nullptr ? config.now() : std::chrono::steady_clock::now(); }
  uint64_t ProtectedBytes() CAIRN_EXCLUDES(core->regions_mu) {
    MutexLock regions_lock(&core->regions_mu);
    uint64_t bytes = 0;
    for (const auto& [id, r] : core->regions) bytes += r.bytes;
    return bytes;
  }
  void Restored(std::string_view name, SteadyTime start) CAIRN_EXCLUDES(interval_mu) {
    const uint64_t bytes = ProtectedBytes();
    const SteadyTime end = Now();
    MutexLock lock(&interval_mu);
    interval.OnRestore(std::string(name), bytes, SecondsBetween(start, end));
  }
};

struct History::Impl {
  std::shared_ptr<ClientCore> core;
  std::string name;
  bool closed = false;  // guarded by core->lifecycle (exclusive to change)
};

namespace {

Status Closed() { return Status::State("the client is closed"); }

// Any Cairn call on the opening thread moves the background global commit
// and the partner copies on (never blocks: MPI_Test, MPI_Iallreduce /
// MPI_Isend / MPI_Irecv starts, chunk reads and writes).
void ProgressGlobal(Client::Impl& impl) {
  if (!impl.global || impl.progress || std::this_thread::get_id() != impl.opener) return;
  impl.global->Progress();
  (void)impl.levels->Progress();
}

// Cairn's own progress threads (background.hpp) where the group allows
// them and mpi.progress_thread asks for them; else the progress stays at the
// Cairn calls of the opening thread, said once (rank 0) when the group has
// anything that progresses in the background.
Status StartProgress(Client::Impl& impl) {
  Group& group = *impl.group;
  if (!impl.config.progress_thread || (!group.nonblocking() && !group.point_to_point()))
    return Status::Ok();
  // Every member alike (the L3 waits end differently with it).
  int64_t multiple = group.thread_multiple() ? 1 : 0;
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, &multiple, 1));
  if (multiple == 0) {
    if (group.rank() == 0) {
      util::Log(LogLevel::kInfo,
                "MPI was initialised below MPI_THREAD_MULTIPLE: the global commit and the partner "
                "copies progress inside the Cairn calls of the opening thread only (docs/mpi.md, "
                "\"Progress\")");
    }
    return Status::Ok();
  }
  if (impl.config.l3_every > 0) {
    // Collective. Unsupported alike on every member (one kind of group):
    // the parity stays in the waits.
    auto second = group.Duplicate();
    const bool none = !second.ok() && second.status().code() == Code::kUnsupported;
    CAIRN_RETURN_IF_ERROR(collective::Agree(group, none ? Status::Ok() : second.status(),
                                            "a second channel for the L3 parity"));
    if (second.ok()) impl.levels->EncodeInBackground(std::move(second).value());
  }
  impl.progress = std::make_unique<redundancy::Background>(impl.global.get(), impl.levels.get());
  return Status::Ok();
}

// In the rank's scratch directory, and after a persistent commit also in its
// persistent directory, where a job that lost the node still finds it
// (docs/format.md, 3.6-3.7).
Status RecordGlobal(Client::Impl& impl, std::string_view name, int64_t committed, int64_t persistent) {
  Status s = impl.global->Record(std::string(name), committed, persistent);
  return collective::Agree(*impl.group, s, "recording the global commit of '" + std::string(name) + "'");
}

// A job of another size must not restore a saved job's versions rank by
// rank (its rank r does not continue saved rank r): the ranks' manifests
// record the saved job's size (docs/format.md 3.6). kState on every rank.
Status CheckSameSize(Client::Impl& impl, const std::string& name) {
  auto m = collective::ReadManifest(impl.config.fs, impl.config.scratch_dir, name);
  int64_t saved = m.ok() && m->ranks != impl.group->size() ? m->ranks : 0;
  CAIRN_RETURN_IF_ERROR(impl.group->AllReduce(Group::Op::kMax, &saved, 1));
  if (saved == 0) return Status::Ok();
  return Status::State(
      "'" + name + "' was saved by a job of " + std::to_string(saved) + " ranks and this one has " +
      std::to_string(impl.group->size()) +
      ": read it with cairn_saved_latest and cairn_read_saved_region (docs/mpi.md, \"Restarting "
      "on another number of ranks\"), or commit a version of it in this job first");
}

// The newest version <= bound that every rank has committed and whose
// structure checks out on every rank; recorded in the global manifest.
// The application waits on it (Latest, RestoreLatest): its recovery may
// fetch a partner copy or rebuild from parity, so the cache's background
// touch pauses meanwhile (Pipeline::RestoreWait).
Result<int64_t> CommonLatest(Client::Impl& impl, std::string_view name, int64_t bound,
                             int64_t distrust = -1) {
  const core::Pipeline::RestoreWait waiting(*impl.core->pipeline);
  CAIRN_RETURN_IF_ERROR(CheckSameSize(impl, std::string(name)));
  CAIRN_RETURN_IF_ERROR(impl.levels->Recover(std::string(name), bound, distrust));
  auto mine = impl.core->pipeline->IntactVersions(std::string(name));
  const std::string what = "finding the latest version of '" + std::string(name) + "'";
  CAIRN_RETURN_IF_ERROR(collective::Agree(*impl.group, mine.status(), what));
  CAIRN_ASSIGN_OR_RETURN(int64_t common, collective::NewestCommon(*impl.group, *mine, bound));
  if (common < 0) {
    std::string have;
    for (int64_t v : *mine) have += (have.empty() ? "" : ", ") + std::to_string(v);
    return Status::NotFound("no version of '" + std::string(name) + "'" +
                            (bound == std::numeric_limits<int64_t>::max() ? "" : " older than " + std::to_string(bound + 1)) +
                            " is committed and intact on every one of the " + std::to_string(impl.group->size()) +
                            " ranks (rank " + std::to_string(impl.group->rank()) + " has " +
                            (have.empty() ? "none" : have) + ")");
  }
  CAIRN_RETURN_IF_ERROR(RecordGlobal(impl, name, common, -1));
  return common;
}

// The saved job's shape, the same on every member (each reads rank 0's
// manifest itself: members on other nodes may see other files).
Result<saved::Shape> AgreedShape(Client::Impl& impl, Group& group, const std::string& name) {
  auto shape = saved::FindShape(impl.root, name);
  CAIRN_RETURN_IF_ERROR(
      collective::Agree(group, shape.status(), "finding the saved job of '" + name + "'"));
  int64_t lo[2] = {shape->ranks, shape->ranks_per_node},
          hi[2] = {-shape->ranks, -shape->ranks_per_node};
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, lo, 2));
  CAIRN_RETURN_IF_ERROR(group.AllReduce(Group::Op::kMin, hi, 2));
  if (lo[0] != -hi[0] || lo[1] != -hi[1]) {
    return Status::State("the ranks see different saved jobs of '" + name + "' (here " +
                         std::to_string(shape->ranks) + " ranks, " +
                         std::to_string(shape->ranks_per_node) + " per node; between " +
                         std::to_string(lo[0]) + " and " + std::to_string(-hi[0]) +
                         " ranks elsewhere): their storage roots do not show the same files");
  }
  return shape;
}

// The saved ranks this member checks: s = rank, rank + size, ...; a member
// beyond the saved ranks (a job larger than the saved one) checks rank % N,
// so that every member has at least one.
std::vector<int> MyShare(const Group& group, const saved::Shape& shape) {
  std::vector<int> share;
  if (group.rank() >= shape.ranks) return {group.rank() % shape.ranks};
  for (int s = group.rank(); s < shape.ranks; s += group.size()) share.push_back(s);
  return share;
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { (void)Close(); }

Result<std::unique_ptr<Client>> Client::Open(const Config& config) {
  CAIRN_ASSIGN_OR_RETURN(auto pipeline, core::Pipeline::Start(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->root = config;
  impl->core->pipeline = std::move(pipeline);
  auto mode = cairn::core::ParsePlacementMode(config.placement);
  if (!mode.ok()) return mode.status();
  impl->placement = std::make_unique<placement::State>(config.numa != nullptr ? config.numa : &os::RealNuma(),
                                                       config.record_placement, *mode);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<std::unique_ptr<Client>> Client::Open(const char* config_path) {
  CAIRN_ASSIGN_OR_RETURN(Config config, LoadConfig(config_path));
  return Open(config);
}

Status Client::Close() {
  std::unique_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Status::Ok();
  {
    MutexLock l(&impl_->restores_mu);  // they refer to the pipeline
    impl_->restores.clear();
  }
  Status s = impl_->core->pipeline->Shutdown();
  // The collective completions below run on this thread alone.
  if (impl_->progress) impl_->progress->Stop();
  if (impl_->levels) {
    // Collective (every rank closes): the partner copies still in flight.
    Status l = impl_->levels->Finish();
    if (s.ok()) s = l;
  }
  if (impl_->global) {
    // Collective (every rank closes): completes the background rounds, so
    // that no nonblocking collective is left to MPI_Finalize, and records
    // the newest version every rank committed once the flushes are done.
    Status f = impl_->global->Finish();
    if (s.ok()) s = f;
    impl_->global.reset();
  }
  impl_->core->pipeline.reset();
  return s;
}

Status Client::Protect(int id, void* ptr, size_t bytes) { return Protect(id, ptr, bytes, ProtectOptions{}); }

Status Client::Protect(int id, void* ptr, size_t bytes, const ProtectOptions& options) {
  if (options.changes && (static_cast<int>(*options.changes) < 0 || static_cast<int>(*options.changes) > 3)) {
    return Status::InvalidArgument("protect region " + std::to_string(id) + ": unknown change detection mode " +
                                   std::to_string(static_cast<int>(*options.changes)));
  }
  if (ptr == nullptr && bytes > 0) {
    return Status::InvalidArgument("protect region " + std::to_string(id) + ": null pointer with " +
                                   std::to_string(bytes) + " bytes");
  }
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  // One call for host, device and managed pointers: the driver says which.
  auto kind = impl_->core->pipeline->ClassifyRegion(ptr, bytes);
  if (!kind.ok()) return kind.status().WithContext("protect region " + std::to_string(id));
  uint64_t total = 0;
  {
    MutexLock regions_lock(&impl_->core->regions_mu);
    impl_->core->regions[id] = Region{ptr, bytes, *kind, options.changes};
    for (const auto& [rid, r] : impl_->core->regions) total += r.bytes;
  }
  if (options.reserve_cache) impl_->core->pipeline->ReserveFor(total);
  return Status::Ok();
}

Status Client::Unprotect(int id) { return Unprotect(id, UnprotectOptions{}); }

Status Client::Unprotect(int id, const UnprotectOptions& options) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  bool host = false;
  {
    MutexLock regions_lock(&impl_->core->regions_mu);
    auto it = impl_->core->regions.find(id);
    if (it == impl_->core->regions.end()) {
      return Status::NotFound("region " + std::to_string(id) + " is not protected");
    }
    host = it->second.memory == MemoryKind::kHost;
    impl_->core->regions.erase(it);
  }
  // Only host memory is read by a zero-copy epoch after Checkpoint returns.
  if (host && options.wait_for_reads) impl_->core->pipeline->ReleaseSources();
  return Status::Ok();
}

Status Client::Checkpoint(std::string_view name, int64_t version) {
  const SteadyTime start = impl_->Now();
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  std::vector<core::CaptureSource> sources;
  uint64_t bytes = 0;
  {
    MutexLock regions_lock(&impl_->core->regions_mu);
    for (const auto& [id, r] : impl_->core->regions) {
      sources.push_back({.spec = {.id = id, .memory = r.memory, .bytes = r.bytes}, .data = r.ptr,
                         .changes = r.changes});
      bytes += r.bytes;
    }
  }
  // In a group with mpi.l4_every, only L4 turns go to the persistent tier.
  const bool persist = !impl_->levels || impl_->levels->PersistTurn(std::string(name), version);
  Status s = impl_->core->pipeline->Capture(format::EntryKind::kCheckpoint, std::string(name), version,
                                            sources, impl_->placement->Record(version, sources), persist);
  if (impl_->global) {
    impl_->global->Checkpointed(name, s.ok() ? version : -1);
    ProgressGlobal(*impl_);
    // After the progress: a checkpoint never starts its own version's
    // partner copy (it is not committed yet anyway).
    impl_->levels->Checkpointed(std::string(name), version, s.ok());
    if (impl_->progress) impl_->progress->Kick();
  }
  if (s.ok()) {
    const SteadyTime end = impl_->Now();
    MutexLock interval_lock(&impl_->interval_mu);
    impl_->interval.OnCheckpoint(std::string(name), version, bytes, SecondsBetween(start, end), end);
  }
  return s;
}

Status Client::Wait(std::string_view name, int64_t version, Level level) {
  const SteadyTime start = impl_->Now();
  Status s = WaitFor(name, version, level);
  if (s.ok()) {
    const SteadyTime end = impl_->Now();
    MutexLock interval_lock(&impl_->interval_mu);
    impl_->interval.OnWait(std::string(name), version, SecondsBetween(start, end), end);
  }
  return s;
}

Status Client::WaitFor(std::string_view name, int64_t version, Level level) {
  if (level != Level::kCache && level != Level::kLocal && level != Level::kPersistent) {
    return Status::InvalidArgument("unknown level " + std::to_string(static_cast<int>(level)));
  }
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  Status s = impl_->core->pipeline->Wait(format::EntryKind::kCheckpoint, std::string(name), version, level);
  if (!impl_->group) return s;
  ProgressGlobal(*impl_);
  if (s.ok()) s = impl_->global->TakeError();  // a failed background record fails here
  const std::string label = "version " + std::to_string(version) + " of '" + std::string(name) + "'";
  CAIRN_RETURN_IF_ERROR(collective::Agree(*impl_->group, s, "waiting for " + label));
  if (level == Level::kCache) return Status::Ok();
  // Levels records the global commit: after the persistent copy on an L4
  // turn, so that the wait writes each manifest once (committed and
  // persistent together).
  return impl_->levels->AfterWait(std::string(name), version, level);
}


Result<int64_t> Client::Latest(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (!impl_->group) return impl_->core->pipeline->Latest(std::string(name));
  ProgressGlobal(*impl_);
  return CommonLatest(*impl_, name, std::numeric_limits<int64_t>::max());
}

Result<int64_t> Client::Latest(std::string_view name, int64_t at_most) {
  if (at_most < 0) {
    return Status::InvalidArgument("Latest: at_most is " + std::to_string(at_most) + ", must be >= 0");
  }
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->group) {
    ProgressGlobal(*impl_);
    return CommonLatest(*impl_, name, at_most);
  }
  // IntactVersions lists the newest first.
  CAIRN_ASSIGN_OR_RETURN(std::vector<int64_t> intact,
                         impl_->core->pipeline->IntactVersions(std::string(name)));
  for (int64_t v : intact) {
    if (v <= at_most) return v;
  }
  return Status::NotFound("no committed, intact version of '" + std::string(name) +
                          "' is <= " + std::to_string(at_most));
}


Status Client::Restore(std::string_view name, int64_t version) {
  return Restore(name, version, RestoreOptions{});
}

Status Client::Restore(std::string_view name, int64_t version, const RestoreOptions& options) {
  const SteadyTime start = impl_->Now();
  Status s = RestoreVersion(name, version, options);
  if (s.ok()) impl_->Restored(name, start);
  return s;
}

Status Client::BeginRestore() {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  MutexLock l(&impl_->restores_mu);
  impl_->restores.push_back(std::make_unique<core::Pipeline::RestoreWait>(*impl_->core->pipeline));
  return Status::Ok();
}

Status Client::EndRestore() {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  MutexLock l(&impl_->restores_mu);
  if (impl_->restores.empty())
    return Status::State("EndRestore: no restore begun (BeginRestore) is open");
  impl_->restores.pop_back();
  return Status::Ok();
}

Status Client::RestoreVersion(std::string_view name, int64_t version, const RestoreOptions& options) {
  const core::FileRead read =
      options.shared_on_node ? core::FileRead::kThroughPageCache : core::FileRead::kAsWritten;
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  const auto read_local = [&] {
    return impl_->core->pipeline->Restore(std::string(name), version, impl_->core->RestoreTargets(), read);
  };
  if (!impl_->group) return impl_->PlacedRestore(std::string(name), version, read_local);
  ProgressGlobal(*impl_);
  const core::Pipeline::RestoreWait waiting(*impl_->core->pipeline);  // the recovery and the read
  const std::string what =
      "restoring version " + std::to_string(version) + " of '" + std::string(name) + "'";
  CAIRN_RETURN_IF_ERROR(CheckSameSize(*impl_, std::string(name)));
  CAIRN_RETURN_IF_ERROR(impl_->levels->Recover(std::string(name), version, -1));
  Status s = impl_->PlacedRestore(std::string(name), version, read_local);
  int64_t damaged = s.code() == Code::kCorrupt || s.code() == Code::kIo ? 1 : 0;
  if (impl_->redundant()) {
    // A damaged local copy: those ranks take the partner's copy or rebuild
    // it from parity, and all retry once.
    CAIRN_RETURN_IF_ERROR(impl_->group->AllReduce(Group::Op::kMax, &damaged, 1));
    if (damaged != 0) {
      const bool mine = s.code() == Code::kCorrupt || s.code() == Code::kIo;
      CAIRN_RETURN_IF_ERROR(impl_->levels->Recover(std::string(name), version, mine ? version : -1));
      s = read_local();
    }
  }
  CAIRN_RETURN_IF_ERROR(collective::Agree(*impl_->group, s, what));
  impl_->levels->CountRestore(std::string(name), version);
  return Status::Ok();
}

Result<int64_t> Client::RestoreLatest(std::string_view name) {
  const SteadyTime start = impl_->Now();
  Result<int64_t> v = RestoreNewest(name);
  if (v.ok()) impl_->Restored(name, start);
  return v;
}

Result<int64_t> Client::RestoreNewest(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (!impl_->group) {
    auto v = impl_->core->pipeline->RestoreLatest(std::string(name), impl_->core->RestoreTargets());
    if (v.ok()) impl_->PlaceAfter(std::string(name), *v);  // moves the restored pages
    return v;
  }
  // Collective: restore the newest common version; when it is damaged on
  // any rank (kCorrupt, kIo), every rank falls back to the next common one.
  ProgressGlobal(*impl_);
  const core::Pipeline::RestoreWait waiting(*impl_->core->pipeline);  // recoveries, reads, fallbacks
  std::string damaged;
  int64_t bound = std::numeric_limits<int64_t>::max();
  int64_t distrust = -1, retried = -1;
  for (;;) {
    auto common = CommonLatest(*impl_, name, bound, distrust);
    if (!common.ok()) return damaged.empty() ? common.status() : common.status().WithContext("after damage:" + damaged);
    Status s = impl_->core->pipeline->Restore(std::string(name), *common, impl_->core->RestoreTargets());
    int64_t fault = s.ok() ? 0 : (s.code() == Code::kCorrupt || s.code() == Code::kIo) ? 1 : 2;
    CAIRN_RETURN_IF_ERROR(impl_->group->AllReduce(Group::Op::kMax, &fault, 1));
    if (fault == 0) {
      impl_->PlaceAfter(std::string(name), *common);  // moves the restored pages
      impl_->levels->CountRestore(std::string(name), *common);
      return *common;
    }
    const std::string what = "restoring version " + std::to_string(*common) + " of '" + std::string(name) + "'";
    if (fault == 2) {
      // Not the file's fault (a region of another size, ...): all stop, and
      // the others learn which rank it was.
      const bool other = !s.ok() && s.code() != Code::kCorrupt && s.code() != Code::kIo;
      return collective::Agree(*impl_->group, other ? s : Status::Ok(), what);
    }
    if (damaged.size() < 2000) {
      damaged += " version " + std::to_string(*common) + (s.ok() ? " is damaged on another rank;" : ": " + s.message() + ";");
    }
    if (impl_->redundant() && retried != *common) {
      // Once per version: the damaged ranks take their partner's copy of it
      // or rebuild it from parity.
      retried = bound = *common;
      distrust = s.ok() ? -1 : *common;
      continue;
    }
    distrust = -1;
    bound = *common - 1;
  }
}

Result<int> Client::SavedRanks(std::string_view name_view, int64_t version) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  SoloGroup solo;
  Group& group = impl_->group ? *impl_->group : solo;
  const std::string name(name_view);
  CAIRN_ASSIGN_OR_RETURN(saved::Shape shape, AgreedShape(*impl_, group, name));
  Status mine;
  for (int s : MyShare(group, shape)) {
    mine = saved::Serves(impl_->root, shape, name, version, s);
    if (!mine.ok()) break;
  }
  CAIRN_RETURN_IF_ERROR(collective::Agree(group, mine,
                                          "checking version " + std::to_string(version) + " of '" +
                                              name + "' on the " + std::to_string(shape.ranks) +
                                              " saved ranks"));
  return shape.ranks;
}

Result<Client::SavedVersion> Client::SavedLatest(std::string_view name_view) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  SoloGroup solo;
  Group& group = impl_->group ? *impl_->group : solo;
  const std::string name(name_view);
  CAIRN_ASSIGN_OR_RETURN(saved::Shape shape, AgreedShape(*impl_, group, name));
  // This member's candidates: the versions every saved rank of its share serves.
  Result<std::vector<int64_t>> mine = std::vector<int64_t>{};
  bool first = true;
  for (int s : MyShare(group, shape)) {
    auto served = saved::ServedVersions(impl_->root, shape, name, s);
    if (!served.ok()) {
      mine = served.status();
      break;
    }
    if (first) {
      *mine = *served;
      first = false;
      continue;
    }
    std::erase_if(*mine, [&](int64_t v) {
      return std::find(served->begin(), served->end(), v) == served->end();
    });
  }
  CAIRN_RETURN_IF_ERROR(collective::Agree(group, mine.status(),
                                          "finding the latest saved version of '" + name + "'"));
  CAIRN_ASSIGN_OR_RETURN(
      int64_t common, collective::NewestCommon(group, *mine, std::numeric_limits<int64_t>::max()));
  if (common < 0) {
    return Status::NotFound("no version of '" + name +
                            "' is globally committed and intact on all " +
                            std::to_string(shape.ranks) + " saved ranks");
  }
  return SavedVersion{.version = common, .ranks = shape.ranks};
}

Result<uint64_t> Client::SavedRegionSize(std::string_view name, int64_t version, int saved_rank,
                                         int region) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  CAIRN_ASSIGN_OR_RETURN(saved::Shape shape, saved::FindShape(impl_->root, std::string(name)));
  return saved::RegionSize(impl_->root, shape, std::string(name), version, saved_rank, region);
}

Status Client::ReadSavedRegion(std::string_view name, int64_t version, int saved_rank, int region,
                               uint64_t offset, void* dst, size_t bytes) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (dst != nullptr && bytes > 0) {
    auto kind = impl_->core->pipeline->ClassifyRegion(dst, bytes);
    if (!kind.ok()) return kind.status().WithContext("reading a saved region");
    if (*kind != MemoryKind::kHost) {
      return Status::Unsupported(
          "reading a saved region into device or managed memory: read into host memory");
    }
  }
  CAIRN_ASSIGN_OR_RETURN(saved::Shape shape, saved::FindShape(impl_->root, std::string(name)));
  return saved::ReadRegion(impl_->root, shape, std::string(name), version, saved_rank, region,
                           offset, dst, bytes);
}

Result<bool> Client::CheckpointDue(std::string_view name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  ProgressGlobal(*impl_);
  Status s;
  int64_t due = 0;
  if (!(impl_->config.mtbf_s > 0)) {
    s = Status::Config("checkpoint.mtbf_s (CAIRN_MTBF) is not set: cairn_checkpoint_due needs the mean time "
                       "between failures in seconds to compute the optimal checkpoint interval");
  } else {
    MutexLock interval_lock(&impl_->interval_mu);
    const core::IntervalDecision d = impl_->interval.Due(std::string(name), impl_->config.mtbf_s, impl_->Now());
    if (d.measured) impl_->interval_stats = {d.interval_s, d.waste, d.checkpoint_s, d.restore_s};
    due = d.due ? 1 : 0;
  }
  if (!impl_->group) {
    if (!s.ok()) return s;
    return due != 0;
  }
  // The ranks must checkpoint the same versions: due anywhere is due everywhere.
  CAIRN_RETURN_IF_ERROR(collective::Agree(*impl_->group, s, "cairn_checkpoint_due of '" + std::string(name) + "'"));
  CAIRN_RETURN_IF_ERROR(impl_->group->AllReduce(Group::Op::kMax, &due, 1));
  return due != 0;
}

Result<std::unique_ptr<History>> Client::OpenHistory(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  CAIRN_RETURN_IF_ERROR(impl_->core->pipeline->OpenHistory(std::string(name)));
  auto impl = std::make_unique<History::Impl>();
  impl->core = impl_->core;
  impl->name = std::string(name);
  return std::unique_ptr<History>(new History(std::move(impl)));
}

Status Client::RegisterThread(int index) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  return impl_->placement->RegisterThread(index);
}

Status Client::RestoreAffinity(int index) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  return impl_->placement->RestoreAffinity(index);
}

Stats Client::GetStats() const {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Stats{};
  ProgressGlobal(*impl_);
  Stats stats = impl_->core->pipeline->GetStats();
  if (impl_->levels) stats.mpi = impl_->levels->stats();
  MutexLock interval_lock(&impl_->interval_mu);
  stats.interval = impl_->interval_stats;
  return stats;
}

const Config& Client::config() const { return impl_->config; }

Result<std::unique_ptr<Client>> OpenInGroup(Result<Config> config, std::unique_ptr<Group> group) {
  if (!group) return Status::InvalidArgument("OpenInGroup: no group");
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group, config.status(), "loading the configuration"));
  CAIRN_RETURN_IF_ERROR(collective::CheckConfigsAgree(*group, *config));
  // The redundancy levels' settings: valid and the same on every rank
  // (docs/mpi.md), then the partners and the XOR sets.
  CAIRN_ASSIGN_OR_RETURN(redundancy::Plan plan, redundancy::AgreePlan(*group, *config));
  auto client = Client::Open(collective::RankConfig(*config, *group));
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group, client.status(), "opening the client"));
  Client::Impl& impl = *(*client)->impl_;
  impl.group = std::move(group);
  impl.root = *config;
  impl.opener = std::this_thread::get_id();
  core::Pipeline* pipeline = impl.core->pipeline.get();
  Client::Impl* self = &impl;
  impl.levels = std::make_unique<redundancy::Levels>(
      impl.group.get(), impl.config, std::move(plan),
      redundancy::Levels::Hooks{
          .make_persistent =
              [pipeline](const std::string& name, int64_t v) {
                return pipeline->Wait(format::EntryKind::kCheckpoint, name, v, Level::kPersistent);
              },
          .record = [self](const std::string& name, int64_t committed,
                           int64_t persistent) { return RecordGlobal(*self, name, committed, persistent); },
          .intact = [pipeline](const std::string& name) { return pipeline->IntactVersions(name); },
          .local = {.committed =
                        [pipeline](const std::string& name, int64_t v) {
                          return pipeline->NewestLocalCommit(name).version >= v;
                        },
                    .wait =
                        [pipeline](const std::string& name, int64_t v) {
                          return pipeline->Wait(format::EntryKind::kCheckpoint, name, v, Level::kLocal);
                        }}});
  impl.global = std::make_unique<collective::GlobalCommit>(
      impl.group.get(), impl.config,
      collective::Manifest{.ranks = impl.group->size(),
                           .ranks_per_node = impl.group->ranks_per_node()},
      [pipeline](const std::string& name) {
        const auto c = pipeline->NewestLocalCommit(name);
        return collective::GlobalCommit::Local{.version = c.version, .realtime_ns = c.realtime_ns};
      },
      [pipeline](const std::string& name, int64_t global, int64_t common) {
        pipeline->SetGlobalCommit(name, global, common);
      });
  CAIRN_RETURN_IF_ERROR(
      collective::Agree(*impl.group, StartProgress(impl), "starting Cairn's progress thread"));
  return client;
}

Status WaitAtLevels(Client& client, std::string_view name, int64_t version, WaitLevels levels) {
  Client::Impl& impl = *client.impl_;
  std::shared_lock lock(impl.core->lifecycle);
  if (!impl.core->pipeline) return Closed();
  if (!impl.group) return Status::State("WaitAtLevels needs a client opened in a group (cairn_open_mpi)");
  const std::string label = "version " + std::to_string(version) + " of '" + std::string(name) + "'";
  // The same on every rank (set up at open from agreed settings): no agreement needed.
  CAIRN_RETURN_IF_ERROR(impl.levels->CheckAsked(levels, label));
  const Level level = levels.persistent ? Level::kPersistent : Level::kLocal;
  Status s = impl.core->pipeline->Wait(format::EntryKind::kCheckpoint, std::string(name), version, level);
  ProgressGlobal(impl);
  if (s.ok()) s = impl.global->TakeError();
  CAIRN_RETURN_IF_ERROR(collective::Agree(*impl.group, s, "waiting for " + label));
  return impl.levels->AtLevels(std::string(name), version, levels);
}

Status RemoveLocalCopies(Client& client, std::string_view name) {
  Client::Impl& impl = *client.impl_;
  std::shared_lock lock(impl.core->lifecycle);
  if (!impl.core->pipeline) return Closed();
  return impl.core->pipeline->RemoveLocalCopies(std::string(name));
}

Result<GlobalCommitState> ProgressGlobalCommit(Client& client, std::string_view name) {
  Client::Impl& impl = *client.impl_;
  std::shared_lock lock(impl.core->lifecycle);
  if (!impl.core->pipeline) return Closed();
  if (!impl.global) return Status::State("the global commit needs a client opened in a group (cairn_open_mpi)");
  ProgressGlobal(impl);
  GlobalCommitState st = impl.global->State(std::string(name));
  const redundancy::Protection p = impl.levels->Protected(std::string(name));
  st.l2_version = p.l2.version;
  st.l2_protected_ns = p.l2.ns;
  st.l3_version = p.l3.version;
  st.l3_protected_ns = p.l3.ns;
  return st;
}

// ---------------------------------------------------------------------------

History::History(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
History::~History() { (void)Close(); }

Status History::Push(int64_t step, const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return Status::InvalidArgument("history push: null data");
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->closed) return Status::State("history '" + impl_->name + "' is closed");
  auto kind = impl_->core->pipeline->ClassifyRegion(data, bytes);
  if (!kind.ok()) return kind.status().WithContext("history push");
  core::CaptureSource source{.spec = {.id = 0, .memory = *kind, .bytes = bytes}, .data = data};
  return impl_->core->pipeline->Capture(format::EntryKind::kHistoryStep, impl_->name, step, {source});
}

Result<size_t> History::Pop(int64_t step, void* dst, size_t capacity) {
  if (dst == nullptr && capacity > 0) return Status::InvalidArgument("history pop: null buffer");
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->closed) return Status::State("history '" + impl_->name + "' is closed");
  auto kind = impl_->core->pipeline->ClassifyRegion(dst, capacity);
  if (!kind.ok()) return kind.status().WithContext("history pop");
  return impl_->core->pipeline->Pop(impl_->name, step, dst, capacity, *kind);
}

Result<size_t> History::StepSize(int64_t step) const {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (impl_->closed) return Status::State("history '" + impl_->name + "' is closed");
  return impl_->core->pipeline->StepSize(impl_->name, step);
}

Status History::Close() {
  std::unique_lock lock(impl_->core->lifecycle);
  if (impl_->closed) return Status::Ok();
  impl_->closed = true;
  if (!impl_->core->pipeline) return Status::Ok();  // the client closed it already
  return impl_->core->pipeline->CloseHistory(impl_->name);
}

}  // namespace cairn
