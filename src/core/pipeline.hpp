// The pipeline: the engine behind cairn::Client. It owns the host cache, the
// file tiers and the four background threads, and moves entries through
//
//   capture (app thread) -> checksum -> flush to local -> copy to persistent
//                                          \-> evict (clean blocks) -> prefetch
//
// Threads (all std::jthread, owned here, stopped and joined by Shutdown()):
//   checksummer  CRC32C of sealed blocks, ahead of the flusher (so checksums
//                cost no flush bandwidth)
//   flusher      FIFO: writes entries block by block to the local tier and
//                commits them (temp + fsync + rename + dir fsync); it streams a
//                checkpoint that is still being captured, which is how a
//                checkpoint larger than the cache passes through it
//   mover        copies committed checkpoints to the persistent tier, deletes
//                consumed/retired files, applies retention
//   prefetcher   reads history steps back into free chunks ahead of the pops,
//                highest step first (reverse order is the adjoint pattern)
//   initializer  touches the host cache ahead of the captures, then pins it
//                (host_cache.init and .pin; initializer.cpp)
//   device mover GPU tier only (gpu_tier.cpp): drains captured device-cache
//                slots to host-cache chunks in FIFO order, then prefetches
//                history steps host -> device ahead of the pops
//
// GPU tier: a block of a device or managed region is captured into a
// device-cache slot (device -> device on Cairn's stream) and drained to a
// host chunk in the background; with no device cache it is copied device ->
// host straight into a host chunk. A block's data is always in at least one
// of: its device slot, its host chunk, the written file. Device slots are
// evicted only once their data is in the host tier, and only after the
// device cache is fully mapped (HiPC'22, constraint 1).
//
// Locking: one mutex (mu_) guards every piece of state below. It is never held
// across memcpy, file I/O or checksums; those run on pinned entries. Captures
// are serialized by capture_mu_ (taken before mu_), which guarantees progress:
// the flusher always works on the oldest entry, and the only entry that can be
// waiting for chunks is the one being captured.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cairn/cairn.hpp"
#include "core/copy_engine.hpp"
#include "core/clean_list.hpp"
#include "core/entry.hpp"
#include "core/host_cache.hpp"
#include "core/touch_model.hpp"
#include "core/trace.hpp"
#include "gpu/device_cache.hpp"
#include "gpu/runtime.hpp"
#include "tiers/file_tier.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

// One region to capture: where its bytes are now.
struct CaptureSource {
  format::RegionSpec spec;
  const void* data = nullptr;
};

