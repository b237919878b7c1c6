// Pipeline lifecycle, capture, waiting and cache-chunk bookkeeping.
#include "core/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/memory_copy.hpp"
#include "format/naming.hpp"
#include "os/fs.hpp"
#include "os/memory.hpp"
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

}  // namespace

Pipeline::Pipeline(const Config& config)
    : config_(config),
      fs_(config.fs ? config.fs : os::FileSystem::Default()),
      local_(Level::kLocal, config.scratch_dir, fs_, CheckpointWriterOptions(config)),
      history_(Level::kLocal, config.scratch_dir, fs_, HistoryWriterOptions(config)),
      tracer_(config.trace_path, fs_),
      pinner_(config.pinner ? config.pinner : os::MemoryPinner::Mlock()),
      checksummer_(&mu_, &cv_app_,
                   {.run = [this](BlockJob& j) CAIRN_REQUIRES(mu_) { ChecksumBlock(j.e, j.block); }}),
      flusher_(&mu_, &cv_app_, {.run = [this](EntryPtr& e) CAIRN_REQUIRES(mu_) { FlushNext(e); }}),
      mover_(&mu_, &cv_app_, {.run = [this](MoverTask& task) CAIRN_REQUIRES(mu_) {
               MutexUnlock unlocked(&mu_);  // the task does its own I/O and locking
               task();
             }}),
      prefetcher_(&mu_, &cv_app_,
                  {.take = [this](Worker<EntryPtr>&) CAIRN_REQUIRES(mu_) -> std::optional<EntryPtr> {
                     if (EntryPtr e = FindPrefetchTarget()) return e;
                     return std::nullopt;
                   },
                   .run = [this](EntryPtr& e) CAIRN_REQUIRES(mu_) { PrefetchStep(e); }}),
      device_mover_(&mu_, &cv_app_,
                    {.take = [this](Worker<DeviceJob>& w) CAIRN_REQUIRES(mu_) -> std::optional<DeviceJob> {
                       // Drains first (FIFO), then prefetches.
                       if (auto job = w.PopFront()) return job;
                       if (EntryPtr e = FindDevicePrefetchTarget()) return DeviceJob{.e = e, .drain = false};
                       return std::nullopt;
                     },
                     .run = [this](DeviceJob& j) CAIRN_REQUIRES(mu_) {
                       j.drain ? DrainBlock(j.e, j.block) : DevicePrefetch(j.e);
                     }}) {
  if (!config.persistent_dir.empty()) {
    persistent_.emplace(Level::kPersistent, config.persistent_dir, fs_, CheckpointWriterOptions(config));
  }
}

Result<std::unique_ptr<Pipeline>> Pipeline::Start(const Config& config) {
  CAIRN_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<Pipeline> p(new Pipeline(config));
  CAIRN_RETURN_IF_ERROR(p->Init());
  return p;
}

Status Pipeline::Init() {
  CAIRN_RETURN_IF_ERROR(fs_->CreateDirs(config_.scratch_dir, 0700).WithContext("storage.scratch"));
  if (persistent_) {
    CAIRN_RETURN_IF_ERROR(
        fs_->CreateDirs(config_.persistent_dir, 0700).WithContext("storage.persistent"));
  }
  CAIRN_RETURN_IF_ERROR(OpenGpu());
  // With a GPU in use the host cache is pinned by registering it with the
  // driver (page-locked and DMA-mapped at once); mlock otherwise.
  if (config_.pinner == nullptr && gpu_) pinner_ = gpu_->host_pinner();
  CAIRN_RETURN_IF_ERROR(PrepareCache());
  int helpers = config_.copy_threads;
  if (helpers < 0) {
    unsigned cores = std::thread::hardware_concurrency();
    helpers = cores > 1 ? static_cast<int>(std::min(cores - 1, 3u)) : 0;
  }
  copier_ = std::make_unique<CopyEngine>(helpers);
  auto named = [this](const char* name) { return [this, name] { tracer_.NameThread(name); }; };
  if (gpu_) device_mover_.Start(named("cairn device mover (device <-> host)"));
  checksummer_.Start(named("cairn checksummer"));
  flusher_.Start(named("cairn flusher (cache -> local)"));
  mover_.Start(named("cairn mover (local -> persistent)"));
  prefetcher_.Start(named("cairn prefetcher (files -> cache)"));
  initializer_ = std::jthread([this](std::stop_token st) {
    tracer_.NameThread("cairn initializer (touch, pin)");
    InitLoop(st);
  });
  return Status::Ok();
}

