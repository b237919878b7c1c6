// Pipeline lifecycle, waiting, statistics and cache-chunk bookkeeping
// (the capture path is capture.cpp).
#include "engine/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/reader.hpp"
#include "engine/stage_owners.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "os/mem/memory.hpp"
#include "util/clock.hpp"

namespace cairn::core {

namespace {

format::WriterOptions CheckpointWriterOptions(const Config& c) {
  return format::WriterOptions{.direct = c.direct_io, .fsync = c.fsync, .mode = c.file_mode};
}

// History steps are scratch data unless declared persistent: no fsync (nothing
// to recover after a crash) and buffered writes, which leave the steps in the
// page cache so that reverse-order reads of evicted steps are memory-speed.
format::WriterOptions HistoryWriterOptions(const Config& c) {
  if (c.history_persistent) return CheckpointWriterOptions(c);
  return format::WriterOptions{.direct = false, .fsync = false, .mode = c.file_mode};
}

std::optional<tiers::FileTier> PersistentTier(const Config& c, os::FileSystem* fs) {
  if (c.persistent_dir.empty()) return std::nullopt;
  return tiers::FileTier(Level::kPersistent, c.persistent_dir, fs, CheckpointWriterOptions(c));
}

}  // namespace

Pipeline::Pipeline(const Config& config)
    : config_(config),
      numa_(config.numa != nullptr ? config.numa : &os::RealNuma()),
      fs_(config.fs ? config.fs : os::FileSystem::Default()),
      local_(Level::kLocal, config.scratch_dir, fs_, CheckpointWriterOptions(config)),
      history_(Level::kLocal, config.scratch_dir, fs_, HistoryWriterOptions(config)),
      persistent_(PersistentTier(config, fs_)),
      tracer_(config.trace_path, fs_),
      owners_(std::make_unique<StageOwners>(this)),
      checksummer_(&mu_, &cv_app_, &owners_->checksummer),
      flusher_(&mu_, &cv_app_, &store_, &movers_,
               {.checkpoints = &local_, .steps = &history_, .known_dirs = &known_dirs_},
               &owners_->flusher),
      persister_(&mu_, &cv_app_, &store_, &movers_,
                 {.checkpoints = persistent_ ? &*persistent_ : nullptr, .known_dirs = &known_dirs_},
                 &owners_->persister, {.persistent = true},
                 /*verify=*/true),
      mover_(&mu_, &cv_app_, &local_, persistent_ ? &*persistent_ : nullptr,
             static_cast<uint32_t>(config.block_bytes), static_cast<size_t>(config.keep_versions),
             {.catalog = &catalog_, .commits = &commits_}, &owners_->mover),
      prefetcher_(&mu_, &cv_app_, config_.prefetch_depth, &store_, &movers_, &history_,
                  &owners_->prefetcher),
      device_mover_(&mu_, &cv_app_, &stats_.device.evictions, &tracer_, &store_, &movers_,
                    &catalog_, config_.prefetch_depth, &owners_->device_mover),
      initializer_(&mu_, &cv_app_, &tracer_, config, &store_, &movers_, &owners_->initializer) {}

Result<std::unique_ptr<Pipeline>> Pipeline::Start(const Config& config) {
  CAIRN_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<Pipeline> p(new Pipeline(config));
  CAIRN_RETURN_IF_ERROR(p->Init());
  return p;
}

Status Pipeline::Init() {
  // Created durably (file_tier.hpp): a directory entry lost in a power loss
  // would take every version committed below it.
  CAIRN_RETURN_IF_ERROR(local_.EnsureDir().WithContext("storage.scratch"));
  if (persistent_)
    CAIRN_RETURN_IF_ERROR(persistent_->EnsureDir().WithContext("storage.persistent"));
  CAIRN_RETURN_IF_ERROR(OpenGpu());
  dio_.emplace(gpu_.get(), gpu_unavailable_, config_.block_bytes, config_.bounce_buffers);
  {
    MutexLock lock(&mu_);
    device_mover_.Attach(dcache_.get(), &*dio_);
  }
  // With a GPU in use the host cache is pinned by registering it with the
  // driver (page-locked and DMA-mapped at once); mlock otherwise.
  if (config_.pinner == nullptr && gpu_) initializer_.UseRegistrationPinner(gpu_->host_pinner());
  CAIRN_RETURN_IF_ERROR(initializer_.Prepare());
  {
    MutexLock lock(&mu_);
    // host_cache.numa: the threads follow their chunks' nodes.
    if (store_.cache().nodes().partitioned()) {
      const NodeFollower follower(numa_, store_.cache());
      flusher_.FollowNodes(follower);
      persister_.FollowNodes(follower);
      prefetcher_.FollowNodes(follower);
    }
  }
  copier_ = std::make_unique<CopyEngine>(CopyEngine::DefaultHelpers(config_.copy_threads));
  layering_ = std::make_unique<Layering>(ChangeOptions{.mode = config_.changes,
                                                       .max_layers = config_.max_layers,
                                                       .hash_chunk = config_.hash_chunk_bytes,
                                                       .engine = copier_.get()},
                                         static_cast<uint32_t>(config_.block_bytes));
  if (config_.capture == CaptureMode::kZeroCopy) zero_copy_.UsePageSources(*layering_);
  if (gpu_) device_mover_.Start("cairn device mover (device <-> host)", &tracer_);
  checksummer_.Start("cairn checksummer", &tracer_);
  flusher_.Start("cairn flusher (cache -> local)", &tracer_);
  if (persistent_) persister_.Start("cairn persister (cache -> persistent)", &tracer_);
  mover_.Start("cairn mover (local -> persistent, retention)", &tracer_);
  prefetcher_.Start("cairn prefetcher (files -> cache)", &tracer_);
  initializer_.Start("cairn initializer (touch, pin)");
  return Status::Ok();
}

Pipeline::~Pipeline() { (void)Shutdown(); }

Status Pipeline::Shutdown() {
  // A zero-copy epoch is read to the end (it needs the threads below) and
  // its watch ends: no protection is left after close.
  ReleaseSources();
  // Histories first: their unflushed steps are consumed, not written.
  std::vector<std::string> open_histories;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return Status::Ok();
    closing_ = true;
    for (const auto& [name, h] : catalog_.histories()) open_histories.push_back(name);
  }
  for (const auto& name : open_histories) (void)CloseHistory(name);

