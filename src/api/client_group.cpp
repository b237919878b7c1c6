// cairn::Client in a group (OpenInGroup; docs/mpi.md): opening it with the
// redundancy levels and the global commit, Cairn's progress threads, the
// collective latest, WaitAtLevels, the global commit's state, and the
// readers of a saved job's ranks (SavedRanks, SavedLatest, SavedRegionSize,
// ReadSavedRegion; also on a client of one process).
#include <algorithm>
#include <limits>
#include <shared_mutex>
#include <thread>

#include "api/client_impl.hpp"
#include "format/naming.hpp"
#include "redundancy/collective.hpp"
#include "redundancy/saved.hpp"
#include "redundancy/solo_group.hpp"
#include "util/log.hpp"

namespace cairn {

namespace {

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
  if (impl.levels->redundant()) {
    // Collective. Unsupported alike on every member (one kind of group):
    // the parity stays in the waits, and older versions come back only as
    // they are checkpointed again.
    auto second = group.Duplicate();
    const bool none = !second.ok() && second.status().code() == Code::kUnsupported;
    CAIRN_RETURN_IF_ERROR(collective::Agree(
        group, none ? Status::Ok() : second.status(),
        "a second channel for the L3 parity and the recoveries of older versions"));
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

}  // namespace

redundancy::Checkpoints::Commit GroupCheckpoints::NewestLocal(const std::string& name) {
  const core::Pipeline::LocalCommit c = pipeline_->NewestLocalCommit(name);
  return {.version = c.version, .realtime_ns = c.realtime_ns};
}
Status GroupCheckpoints::WaitLocal(const std::string& name, int64_t version) {
  return pipeline_->Wait(format::EntryKind::kCheckpoint, name, version, Level::kLocal);
}
Status GroupCheckpoints::WaitPersistent(const std::string& name, int64_t version) {
  return pipeline_->Wait(format::EntryKind::kCheckpoint, name, version, Level::kPersistent);
}
Result<std::vector<int64_t>> GroupCheckpoints::IntactVersions(const std::string& name) {
  return pipeline_->IntactVersions(name);
}
Status GroupCheckpoints::RecordGlobal(const std::string& name, int64_t committed,
                                      int64_t persistent) {
  return cairn::RecordGlobal(*impl_, name, committed, persistent);
}
void GroupCheckpoints::KeepGlobal(const std::string& name, int64_t global, int64_t common) {
  pipeline_->SetGlobalCommit(name, global, common);
}
ExtentList GroupCheckpoints::CopyCached(const std::string& name, int64_t number, uint64_t offset,
                                        uint64_t bytes, uint8_t* dst) {
  return pipeline_->CopyCached(name, number, offset, bytes, dst);
}
Result<uint64_t> GroupCheckpoints::PlannedFileBytes(const std::string& name, int64_t version) {
  return pipeline_->PlannedFileBytes(name, version);
}
Result<bool> GroupCheckpoints::CommittedLocally(const std::string& name, int64_t version) {
  return pipeline_->CommittedLocally(name, version);
}
bool GroupCheckpoints::ApplicationBusy() { return pipeline_->ApplicationBusy(); }
void GroupCheckpoints::AwaitApplicationIdle(std::chrono::milliseconds at_most) {
  pipeline_->AwaitApplicationIdle(at_most);
}

// The ranks' manifests record the saved job's size (docs/format.md 3.6): a
// job's rank r does not continue another size's saved rank r.
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
                             int64_t distrust) {
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

namespace {

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
  impl.checkpoints = std::make_unique<GroupCheckpoints>(impl.core->pipeline.get(), &impl);
  impl.levels = std::make_unique<redundancy::Levels>(impl.group.get(), impl.config, std::move(plan),
                                                     impl.checkpoints.get());
  impl.global = std::make_unique<collective::GlobalCommit>(
      impl.group.get(), impl.config,
      collective::Manifest{.ranks = impl.group->size(),
                           .ranks_per_node = impl.group->ranks_per_node()},
      impl.checkpoints.get());
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

}  // namespace cairn
