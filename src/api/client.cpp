// cairn::Client and cairn::History: argument checking and the protected-region
// registry in front of core::Pipeline.
#include <map>
#include <shared_mutex>

#include <limits>

#include "api/collective.hpp"
#include "cairn/cairn.hpp"
#include "cairn/group.hpp"
#include "core/pipeline.hpp"
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
};

struct History::Impl {
  std::shared_ptr<ClientCore> core;
  std::string name;
  bool closed = false;  // guarded by core->lifecycle (exclusive to change)
};

namespace {

Status Closed() { return Status::State("the client is closed"); }

Status RecordGlobal(Client::Impl& impl, std::string_view name, int64_t committed, int64_t persistent) {
  Status s = collective::RecordGlobal(impl.config.fs, impl.config, std::string(name), impl.group->size(),
                                      committed, persistent);
  return collective::Agree(*impl.group, s, "recording the global commit of '" + std::string(name) + "'");
}

// The newest version <= bound that every rank has committed and whose
// structure checks out on every rank; recorded in the global manifest.
Result<int64_t> CommonLatest(Client::Impl& impl, std::string_view name, int64_t bound) {
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

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { (void)Close(); }

Result<std::unique_ptr<Client>> Client::Open(const Config& config) {
  CAIRN_ASSIGN_OR_RETURN(auto pipeline, core::Pipeline::Start(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->core->pipeline = std::move(pipeline);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<std::unique_ptr<Client>> Client::Open(const char* config_path) {
  CAIRN_ASSIGN_OR_RETURN(Config config, LoadConfig(config_path));
  return Open(config);
}

Status Client::Close() {
  std::unique_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Status::Ok();
  Status s = impl_->core->pipeline->Shutdown();
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
  MutexLock regions_lock(&impl_->core->regions_mu);
  impl_->core->regions[id] = Region{ptr, bytes, *kind, options.changes};
  return Status::Ok();
}

Status Client::Unprotect(int id) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  MutexLock regions_lock(&impl_->core->regions_mu);
  if (impl_->core->regions.erase(id) == 0) {
    return Status::NotFound("region " + std::to_string(id) + " is not protected");
  }
  return Status::Ok();
}

Status Client::Checkpoint(std::string_view name, int64_t version) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  std::vector<core::CaptureSource> sources;
  {
    MutexLock regions_lock(&impl_->core->regions_mu);
    for (const auto& [id, r] : impl_->core->regions) {
      sources.push_back({.spec = {.id = id, .memory = r.memory, .bytes = r.bytes}, .data = r.ptr,
                         .changes = r.changes});
    }
  }
  return impl_->core->pipeline->Capture(format::EntryKind::kCheckpoint, std::string(name), version,
                                        sources);
}

Status Client::Wait(std::string_view name, int64_t version, Level level) {
  if (level != Level::kCache && level != Level::kLocal && level != Level::kPersistent) {
    return Status::InvalidArgument("unknown level " + std::to_string(static_cast<int>(level)));
  }
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  Status s = impl_->core->pipeline->Wait(format::EntryKind::kCheckpoint, std::string(name), version, level);
  if (!impl_->group) return s;
  const std::string label = "version " + std::to_string(version) + " of '" + std::string(name) + "'";
  CAIRN_RETURN_IF_ERROR(collective::Agree(*impl_->group, s, "waiting for " + label));
  if (level == Level::kCache) return Status::Ok();
  return RecordGlobal(*impl_, name, version, level == Level::kPersistent ? version : -1);
}


Result<int64_t> Client::Latest(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (!impl_->group) return impl_->core->pipeline->Latest(std::string(name));
  return CommonLatest(*impl_, name, std::numeric_limits<int64_t>::max());
}


Status Client::Restore(std::string_view name, int64_t version) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  Status s = impl_->core->pipeline->Restore(std::string(name), version, impl_->core->RestoreTargets());
  if (!impl_->group) return s;
  return collective::Agree(*impl_->group, s,
                           "restoring version " + std::to_string(version) + " of '" + std::string(name) + "'");
}

Result<int64_t> Client::RestoreLatest(std::string_view name) {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Closed();
  if (!impl_->group) return impl_->core->pipeline->RestoreLatest(std::string(name), impl_->core->RestoreTargets());
  // Collective: restore the newest common version; when it is damaged on
  // any rank (kCorrupt, kIo), every rank falls back to the next common one.
  std::string damaged;
  int64_t bound = std::numeric_limits<int64_t>::max();
  for (;;) {
    auto common = CommonLatest(*impl_, name, bound);
    if (!common.ok()) return damaged.empty() ? common.status() : common.status().WithContext("after damage:" + damaged);
    Status s = impl_->core->pipeline->Restore(std::string(name), *common, impl_->core->RestoreTargets());
    int64_t fault = s.ok() ? 0 : (s.code() == Code::kCorrupt || s.code() == Code::kIo) ? 1 : 2;
    CAIRN_RETURN_IF_ERROR(impl_->group->AllReduce(Group::Op::kMax, &fault, 1));
    if (fault == 0) return *common;
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
    bound = *common - 1;
  }
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

Stats Client::GetStats() const {
  std::shared_lock lock(impl_->core->lifecycle);
  if (!impl_->core->pipeline) return Stats{};
  return impl_->core->pipeline->GetStats();
}

const Config& Client::config() const { return impl_->config; }

Result<std::unique_ptr<Client>> OpenInGroup(Result<Config> config, std::unique_ptr<Group> group) {
  if (!group) return Status::InvalidArgument("OpenInGroup: no group");
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group, config.status(), "loading the configuration"));
  CAIRN_RETURN_IF_ERROR(collective::CheckConfigsAgree(*group, *config));
  auto client = Client::Open(collective::RankConfig(*config, *group));
  CAIRN_RETURN_IF_ERROR(collective::Agree(*group, client.status(), "opening the client"));
  (*client)->impl_->group = std::move(group);
  return client;
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