  Status first_error;
  {
    MutexLock lock(&mu_);
    cv_app_.wait(lock, [&]() CAIRN_REQUIRES(mu_) {
      return flusher_.Idle() && persister_.Idle() && checksummer_.Idle() && mover_.Idle() &&
             !device_mover_.DrainsPending();
    });
    shut_down_ = true;
    first_error = unreported_error_;
  }
  device_mover_.RequestStop();
  checksummer_.RequestStop();
  flusher_.RequestStop();
  persister_.RequestStop();
  mover_.RequestStop();
  prefetcher_.RequestStop();
  initializer_.RequestStop();
  NotifyAll();
  device_mover_.Stop();  // joins
  checksummer_.Stop();
  flusher_.Stop();
  persister_.Stop();
  mover_.Stop();
  prefetcher_.Stop();
  initializer_.Stop();
  copier_.reset();
  std::optional<HostCache> cache;
  {
    MutexLock lock(&mu_);
    catalog_.ClearEntries();
    device_mover_.Clear();
    // The stats keep the capacity it had (GetStats asks the cache while open).
    if (store_.has_cache()) stats_.cache_capacity_bytes = store_.cache().capacity_bytes();
    cache = store_.Close();
  }
  // Every thread is joined: the cache is ours alone, unpinned and unmapped
  // without the lock (munlock/unregister are system calls).
  if (cache) initializer_.Unpin(*cache);
  cache.reset();
  // GPU objects last, the runtime (context) after everything made on it.
  dio_.reset();  // streams and bounce buffers
  dcache_.reset();
  gpu_.reset();
  Status trace = tracer_.Write();
  return first_error.ok() ? trace : first_error;
}

