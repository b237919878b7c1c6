// cairn::Client and cairn::History: argument checking and the protected-region
// registry in front of core::Pipeline. A client in a group, the collective
// side of its calls and the readers of a saved job: client_group.cpp.
#include <algorithm>
#include <limits>

#include "api/client_impl.hpp"
#include "format/chain.hpp"
#include "format/naming.hpp"
#include "redundancy/collective.hpp"
#include "util/log.hpp"

namespace cairn {

Status Closed() { return Status::State("the client is closed"); }

// Never blocks: MPI_Test, MPI_Iallreduce / MPI_Isend / MPI_Irecv starts,
// chunk reads and writes.
void ProgressGlobal(Client::Impl& impl) {
  if (!impl.global || impl.progress || std::this_thread::get_id() != impl.opener) return;
  impl.global->Progress();
  (void)impl.levels->Progress();
}

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
    impl_->core->regions[id] = ClientCore::Region{ptr, bytes, *kind, options.changes};
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