// One region to restore into.
struct RestoreTarget {
  int32_t id = 0;
  MemoryKind memory = MemoryKind::kHost;
  void* data = nullptr;
  uint64_t bytes = 0;
};

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> Start(const Config& config);
  ~Pipeline();  // Shutdown()
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Drains the flush and mover queues, stops and joins the threads. Returns
  // the first local flush error that no Wait() reported. Idempotent.
  Status Shutdown();

  // Checkpoint versions -------------------------------------------------------
  Status Capture(format::EntryKind kind, const std::string& name, int64_t number,
                 const std::vector<CaptureSource>& sources);
  Status Wait(format::EntryKind kind, const std::string& name, int64_t number, Level level);
  Result<int64_t> Latest(const std::string& name);
  Status Restore(const std::string& name, int64_t version, const std::vector<RestoreTarget>& targets);

  // Histories -----------------------------------------------------------------
  // Registers `name`; kState if already open. Ephemeral histories remove stale
  // step files of an earlier run; persistent ones adopt them as poppable steps.
  Status OpenHistory(const std::string& name);
  // dst_kind: what dst is (ClassifyRegion).
  Result<size_t> Pop(const std::string& name, int64_t step, void* dst, size_t capacity,
                     MemoryKind dst_kind = MemoryKind::kHost);
  Result<size_t> StepSize(const std::string& name, int64_t step);
  Status CloseHistory(const std::string& name);

  Stats GetStats() const;
  const Config& config() const { return config_; }

  // The memory kind of [p, p + bytes), asked of the CUDA driver (host when
  // there is none). kUnsupported for device or managed memory when the GPU
  // tier is unavailable (the message says why); kInvalidArgument for a range
  // that straddles allocations or kinds.
  Result<MemoryKind> ClassifyRegion(const void* p, size_t bytes);

 private:
  using Key = std::tuple<format::EntryKind, std::string, int64_t>;
  using Lock = std::unique_lock<std::mutex>;

  struct HistoryState {
    bool popping = false;  // a pop happened: the prefetcher serves this history
    std::set<int64_t> steps;  // pushed and not consumed
  };

  explicit Pipeline(const Config& config);
  Status Init();

  // Chunks (pipeline.cpp). All REQUIRE mu_.
  // The caller writes the chunk's first write_bytes bytes. was_touched
  // (optional): whether the chunk's memory was fully touched before.
  // Blocks for space; app: the wait counts as the application's blocking.
  int32_t AcquireChunk(Lock& lock, uint32_t write_bytes, bool* was_touched = nullptr, bool app = true);
  // One wait on cv_app_ that the capturing application sits through: added
  // to capture_blocked_s (device: to device.capture_blocked_s, a wait for a
  // device-cache slot) and traced as `span` on the app track.
  void WaitAsCaptureBlocked(Lock& lock, const char* span, bool device = false);
  double CaptureBlockedSeconds() const {  // REQUIRES mu_; both kinds of wait
    return stats_.capture_blocked_s + stats_.device.capture_blocked_s;
  }
  std::optional<uint32_t> TryAcquireChunk(uint32_t write_bytes, bool* was_touched = nullptr);  // no waiting
  bool EvictOne(uint64_t below_seq);
  // Host-cache room for the device mover while drains are pending: whether a
  // capture of `capturing` may take a chunk now, and waiting until it may.
  bool DrainRoomAfterTaking(const Entry& capturing) const;
  void WaitForDrainRoom(Lock& lock, const Entry& capturing);
  // Entries whose blocks may not be evicted from a tier now: pinned by a
  // reader or writer, or being prefetched into that tier.
  static bool HostBusy(const Entry& e) { return e.pins > 0 || e.prefetching; }
  static bool DeviceBusy(const Entry& e) { return e.pins > 0 || e.device_prefetching; }
  void MarkClean(Entry& e, uint32_t block);
  void DropBlock(Entry& e, uint32_t block);  // frees its chunk, if any
  void Unpin(const EntryPtr& e);
  void Consume(const EntryPtr& e);  // marks consumed, releases chunks, forgets it
  void ReleaseChunks(Entry& e);
  void FailEntry(const EntryPtr& e, const Status& s);
  EntryPtr Find(format::EntryKind kind, const std::string& name, int64_t number) const;
  void NotifyAll();
  void TraceCache();  // REQUIRES mu_: a cache-occupancy counter sample
  // REQUIRES mu_: counts a served restore or pop in the stats and the trace.
  void NoteRead(bool hit, uint64_t bytes, std::chrono::steady_clock::time_point t0, const char* span,
                const std::string& name, int64_t number);

  // Threads (flusher.cpp, mover.cpp, prefetcher.cpp).
  void ChecksumLoop(std::stop_token stop);
  void FlushLoop(std::stop_token stop);
  void FlushEntry(Lock& lock, const EntryPtr& e);
  void MoverLoop(std::stop_token stop);
  void PersistEntry(const EntryPtr& e);
  void ApplyRetention(const std::string& name);
  void RemoveNameDirIfUnused(const std::string& name);
  void PrefetchLoop(std::stop_token stop);
  // Fast initialization (initializer.cpp).
  Status PrepareCache();  // maps the cache; eager: populates and pins it
  void InitLoop(std::stop_token stop);
  // REQUIRES mu_. Touches (part of) one claimed chunk with the lock dropped;
  // false when nothing is left to touch.
  bool TouchNextChunk(Lock& lock, std::stop_token stop);
  void PinCache(Lock& lock, std::stop_token stop);  // REQUIRES mu_
  // REQUIRES mu_. Books a pin call that ran from p0 to p1 (stats, trace) and
  // its result: pinned, or the error reported once.
  void RecordPin(const Status& s, std::chrono::steady_clock::time_point p0,
                 std::chrono::steady_clock::time_point p1);
  void NoteTouchProgress();                         // REQUIRES mu_
  TouchModel::Mode TouchMode();                     // REQUIRES mu_
  // A capture (capture = true), flush write or prefetch read starts (+1) or
  // ends (-1) moving memory; sequential touching pauses. Atomic counters: no
  // lock needed (the callers happen to hold mu_).
  void UseBandwidth(int delta, bool capture);
  // Whether touching in `mode` must pause now (reads the atomic mirrors).
  bool MustPauseTouching(TouchModel::Mode mode) const;
  // REQUIRES mu_: books a captured block's bytes by the state of its chunk.
  void NoteCaptureChunk(bool was_touched, uint64_t bytes);
  EntryPtr FindPrefetchTarget();
  void EnqueueMover(std::function<void()> task);

  // GPU tier (gpu_tier.cpp).
  Status OpenGpu();         // at Init: runtime, device cache (best effort)
  Status EnsureGpuIo();     // streams and bounce buffers, on first device use
  bool DeviceCacheUsable() const;  // REQUIRES mu_: slots exist or are coming
  // REQUIRES mu_. A mapped free slot, evicting drained slots of older entries
  // once the cache is fully mapped; waits for mapping or draining (the wait
  // is the application's blocking). nullopt when the cache has no slot at
  // all (mapping failed before the first chunk).
  std::optional<int32_t> AcquireSlot(Lock& lock);
  std::optional<uint32_t> TryAcquireSlot();  // REQUIRES mu_, no waiting
  bool EvictDeviceOne(uint64_t below_seq);   // REQUIRES mu_
  void MarkDeviceClean(Entry& e, uint32_t block);  // REQUIRES mu_
  void DropSlot(Entry& e, uint32_t block);          // REQUIRES mu_
  void DeviceMoverLoop(std::stop_token stop);
  void DrainBlock(Lock& lock, const EntryPtr& e, uint32_t block);  // REQUIRES mu_
  EntryPtr FindDevicePrefetchTarget();                              // REQUIRES mu_
  void DevicePrefetch(Lock& lock, const EntryPtr& e);               // REQUIRES mu_
  // Copies between any memory kinds through `stream` (host -> host included),
  // then synchronizes. Precondition: EnsureGpuIo() succeeded.
  Status GpuCopy(gpu::Stream& stream, std::span<const CopySegment> segments);
  // A restore or pop's copies out of the cache or from a staging buffer into
  // device/managed targets (the restore stream, one caller at a time).
  Status RestoreCopy(std::span<const CopySegment> segments);

  // Restore helpers (restore.cpp).
  Status ReadFromFiles(const EntryPtr& e, format::EntryKind kind, const std::string& name,
                       int64_t number, const std::vector<RestoreTarget>& targets);
  // Precondition: e is pinned and fully cached. Called and returns with mu_
  // held; drops it for the copies. *device_hit: some block came from the
  // device cache.
  Status CopyFromCache(Lock& lock, const EntryPtr& e, const std::vector<RestoreTarget>& targets,
                       bool* device_hit);

  tiers::FileTier& tier_for(format::EntryKind kind) { return kind == format::EntryKind::kCheckpoint ? local_ : history_; }

  const Config config_;
  os::FileSystem* fs_;
  tiers::FileTier local_;    // durable checkpoint files
  tiers::FileTier history_;  // same directory, history write options
  std::optional<tiers::FileTier> persistent_;
  Tracer tracer_;  // thread-safe on its own; no-op unless trace.path is set

  std::mutex capture_mu_;  // serializes captures (see above); before mu_
  mutable std::mutex mu_;
  std::condition_variable_any cv_app_;       // space freed, entry state changed
  std::condition_variable_any cv_checksum_;  // blocks sealed
  std::condition_variable_any cv_flush_;     // entries queued, checksums ready
  std::condition_variable_any cv_mover_;     // mover tasks queued
  std::condition_variable_any cv_prefetch_;  // pops, frees, commits
  std::condition_variable_any cv_init_;      // memory went idle, cache fully touched

  std::optional<HostCache> cache_ CAIRN_GUARDED_BY(mu_);
  std::map<Key, EntryPtr> catalog_ CAIRN_GUARDED_BY(mu_);
  std::map<std::string, HistoryState> histories_ CAIRN_GUARDED_BY(mu_);
  // Clean (written) resident blocks, by eviction rank.
  CleanList clean_ CAIRN_GUARDED_BY(mu_){&BlockState::clean};
  std::deque<std::pair<EntryPtr, uint32_t>> checksum_queue_ CAIRN_GUARDED_BY(mu_);
  std::deque<EntryPtr> flush_queue_ CAIRN_GUARDED_BY(mu_);
  std::deque<std::function<void()>> mover_queue_ CAIRN_GUARDED_BY(mu_);
  bool mover_busy_ CAIRN_GUARDED_BY(mu_) = false;
  bool flusher_busy_ CAIRN_GUARDED_BY(mu_) = false;
  std::set<std::string> known_dirs_ CAIRN_GUARDED_BY(mu_);
  uint64_t next_seq_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t dirty_bytes_ CAIRN_GUARDED_BY(mu_) = 0;
  bool closing_ CAIRN_GUARDED_BY(mu_) = false;
  bool shut_down_ CAIRN_GUARDED_BY(mu_) = false;
  Status unreported_error_ CAIRN_GUARDED_BY(mu_);
  Stats stats_ CAIRN_GUARDED_BY(mu_);

  // Fast initialization state.
  const std::chrono::steady_clock::time_point opened_at_ = std::chrono::steady_clock::now();
  os::MemoryPinner* pinner_;  // set before the threads start, then constant
  bool pinned_ CAIRN_GUARDED_BY(mu_) = false;
  TouchModel touch_model_ CAIRN_GUARDED_BY(mu_);
  TouchModel::Mode touch_mode_ CAIRN_GUARDED_BY(mu_) = TouchModel::Mode::kConcurrent;
  // Memory movers now: captures, and flush writes + prefetch reads. Written
  // under mu_, read by the touch loop without it.
  std::atomic<int> captures_now_{0};
  std::atomic<int> background_io_now_{0};
  std::atomic<bool> touching_{false};  // the initializer is touching right now
  std::optional<std::chrono::steady_clock::time_point> last_capture_end_ CAIRN_GUARDED_BY(mu_);

  // GPU tier. gpu_ is null without a usable driver (gpu_unavailable_ says
  // why); dcache_ is null with device_cache.size = 0 or when it could not be
  // created. Streams and bounce buffers are made on first device use
  // (gpu_io_mu_); the capture stream is used under capture_mu_, the restore
  // stream under restore_stream_mu_, the drain stream by the device mover.
  std::unique_ptr<gpu::Runtime> gpu_;
  Status gpu_unavailable_;
  std::unique_ptr<gpu::DeviceCache> dcache_;
  std::mutex gpu_io_mu_;
  bool gpu_io_ready_ = false;  // guarded by gpu_io_mu_ (written once)
  std::unique_ptr<gpu::Stream> capture_stream_;
  std::unique_ptr<gpu::Stream> drain_stream_;
  std::mutex restore_stream_mu_;
  std::unique_ptr<gpu::Stream> restore_stream_;
  std::vector<std::unique_ptr<gpu::PinnedBuffer>> bounce_;  // the device mover's
  std::condition_variable_any cv_device_;  // blocks to drain, pops, slots freed
  std::deque<std::pair<EntryPtr, uint32_t>> drain_queue_ CAIRN_GUARDED_BY(mu_);
  bool drainer_busy_ CAIRN_GUARDED_BY(mu_) = false;
  // Device slots whose data is also in the host tier, by eviction rank.
  CleanList dclean_ CAIRN_GUARDED_BY(mu_){&BlockState::dclean};
  bool host_registered_ CAIRN_GUARDED_BY(mu_) = false;  // pinned via cuMemHostRegister

  // Helpers for the application's blocking copies (its own threads).
  std::unique_ptr<CopyEngine> copier_;
  // Declared last: started after everything above exists, joined first.
  std::vector<std::jthread> threads_;
};

}  // namespace cairn::core