void Pipeline::NotifyAll() {
  cv_app_.notify_all();
  device_mover_.Wake();
  checksummer_.Wake();
  flusher_.Wake();
  persister_.Wake();
  mover_.Wake();
  prefetcher_.Wake();
}

// A checkpoint's flush ended: committed, it may be the base of the next
// versions; failed or dropped, never.
void Pipeline::SettleLayering(Entry& e) {
  if (!store_.SettleLayer(e)) return;  // told already
  if (e.local().committed) {
    layering_->Committed(e.name, e.number);
  } else {
    layering_->Dropped(e.name, e.number);
  }
}

Pipeline::LocalCommit Pipeline::NewestLocalCommit(const std::string& name) const {
  MutexLock lock(&mu_);
  return commits_.NewestLocal(name);
}

void Pipeline::SetGlobalCommit(const std::string& name, int64_t global, int64_t common) {
  MutexLock lock(&mu_);
  if (commits_.RaiseGlobal(name, global, common))
    mover_.Retain(name);  // the deletions its commit made possible
}

void Pipeline::TraceCache() { store_.TraceOccupancy(tracer_); }

// ---------------------------------------------------------------------------
// Chunks

std::optional<uint32_t> Pipeline::TryAcquireChunk(uint32_t write_bytes, bool* was_touched,
                                                  uint64_t below_seq, int node) {
  auto c = store_.TryAcquire(write_bytes, was_touched, below_seq, node);
  if (c)
    initializer_.NoteTouchProgress();  // the writer touches it: the cache may be fully touched now
  return c;
}

std::optional<uint32_t> Pipeline::TakeChunk(uint32_t write_bytes, bool* was_touched, int node) {
  for (;;) {
    if (auto c = TryAcquireChunk(write_bytes, was_touched, UINT64_MAX, node)) return c;
    if (!store_.ReleaseOldestHold()) return std::nullopt;
  }
}

void Pipeline::WaitAsCaptureBlocked(const char* span, bool device,
                                    std::chrono::microseconds limit) {
  const bool copying = capture_copying_;
  SetCaptureCopying(false);
  const auto w0 = std::chrono::steady_clock::now();
  if (limit.count() > 0) {
    cv_app_.wait_for(mu_, limit);
  } else {
    cv_app_.wait(mu_);
  }
  const auto w1 = std::chrono::steady_clock::now();
  SetCaptureCopying(copying);
  (device ? stats_.device.capture_blocked_s : stats_.capture_blocked_s) += SecondsBetween(w0, w1);
  tracer_.Span(span, "app", w0, w1, 0);
}

void Pipeline::SetCaptureCopying(bool copying) {
  const bool ended = capture_copying_ && !copying;
  capture_copying_ = copying;
  if (ended) checksummer_.Wake();
}

void Pipeline::ReleaseChunks(Entry& e) {
  store_.Release(e);
  if (dcache_) {
    for (uint32_t b = 0; b < e.blocks().size(); ++b) device_mover_.DropSlot(e, b);
  }
  device_mover_.Wake();
  cv_app_.notify_all();
  prefetcher_.Wake();
}

void Pipeline::Unpin(const EntryPtr& e) {
  if (store_.Unpin(*e)) ReleaseChunks(*e);  // the last pin of a consumed entry
}

void Pipeline::Consume(const EntryPtr& e) {
  if (!store_.Consume(*e)) return;  // consumed already
  catalog_.Remove(*e);
  if (e->pins() == 0) ReleaseChunks(*e);
  flusher_.Wake();
  persister_.Wake();
}

void Pipeline::FailEntry(const EntryPtr& e, const Status& s) {
  store_.SetError(*e, s);
  ++stats_.failed_flushes;
  if (unreported_error_.ok()) unreported_error_ = s;
  store_.Failed(*e);
  cv_app_.notify_all();
  flusher_.Wake();
  persister_.Wake();
  if (e->kind == format::EntryKind::kCheckpoint) FailLayersOn(*e);
}