Pipeline::~Pipeline() { (void)Shutdown(); }

Status Pipeline::Shutdown() {
  // Histories first: their unflushed steps are consumed, not written.
  std::vector<std::string> open_histories;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return Status::Ok();
    closing_ = true;
    for (const auto& [name, h] : histories_) open_histories.push_back(name);
  }
  for (const auto& name : open_histories) (void)CloseHistory(name);

  Status first_error;
  {
    MutexLock lock(&mu_);
    cv_app_.wait(lock, [&]() CAIRN_REQUIRES(mu_) {
      return flusher_.Idle() && checksummer_.Idle() && mover_.Idle() && !DrainsPending();
    });
    shut_down_ = true;
    first_error = unreported_error_;
  }
  device_mover_.RequestStop();
  checksummer_.RequestStop();
  flusher_.RequestStop();
  mover_.RequestStop();
  prefetcher_.RequestStop();
  initializer_.request_stop();
  NotifyAll();
  device_mover_.Stop();  // joins
  checksummer_.Stop();
  flusher_.Stop();
  mover_.Stop();
  prefetcher_.Stop();
  if (initializer_.joinable()) initializer_.join();
  copier_.reset();
  std::optional<HostCache> cache;
  bool pinned = false;
  {
    MutexLock lock(&mu_);
    catalog_.clear();
    host_tier_.Clear();
    device_tier_.Clear();
    pinned = std::exchange(pinned_, false);
    cache = std::move(cache_);
    cache_.reset();
  }
  // Every thread is joined: the cache is ours alone, unpinned and unmapped
  // without the lock (munlock/unregister are system calls).
  if (pinned) pinner_->Unpin(cache->base(), cache->mapped_bytes());
  cache.reset();
  // GPU objects last, the runtime (context) after everything made on it.
  capture_stream_.reset();
  drain_stream_.reset();
  {
    MutexLock lock(&restore_stream_mu_);
    restore_stream_.reset();
  }
  bounce_.clear();
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
  mover_.Wake();
  prefetcher_.Wake();
}

void Pipeline::TraceCache() {
  if (!tracer_.enabled() || !cache_) return;
  tracer_.Counter("host cache", cache_->used_bytes(), dirty_bytes_);
}

