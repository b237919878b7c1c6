// What cairn::Client's files share (client.cpp, the application's calls;
// client_group.cpp, a client in a group): the state behind a Client and
// its Histories, and the helpers both call. Internal to libcairn.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/placement_state.hpp"
#include "cairn/cairn.hpp"
#include "cairn/group.hpp"
#include "engine/pipeline.hpp"
#include "models/interval_model.hpp"
#include "redundancy/background.hpp"
#include "redundancy/global_commit.hpp"
#include "redundancy/levels.hpp"
#include "util/clock.hpp"
#include "util/mutex.hpp"

namespace cairn {

// Shared by a Client and its Histories, so that a History outliving its
// Client fails cleanly (kState) instead of touching freed memory.
struct ClientCore {
  struct Region {
    void* ptr = nullptr;
    size_t bytes = 0;
    MemoryKind memory = MemoryKind::kHost;
    std::optional<ChangeDetection> changes;  // ProtectOptions::changes
  };
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

// A member's checkpoints as its redundancy levels and global commit see
// them (redundancy/checkpoints.hpp), over its pipeline; the global
// commit's record goes through the client's (client_group.cpp).
class GroupCheckpoints final : public redundancy::Checkpoints {
 public:
  GroupCheckpoints(core::Pipeline* pipeline, Client::Impl* impl)
      : pipeline_(pipeline), impl_(impl) {}
  Commit NewestLocal(const std::string& name) override;
  Status WaitLocal(const std::string& name, int64_t version) override;
  Status WaitPersistent(const std::string& name, int64_t version) override;
  Result<std::vector<int64_t>> IntactVersions(const std::string& name) override;
  Status RecordGlobal(const std::string& name, int64_t committed, int64_t persistent) override;
  void KeepGlobal(const std::string& name, int64_t global, int64_t common) override;
  ExtentList CopyCached(const std::string& name, int64_t number, uint64_t offset, uint64_t bytes,
                        uint8_t* dst) override;
  Result<uint64_t> PlannedFileBytes(const std::string& name, int64_t version) override;
  Result<bool> CommittedLocally(const std::string& name, int64_t version) override;
  bool ApplicationBusy() override;
  void AwaitApplicationIdle(std::chrono::milliseconds at_most) override;

 private:
  core::Pipeline* const pipeline_;
  Client::Impl* const impl_;
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
  // In a group: the member's checkpoints as `levels` and `global` see them
  // (declared before them: it outlives both).
  std::unique_ptr<GroupCheckpoints> checkpoints;
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

// kState: a call on a closed client.
Status Closed();

// Any Cairn call on the opening thread moves the background global commit
// and the partner copies on, where no progress thread of Cairn's does
// (client.cpp).
void ProgressGlobal(Client::Impl& impl);

// A client in a group (client_group.cpp). Each is collective.
// A job of another size must not restore a saved job's versions rank by
// rank: kState on every rank when the manifests name another size.
Status CheckSameSize(Client::Impl& impl, const std::string& name);
// The newest version <= bound that every rank has committed and whose
// structure checks out on every rank (`distrust`: a version found damaged,
// re-checked); recorded in the global manifest.
Result<int64_t> CommonLatest(Client::Impl& impl, std::string_view name, int64_t bound,
                             int64_t distrust = -1);

}  // namespace cairn