void Pipeline::FailLayersOn(const Entry& base) {
  for (const EntryPtr& layer : catalog_.LayersOn(base.name, base.number)) {
    if (layer->seq < base.seq) continue;  // on an earlier version of that number
    FailEntry(layer,
              base.local().error.WithContext("version " + std::to_string(layer->number) + " of '" +
                                             base.name + "' is layered on version " +
                                             std::to_string(base.number) + ", which failed"));
  }
}

// ---------------------------------------------------------------------------
// Waiting and statistics

Status Pipeline::Wait(format::EntryKind kind, const std::string& name, int64_t number,
                      Level level) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  if (level == Level::kPersistent && !persistent_) {
    return Status::InvalidArgument(
        "wait for the persistent level, but storage.persistent is not set");
  }
  MutexLock lock(&mu_);
  EntryPtr e = catalog_.Find(kind, name, number);
  if (!e) {
    lock.Unlock();
    return Reader(this).WaitForFiles(kind, name, number, level);
  }
  if (level == Level::kPersistent && e->persist().skipped) {
    return Status::InvalidArgument(
        "version " + std::to_string(number) + " of '" + name +
        "' is not written to the persistent level: its checkpoint was not an L4 turn "
        "(mpi.l4_every, CAIRN_L4_EVERY)");
  }
  cv_app_.wait(lock, [&]() CAIRN_REQUIRES(mu_) {
    switch (level) {
      case Level::kCache:
        return e->capture().done;
      case Level::kLocal:
        return e->local().committed || e->failed() || e->consumed();
      case Level::kPersistent:  // levels are cumulative: the persister may commit first
        return (e->persist().committed && e->local().committed) || e->failed() ||
               !e->persist().error.ok() || e->consumed();
    }
    return true;
  });
  Status s = e->local().error;
  if (s.ok() && level == Level::kPersistent) s = e->persist().error;
  if (!s.ok() && unreported_error_.code() == s.code() &&
      unreported_error_.message() == s.message()) {
    unreported_error_ = Status::Ok();
  }
  return s;
}

Status Pipeline::RemoveLocalCopies(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  if (config_.changes != ChangeDetection::kFull) {
    return Status::Unsupported(
        std::string("deleting the local copies of '") + name +
        "' with checkpoint.changes = " + ChangeDetectionName(config_.changes) +
        ": the next layered version would rest on a deleted base (use full)");
  }
  MutexLock lock(&mu_);
  const bool persistent = persistent_.has_value();
  cv_app_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return catalog_.Settled(name, persistent); });
  // On the mover: after the copies of these versions, which read the local files.
  mover_.RemoveAll(&local_, name, format::EntryKind::kCheckpoint);
  return Status::Ok();
}

Stats Pipeline::GetStats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  s.init = initializer_.stats();
  s.init.restores_now =
      static_cast<uint64_t>(std::max(movers_.now(MemoryMovers::Kind::kRestore), 0));
  if (store_.has_cache()) {
    s.cache_capacity_bytes = store_.cache().capacity_bytes();
    s.cache_used_bytes = store_.cache().used_bytes();
  }
  if (dcache_) {
    s.device.mapped_bytes = dcache_->mapped_bytes();
    s.device.used_bytes = uint64_t{dcache_->used_count()} * dcache_->slot_bytes();
    if (dcache_->mapping_done()) {
      s.device.fully_mapped_s = dcache_->mapping_seconds();
      if (s.device.map_error.empty()) s.device.map_error = dcache_->map_error();
    }
  }
  s.cache_dirty_bytes = store_.dirty_bytes();
  if (layering_) s.changes = layering_->stats();
  zero_copy_.AddCounters(&s.zero_copy);
  return s;
}

bool Pipeline::ApplicationBusy() const {
  return movers_.now(MemoryMovers::Kind::kCapture) > 0 ||
         movers_.now(MemoryMovers::Kind::kRestore) > 0;
}

void Pipeline::AwaitApplicationIdle(std::chrono::milliseconds at_most) {
  // changed() is notified without mu_ (memory_movers.hpp), so a wake can
  // slip between the test and the wait: `at_most` bounds what that costs.
  MutexLock lock(&mu_);
  movers_.changed().wait_for(mu_, at_most, [&] { return !ApplicationBusy(); });
}

}  // namespace cairn::core