EntryPtr Pipeline::Find(format::EntryKind kind, const std::string& name, int64_t number) const {
  auto it = catalog_.find(Key{kind, name, number});
  return it == catalog_.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------------------
// Chunks

std::optional<uint32_t> Pipeline::TryAcquireChunk(uint32_t write_bytes, bool* was_touched) {
  auto c = host_tier_.TryAcquire([&](HostCache& cache) { return cache.Allocate(was_touched, write_bytes); });
  if (c) NoteTouchProgress();  // the writer touches it: the cache may be fully touched now
  return c;
}

int32_t Pipeline::AcquireChunk(uint32_t write_bytes, bool* was_touched, bool app) {
  for (;;) {
    if (auto c = TryAcquireChunk(write_bytes, was_touched)) return static_cast<int32_t>(*c);
    // Back-pressure: every chunk holds data not yet flushed (or pinned).
    if (app) {
      WaitAsCaptureBlocked("blocked: cache full");
    } else {
      cv_app_.wait(mu_);
    }
  }
}

void Pipeline::WaitAsCaptureBlocked(const char* span, bool device) {
  const auto w0 = std::chrono::steady_clock::now();
  cv_app_.wait(mu_);
  const auto w1 = std::chrono::steady_clock::now();
  (device ? stats_.device.capture_blocked_s : stats_.capture_blocked_s) += SecondsBetween(w0, w1);
  tracer_.Span(span, "app", w0, w1, 0);
}

// While device blocks wait to be drained, a capture into the host cache may
// not take the last chunk the device mover could get (free, or evictable
// because written): the flusher may be waiting for those device blocks
// before it can write, and so free, anything the capture holds.
bool Pipeline::DrainRoomAfterTaking(const Entry& capturing) const {
  if (!DrainsPending()) return true;
  return host_tier_.HasRoomFor(capturing, cache_->free_count(), 2);
}

void Pipeline::WaitForDrainRoom(const Entry& capturing) {
  while (!DrainRoomAfterTaking(capturing)) WaitAsCaptureBlocked("blocked: host cache kept for drains");
}

void Pipeline::ReleaseChunks(Entry& e) {
  for (uint32_t b = 0; b < e.blocks.size(); ++b) {
    if (!e.blocks[b].written && e.blocks[b].sealed && e.blocks[b].chunk >= 0 && !e.failed()) {
      dirty_bytes_ -= e.layout.blocks[b].length;
    }
    host_tier_.Drop(e, b);
    if (dcache_) DropSlot(e, b);
  }
  device_mover_.Wake();
  cv_app_.notify_all();
  prefetcher_.Wake();
}

void Pipeline::Unpin(const EntryPtr& e) {
  if (--e->pins == 0 && e->consumed) ReleaseChunks(*e);
}

void Pipeline::Consume(const EntryPtr& e) {
  if (e->consumed) return;
  e->consumed = true;
  catalog_.erase(Key{e->kind, e->name, e->number});
  if (e->pins == 0) ReleaseChunks(*e);
  flusher_.Wake();
}

void Pipeline::FailEntry(const EntryPtr& e, const Status& s) {
  if (e->local_error.ok()) e->local_error = s;
  ++stats_.failed_flushes;
  if (unreported_error_.ok()) unreported_error_ = s;
  // The data stays in the cache (restorable while resident) but can never be
  // flushed: make its blocks evictable so captures keep making progress.
  for (uint32_t b = 0; b < e->blocks.size(); ++b) {
    BlockState& bs = e->blocks[b];
    if (bs.sealed && bs.chunk >= 0 && !bs.written) dirty_bytes_ -= e->layout.blocks[b].length;
    if (bs.sealed) host_tier_.MarkClean(*e, b);
  }
  cv_app_.notify_all();
  flusher_.Wake();
}

// ---------------------------------------------------------------------------
// Capture

Status Pipeline::CheckSources(const std::vector<CaptureSource>& sources) {
  for (const auto& s : sources) {
    if (s.spec.memory != MemoryKind::kHost && s.spec.bytes > 0) {
      if (!gpu_) {
        return Status::Unsupported("region " + std::to_string(s.spec.id) +
                                   " is not host memory and the GPU tier is unavailable: " +
                                   gpu_unavailable_.ToString());
      }
      CAIRN_RETURN_IF_ERROR(EnsureGpuIo());
    }
  }
  return Status::Ok();
}

Status Pipeline::BeginCapture(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                              std::chrono::steady_clock::time_point t0, double* interval_s) {
  const auto kind = e->kind;
  const std::string& name = e->name;
  if (closing_) return Status::State("client is closing");
  if (kind == format::EntryKind::kHistoryStep && !histories_.contains(name)) {
    return Status::State("history '" + name + "' is not open");
  }
  if (Find(kind, name, e->number)) {
    return Status::Exists(std::string(kind == format::EntryKind::kCheckpoint ? "version " : "step ") +
                          std::to_string(e->number) + " of '" + name + "' is still in the pipeline");
  }
  std::vector<format::RegionSpec> specs;
  specs.reserve(sources.size());
  for (const auto& s : sources) specs.push_back(s.spec);
  e->seq = next_seq_++;
  e->layout = format::Layout::Make(specs, static_cast<uint32_t>(config_.block_bytes));
  e->blocks.resize(e->layout.blocks.size());
  catalog_.emplace(Key{kind, name, e->number}, e);
  if (kind == format::EntryKind::kHistoryStep) histories_[name].steps.insert(e->number);
  flusher_.Push(e);
  // The compute interval that ended at t0 feeds the adaptive touch model.
  *interval_s = last_capture_end_ ? SecondsBetween(*last_capture_end_, t0) : -1;
  UseBandwidth(+1, /*capture=*/true);
  return Status::Ok();
}

// The first block of a batch may wait for space, the others take whatever is
// free or evictable right now. A block of a device or managed region goes to
// a device-cache slot when there is a device cache, else straight into a
// host chunk.
void Pipeline::PlanBatch(const EntryPtr& e, const std::vector<CaptureSource>& sources, uint32_t b,
                         CaptureBatch* batch) {
  constexpr uint32_t kMaxBatch = 16;
  const uint32_t nblocks = static_cast<uint32_t>(e->layout.blocks.size());
  *batch = CaptureBatch{.first = b};
  // A sequential toucher may end the slice it is in when a capture starts (a
  // few ms): that is not touching during captures.
  batch->touching_allowed = touch_mode_ == TouchModel::Mode::kConcurrent;
  for (; b < nblocks && b - batch->first < kMaxBatch; ++b) {
    const bool first = b == batch->first;
    const auto& blk = e->layout.blocks[b];
    const auto& region = e->layout.regions[blk.region];
    const bool gpu_source = region.spec.memory != MemoryKind::kHost;
    const auto* src = static_cast<const uint8_t*>(sources[blk.region].data) + (blk.offset - region.data_offset);
    if (gpu_source && DeviceCacheUsable()) {
      std::optional<int32_t> slot;
      if (first) {
        slot = AcquireSlot();
      } else if (auto sl = TryAcquireSlot()) {
        slot = static_cast<int32_t>(*sl);
      } else {
        break;
      }
      if (slot) {
        e->blocks[b].slot = *slot;
        batch->gpu.push_back({.dst = reinterpret_cast<void*>(dcache_->address(static_cast<uint32_t>(*slot))),
                              .src = src, .bytes = blk.length});
        batch->to_slot.push_back(true);
        continue;
      }
      // The device cache has no slot at all (mapping failed at once): this
      // block goes to the host cache.
    }
    int32_t chunk;
    bool was_touched = false;
    const uint32_t write_bytes = static_cast<uint32_t>(format::AlignUp(blk.length));
    if (first) {
      WaitForDrainRoom(*e);
      chunk = AcquireChunk(write_bytes, &was_touched);
    } else if (!DrainRoomAfterTaking(*e)) {
      break;
    } else if (auto c = TryAcquireChunk(write_bytes, &was_touched)) {
      chunk = static_cast<int32_t>(*c);
    } else {
      break;
    }
    e->blocks[b].chunk = chunk;
    NoteCaptureChunk(was_touched, blk.length);
    uint8_t* dst = cache_->data(static_cast<uint32_t>(chunk));
    const CopySegment seg{.dst = dst, .src = src, .bytes = blk.length};
    (gpu_source ? batch->gpu : batch->host[was_touched ? 1 : 0]).push_back(seg);
    batch->to_slot.push_back(false);
    // Direct I/O writes whole 4 KiB pages: the tail is zeroed so no stale
    // bytes of an older entry reach the file. (Drained slots get theirs in
    // DrainBlock.)
    if (write_bytes > blk.length) batch->tails.emplace_back(dst + blk.length, write_bytes - blk.length);
  }
  batch->end = b;
}

Status Pipeline::CopyBatch(CaptureBatch& batch, double copy_s[2], uint64_t copy_bytes[2], bool* touching,
                           uint64_t* gpu_bytes, double* gpu_seconds) {
  *touching = touching_.load(std::memory_order_relaxed);
  Status copied;
  if (!batch.gpu.empty()) {
    const auto g0 = std::chrono::steady_clock::now();
    copied = GpuCopy(*capture_stream_, batch.gpu);
    *gpu_seconds += SecondsSince(g0);
    for (const auto& seg : batch.gpu) *gpu_bytes += seg.bytes;
  }
  for (int touched : {1, 0}) {
    const auto c0 = std::chrono::steady_clock::now();
    CopyIn(MemoryKind::kHost, *copier_, batch.host[touched]);
    copy_s[touched] = SecondsSince(c0);
    for (const auto& seg : batch.host[touched]) copy_bytes[touched] += seg.bytes;
  }
  *touching = *touching || touching_.load(std::memory_order_relaxed);
  for (const auto& [tail, n] : batch.tails) std::memset(tail, 0, n);
  return copied;
}

Status Pipeline::RollBackCapture(const EntryPtr& e, const CaptureBatch& batch, const Status& copied) {
  // Its blocks are released and the flusher skips it; committed versions are
  // untouched.
  for (uint32_t k = batch.first; k < batch.end; ++k) {
    BlockState& bs = e->blocks[k];
    if (bs.chunk >= 0) cache_->Free(static_cast<uint32_t>(bs.chunk));
    if (bs.slot >= 0) dcache_->Free(static_cast<uint32_t>(bs.slot));
    bs.chunk = bs.slot = -1;
  }
  if (e->kind == format::EntryKind::kHistoryStep) {
    if (auto h = histories_.find(e->name); h != histories_.end()) h->second.steps.erase(e->number);
  }
  e->capture_done = true;
  Consume(e);
  UseBandwidth(-1, /*capture=*/true);
  cv_app_.notify_all();
  return copied.WithContext(std::string(e->kind == format::EntryKind::kCheckpoint ? "checkpoint" : "push") +
                            " of '" + e->name + "' " + std::to_string(e->number));
}

void Pipeline::SealBatch(const EntryPtr& e, const CaptureBatch& batch) {
  for (uint32_t k = batch.first; k < batch.end; ++k) {
    BlockState& bs = e->blocks[k];
    if (batch.to_slot[k - batch.first]) {
      bs.dsealed = true;
      if (e->failed() || e->consumed) {
        device_tier_.MarkClean(*e, k);
      } else {
        device_mover_.Push(DeviceJob{.e = e, .block = k});
      }
      continue;
    }
    bs.sealed = true;
    ++e->sealed_blocks;
    ++e->resident_blocks;
    if (e->failed() || e->consumed) {
      host_tier_.MarkClean(*e, k);
    } else {
      dirty_bytes_ += e->layout.blocks[k].length;
      checksummer_.Push(BlockJob{.e = e, .block = k});
    }
  }
}

void Pipeline::EndCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0, double interval_s,
                          double blocked_before) {
  e->capture_done = true;
  double elapsed = SecondsSince(t0);
  touch_model_.OnCapture(e->layout.payload_bytes, elapsed, interval_s,
                         touch_mode_ == TouchModel::Mode::kConcurrent);
  last_capture_end_ = std::chrono::steady_clock::now();
  UseBandwidth(-1, /*capture=*/true);
  stats_.capture.bytes += e->layout.payload_bytes;
  stats_.capture.ops += 1;
  // Copy time only: back-pressure waits (host chunks or device slots) are
  // reported as capture_blocked_s and device.capture_blocked_s.
  stats_.capture.seconds += std::max(0.0, elapsed - (CaptureBlockedSeconds() - blocked_before));
  tracer_.Span(e->kind == format::EntryKind::kCheckpoint ? "checkpoint" : "push", "app", t0,
               std::chrono::steady_clock::now(), e->layout.payload_bytes, e->name, e->number);
  TraceCache();
  cv_app_.notify_all();
  flusher_.Wake();
}

