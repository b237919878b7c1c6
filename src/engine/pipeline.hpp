// The pipeline: the engine behind cairn::Client. It owns the host cache, the
// file tiers and the background threads, and moves entries through
//
//   capture (app thread) -> checksum -> flush to local   -> evict (clean) -> prefetch
//                                    \-> persist (checkpoints, concurrently:
//                                        cache -> persistent tier; the mover
//                                        copies the local file if evicted first)
//
// (with a GPU tier, device blocks go through device-cache slots first:
// docs/gpu.md). Pipeline keeps the lifecycle, the application's entry
// points and the state; the work is done by objects over it: the stages
// (stages/, each on its own thread, reaching the pipeline through its Owner:
// stage_owners.hpp), the capture steps (capture.hpp) and the read steps
// (reader.hpp). docs/design.md ("Who owns what") draws the threads, what
// each runs and the locks it holds.
//
// Locking: one mutex (mu_) guards every piece of state below and the fields
// of every Entry (entry.hpp). It is never held across memcpy, file I/O or
// checksums: those run on pinned entries, with the lock dropped by a
// MutexUnlock (util/mutex.hpp) that names the step. Captures are serialized
// by capture_mu_ (taken before mu_). The clang build checks the annotations
// (-Wthread-safety; scripts/test.sh "thread-safety (clang)"): a helper that
// needs mu_ says CAIRN_REQUIRES(mu_), an entry point CAIRN_EXCLUDES(mu_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "capture/copy_engine.hpp"
#include "capture/layering.hpp"
#include "capture/zero_copy/zero_copy.hpp"
#include "engine/block_store.hpp"
#include "engine/catalog.hpp"
#include "engine/commit_record.hpp"
#include "engine/entry.hpp"
#include "engine/memory_movers.hpp"
#include "engine/restore_target.hpp"
#include "engine/stages/checksummer.hpp"
#include "engine/stages/device_io.hpp"
#include "engine/stages/device_mover.hpp"
#include "engine/stages/flusher.hpp"
#include "engine/stages/initializer.hpp"
#include "engine/stages/mover.hpp"
#include "engine/stages/prefetcher.hpp"
#include "engine/trace.hpp"
#include "engine/zero_copy_capture.hpp"
#include "gpu/runtime.hpp"
#include "os/mem/numa.hpp"
#include "tiers/device_cache.hpp"
#include "tiers/file_tier.hpp"
#include "util/extent.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> Start(const Config& config);
  ~Pipeline();  // Shutdown()
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Drains the flush and mover queues, stops and joins the threads. Returns
  // the first local flush error that no Wait() reported. Idempotent.
  Status Shutdown() CAIRN_EXCLUDES(mu_);

  // Checkpoint versions -------------------------------------------------------
  // `placement`: the checkpoint's placement record, written beside its files.
  // `persist` false: a checkpoint that the persistent tier skips (an MPI
  // job's mpi.l4_every: docs/mpi.md); it stays local, and a Wait for it at
  // kPersistent says so.
  Status Capture(format::EntryKind kind, const std::string& name, int64_t number,
                 const std::vector<CaptureSource>& sources,
                 std::shared_ptr<const format::Placement> placement = nullptr, bool persist = true)
      CAIRN_EXCLUDES(mu_, capture_mu_);
  Status Wait(format::EntryKind kind, const std::string& name, int64_t number, Level level)
      CAIRN_EXCLUDES(mu_);
  // No capture reads the application's memory once this returns: a zero-copy
  // epoch still being read is read to the end and its watch of first writes
  // ends (no protection left); copy-mode captures are over when Capture
  // returns. Client::Unprotect, so that the memory may be freed, and Shutdown.
  void ReleaseSources() CAIRN_EXCLUDES(mu_, capture_mu_);
  // VELOC_Cleanup (docs/veloc.md): waits until every version of checkpoint
  // `name` in the pipeline has reached its last tier or failed
  // (Catalog::Settled), then queues on the mover, behind the copies and
  // deletions queued before, the deletion of the local file of every
  // committed version of `name`. The persistent copies stay, and a restore
  // reads them (the cache, else the local file, else the persistent one).
  // kUnsupported with layered versions (checkpoint.changes other than full):
  // the next layer would rest on a local base that is gone.
  Status RemoveLocalCopies(const std::string& name) CAIRN_EXCLUDES(mu_);
  // Newest committed version whose file's structure checks out (no data read).
  Result<int64_t> Latest(const std::string& name) CAIRN_EXCLUDES(mu_);
  // Every committed version whose structure checks out, newest first (the
  // candidates of a collective Latest, docs/mpi.md).
  Result<std::vector<int64_t>> IntactVersions(const std::string& name) CAIRN_EXCLUDES(mu_);
  // The newest checkpoint version of `name` this pipeline committed to the
  // local directory, and when the commit completed (CLOCK_REALTIME, ns since
  // the epoch); {-1, -1} when none since open. Cheap (no I/O): the global
  // commit in the background asks it at every Cairn call (docs/mpi.md).
  using LocalCommit = CommitRecord::Local;
  LocalCommit NewestLocalCommit(const std::string& name) const CAIRN_EXCLUDES(mu_);
  // Copies into `dst` what the host cache holds of bytes [offset, offset +
  // bytes) of the local file of checkpoint `number` of `name`, captured
  // (committed or on its way): its blocks' payload, each with its zero
  // padding to whole 4 KiB blocks (docs/format.md 4.2). Returns the
  // sub-ranges it did not fill, in order: the header, the tables, blocks
  // evicted or only in the device cache; the whole range when the version
  // is not in the cache or failed. No file I/O; the entry is pinned (not
  // evictable) only while it copies. The partner copies (L2) send from here
  // rather than read the file back (docs/mpi.md).
  ExtentList CopyCached(const std::string& name, int64_t number, uint64_t offset, uint64_t bytes,
                        uint8_t* dst) CAIRN_EXCLUDES(mu_);
  // The size of the local file of checkpoint `number` of `name` once
  // committed, when it is captured whole as a full version (one file);
  // kNotFound otherwise (layered, not in the pipeline, not captured yet,
  // failed). What a partner copy needs to start before the commit.
  Result<uint64_t> PlannedFileBytes(const std::string& name, int64_t number) CAIRN_EXCLUDES(mu_);
  // Committed locally (true), on its way (false), or its local error; a
  // version no longer in the pipeline counts as committed when the newest
  // local commit is at least it, else kNotFound.
  Result<bool> CommittedLocally(const std::string& name, int64_t number) CAIRN_EXCLUDES(mu_);
  // In an MPI job (docs/mpi.md, "Retention"): the newest version of
  // checkpoint `name` known to be committed on every rank (`global`), and the
  // newest that may be (`common`); -1 = none. Retention then keeps in every
  // tier, beyond the newest keep_versions, the newest keep_versions versions
  // up to `global` and the version `common`, with what their chains read: a
  // rank never deletes the version a restart would agree on, and the
  // deletions a local commit makes possible wait until its global commit is
  // recorded (they would delay that record's fsync). Values only rise; a
  // higher `global` runs a retention pass.
  void SetGlobalCommit(const std::string& name, int64_t global, int64_t common) CAIRN_EXCLUDES(mu_);
  Status Restore(const std::string& name, int64_t version,
                 const std::vector<RestoreTarget>& targets, FileRead read = FileRead::kAsWritten)
      CAIRN_EXCLUDES(mu_);
  // While one lives, the application waits on a restore: a read from files
  // (ReadFromFiles holds one), or an MPI job's whole collective restore
  // with its recovery (a partner copy fetched, a rebuild from parity),
  // which reads and writes files too. The cache's background touch pauses
  // meanwhile (Initializer::MustPauseTouching says why). They nest.
  class RestoreWait {
   public:
    explicit RestoreWait(Pipeline& p) : counted_(&p.movers_, MemoryMovers::Kind::kRestore) {}

   private:
    MemoryMovers::Scope counted_;
  };
  // Restores the newest committed version that verifies, trying older ones
  // into the same targets on damage (kCorrupt, kIo); returns its number.
  Result<int64_t> RestoreLatest(const std::string& name, const std::vector<RestoreTarget>& targets)
      CAIRN_EXCLUDES(mu_);
  // The placement record of a checkpoint version (docs/format.md 5): the
  // in-memory one while the version is in the pipeline, else the record
  // beside its file in the local tier, then the persistent one. kNotFound
  // when there is none; other errors say why a record was ignored.
  // (placement_io.cpp)
  Result<format::Placement> PlacementOf(const std::string& name, int64_t version)
      CAIRN_EXCLUDES(mu_);

  // Histories -----------------------------------------------------------------
  // Registers `name`; kState if already open. Ephemeral histories remove stale
  // step files of an earlier run; persistent ones adopt them as poppable steps.
  Status OpenHistory(const std::string& name) CAIRN_EXCLUDES(mu_);
  // dst_kind: what dst is (ClassifyRegion).
  Result<size_t> Pop(const std::string& name, int64_t step, void* dst, size_t capacity,
                     MemoryKind dst_kind = MemoryKind::kHost) CAIRN_EXCLUDES(mu_);
  Result<size_t> StepSize(const std::string& name, int64_t step) CAIRN_EXCLUDES(mu_);
  Status CloseHistory(const std::string& name) CAIRN_EXCLUDES(mu_);

  Stats GetStats() const CAIRN_EXCLUDES(mu_);
  const Config& config() const { return config_; }

  // The memory kind of [p, p + bytes), asked of the CUDA driver (host when
  // there is none). kUnsupported for device or managed memory when the GPU
  // tier is unavailable (the message says why); kInvalidArgument for a range
  // that straddles allocations or kinds.
  Result<MemoryKind> ClassifyRegion(const void* p, size_t bytes);
  // host_cache.grow: versions of `bytes` are coming (what is protected now),
  // so the cache grows to hold one (Initializer::GrowFor) while the
  // application still computes; a capture larger than the cache grows it too.
  void ReserveFor(uint64_t bytes) CAIRN_EXCLUDES(mu_);
  // Whether the application is inside a capture or a restore (copying, or
  // waiting for cache room or for a read): an MPI job's redundancy levels
  // yield their background I/O meanwhile (docs/mpi.md, "Back-pressure").
  // Lock-free.
  bool ApplicationBusy() const;
  // Returns once ApplicationBusy() is false, or after `at_most`.
  void AwaitApplicationIdle(std::chrono::milliseconds at_most) CAIRN_EXCLUDES(mu_);

 private:
  void GrowCache(uint64_t bytes) CAIRN_REQUIRES(mu_);
  explicit Pipeline(const Config& config);
  Status Init();

  // Chunks (pipeline.cpp).
  // One wait on cv_app_ that the capturing application sits through: added
  // to capture_blocked_s (device: to device.capture_blocked_s, a wait for a
  // device-cache slot) and traced as `span` on the app track; `limit` > 0:
  // for at most that long.
  // The capture gives the cores back for the wait: what it waits for may
  // need the checksummer (SetCaptureCopying).
  void WaitAsCaptureBlocked(const char* span, bool device = false,
                            std::chrono::microseconds limit = std::chrono::microseconds(0))
      CAIRN_REQUIRES(mu_);
  // Capture precedence (docs/design.md): while an application thread copies
  // a capture, the checksummer takes no new block, so the copy does not
  // share the cores and the memory bandwidth with the CRC of its own earlier
  // blocks. Cleared when the copy ends or waits for room; clearing wakes the
  // checksummer.
  void SetCaptureCopying(bool copying) CAIRN_REQUIRES(mu_);
  // No waiting; evicts only clean blocks of entries captured before
  // below_seq (the prefetcher's rule: nothing needed sooner goes).
  std::optional<uint32_t> TryAcquireChunk(uint32_t write_bytes, bool* was_touched = nullptr,
                                          uint64_t below_seq = UINT64_MAX, int node = -1)
      CAIRN_REQUIRES(mu_);
  // TryAcquireChunk, taking the room held for the persister back when that
  // is what it takes (a capture's or a drain's chunk; never waits).
  std::optional<uint32_t> TakeChunk(uint32_t write_bytes, bool* was_touched = nullptr,
                                    int node = -1) CAIRN_REQUIRES(mu_);
  void Unpin(const EntryPtr& e) CAIRN_REQUIRES(mu_);
  // Marks consumed, releases chunks, forgets it.
  void Consume(const EntryPtr& e) CAIRN_REQUIRES(mu_);
  void ReleaseChunks(Entry& e) CAIRN_REQUIRES(mu_);
  void FailEntry(const EntryPtr& e, const Status& s) CAIRN_REQUIRES(mu_);
  // A layered version is unrestorable without its base: those in flight on
  // `base`, which failed, fail with it (FailEntry), so none commits over a
  // base that never will. At capture, a version on a failed base fails at once.
  void FailLayersOn(const Entry& base) CAIRN_REQUIRES(mu_);
  void NotifyAll();
  void TraceCache() CAIRN_REQUIRES(mu_);  // a cache-occupancy counter sample

  // The capture path's steps (capture.hpp): an object over the pipeline's
  // state, made for each capture and for each zero-copy epoch's reader.
  class Capturer;

  // Each stage's view of the pipeline (its Owner), one class per stage, and
  // what follows the stages' jobs (stage_owners.hpp; the persister's and the
  // mover's in persistence.cpp).
  struct StageOwners;
  // Tells layering_ (once) whether checkpoint e committed locally.
  void SettleLayering(Entry& e) CAIRN_REQUIRES(mu_);
  void RemoveNameDirIfUnused(const std::string& name) CAIRN_REQUIRES(mu_);

  // GPU tier (gpu_tier.cpp).
  Status OpenGpu() CAIRN_EXCLUDES(mu_);  // at Init: runtime, device cache (best effort)

  // Reading versions back (reader.hpp): from the cache or the files, for
  // the restores, pops and waits; made for each call that reads.
  class Reader;

  tiers::FileTier& tier_for(format::EntryKind kind) {
    return kind == format::EntryKind::kCheckpoint ? local_ : history_;
  }

  const Config config_;
  os::Numa* const numa_;  // config_.numa or the real one
  os::FileSystem* fs_;
  tiers::FileTier local_;    // durable checkpoint files
  tiers::FileTier history_;  // same directory, history write options
  std::optional<tiers::FileTier> persistent_;
  Tracer tracer_;        // thread-safe on its own; no-op unless trace.path is set
  MemoryMovers movers_;  // who moves memory now (atomic; the initializer's touch model reads it)

  Mutex capture_mu_;  // serializes captures (see above); before mu_
  mutable Mutex mu_ CAIRN_ACQUIRED_AFTER(capture_mu_);
  // Space freed, entry state changed, a stage's job done. Each stage has its
  // own wake-up condition (Worker::Wake).
  std::condition_variable_any cv_app_;

  Catalog catalog_ CAIRN_GUARDED_BY(mu_);  // entries and open histories
  std::set<std::string> known_dirs_ CAIRN_GUARDED_BY(mu_);
  bool closing_ CAIRN_GUARDED_BY(mu_) = false;
  bool capture_copying_ CAIRN_GUARDED_BY(mu_) = false;  // SetCaptureCopying
  bool shut_down_ CAIRN_GUARDED_BY(mu_) = false;
  Status unreported_error_ CAIRN_GUARDED_BY(mu_);
  Stats stats_ CAIRN_GUARDED_BY(mu_);
  CommitRecord commits_ CAIRN_GUARDED_BY(mu_);  // NewestLocalCommit, SetGlobalCommit
  // The host tier's state: the cache, its chunks' blocks, the dirty bytes,
  // the persist holds (block_store.hpp). The device tier's is the device
  // mover's.
  BlockStore store_ CAIRN_GUARDED_BY(mu_){
      {.evictions = &stats_.evictions, .holds_released = &stats_.persist_holds_released},
      &tracer_,
      &cv_app_};

  // GPU tier, set by Init before any thread starts, then constant. gpu_:
  // null without a usable driver (gpu_unavailable_ says why); dcache_: null
  // without a device cache (it locks itself); dio_: the streams and bounce
  // buffers (device_io.hpp, its own locks). The device mover borrows both.
  std::unique_ptr<gpu::Runtime> gpu_;
  Status gpu_unavailable_;
  std::unique_ptr<gpu::DeviceCache> dcache_;
  std::optional<DeviceIo> dio_;

  // Helpers for the application's blocking copies (its own threads).
  std::unique_ptr<CopyEngine> copier_;
  // What each checkpoint version stores (layering.hpp; its own lock, taken
  // after mu_). Made by Init, after copier_, whose helpers it hashes on.
  std::unique_ptr<Layering> layering_;

  // Zero-copy epochs, one at a time (zero_copy_capture.hpp; its own
  // locking over mu_ and capture_mu_).
  ZeroCopyCapture zero_copy_{&mu_, &capture_mu_, &cv_app_, config_, &stats_.zero_copy};

  const std::unique_ptr<StageOwners> owners_;  // what the stages below call back
  // The stages (stages/; docs/design.md says what each does), over mu_.
  // Declared after everything they use: started by Init, stopped and joined
  // by Shutdown (and their destructors).
  Checksummer checksummer_;
  Flusher flusher_;
  Flusher persister_;
  Mover mover_;
  Prefetcher prefetcher_;
  DeviceMover device_mover_;
  Initializer initializer_;  // last: joined first
};

}  // namespace cairn::core