// Blocks are copied in batches (PlanBatch under mu_, CopyBatch without it: in
// parallel on the CopyEngine, device and managed sources through the capture
// stream) and then sealed at once (SealBatch).
Status Pipeline::Capture(format::EntryKind kind, const std::string& name, int64_t number,
                         const std::vector<CaptureSource>& sources) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  if (number < 0) return Status::InvalidArgument("version/step must be >= 0, got " + std::to_string(number));
  CAIRN_RETURN_IF_ERROR(CheckSources(sources));
  MutexLock capture_lock(&capture_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  double interval_s = -1;
  double blocked_before = 0;
  EntryPtr e = std::make_shared<Entry>();
  e->kind = kind;
  e->name = name;
  e->number = number;
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(BeginCapture(e, sources, t0, &interval_s));
  blocked_before = CaptureBlockedSeconds();
  uint64_t gpu_bytes = 0;
  double gpu_seconds = 0;
  CaptureBatch batch;
  for (uint32_t b = 0; b < e->blocks.size(); b = batch.end) {
    PlanBatch(e, sources, b, &batch);
    double copy_s[2] = {0, 0};  // into untouched, into touched
    uint64_t copy_bytes[2] = {0, 0};
    bool touching = false;
    lock.Unlock();
    const Status copied = CopyBatch(batch, copy_s, copy_bytes, &touching, &gpu_bytes, &gpu_seconds);
    lock.Lock();
    if (!copied.ok()) return RollBackCapture(e, batch, copied);
    if (batch.gpu.empty()) {  // device copies overlap: no host rate
      for (int touched : {1, 0}) {
        touch_model_.OnCaptureCopy(copy_bytes[touched], copy_s[touched], touched == 1,
                                   touching && batch.touching_allowed);
      }
    }
    SealBatch(e, batch);
  }
  if (gpu_bytes > 0) {
    stats_.device.capture.bytes += gpu_bytes;
    stats_.device.capture.ops += 1;
    stats_.device.capture.seconds += gpu_seconds;
  }
  EndCapture(e, t0, interval_s, blocked_before);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Waiting and statistics

Status Pipeline::Wait(format::EntryKind kind, const std::string& name, int64_t number, Level level) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  if (level == Level::kPersistent && !persistent_) {
    return Status::InvalidArgument("wait for the persistent level, but storage.persistent is not set");
  }
  MutexLock lock(&mu_);
  EntryPtr e = Find(kind, name, number);
  if (!e) {
    lock.Unlock();
    return WaitForFiles(kind, name, number, level);
  }
  cv_app_.wait(lock, [&]() CAIRN_REQUIRES(mu_) {
    switch (level) {
      case Level::kCache: return e->capture_done;
      case Level::kLocal: return e->local_committed || e->failed() || e->consumed;
      case Level::kPersistent:
        return e->persistent_committed || e->failed() || !e->persistent_error.ok() || e->consumed;
    }
    return true;
  });
  Status s = e->local_error;
  if (s.ok() && level == Level::kPersistent) s = e->persistent_error;
  if (!s.ok() && unreported_error_.code() == s.code() && unreported_error_.message() == s.message()) {
    unreported_error_ = Status::Ok();
  }
  return s;
}

// Not in this pipeline (retired, or written by an earlier run): committed
// files answer. An entry retired meanwhile had its file committed before it
// left the catalog, so asking without the lock answers the same.
Status Pipeline::WaitForFiles(format::EntryKind kind, const std::string& name, int64_t number, Level level) {
  const tiers::FileTier& tier = level == Level::kPersistent ? *persistent_ : local_;
  if (tier.Exists(name, kind, number)) return Status::Ok();
  return Status::NotFound("version " + std::to_string(number) + " of '" + name + "' is unknown at " +
                          (level == Level::kPersistent ? "the persistent level" : "this level"));
}

Stats Pipeline::GetStats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  if (cache_) s.cache_used_bytes = cache_->used_bytes();
  if (dcache_) {
    s.device.mapped_bytes = dcache_->mapped_bytes();
    s.device.used_bytes = uint64_t{dcache_->used_count()} * dcache_->slot_bytes();
    if (dcache_->mapping_done()) {
      s.device.fully_mapped_s = dcache_->mapping_seconds();
      if (s.device.map_error.empty()) s.device.map_error = dcache_->map_error();
    }
  }
  s.cache_dirty_bytes = dirty_bytes_;
  return s;
}

}  // namespace cairn::core
