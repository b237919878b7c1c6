// The pipeline: the engine behind cairn::Client. It owns the host cache, the
// file tiers and the background threads (docs/design.md has the picture),
// and moves entries through
//
//   capture (app thread) -> checksum -> flush to local   -> evict (clean) -> prefetch
//                                    \-> persist (checkpoints, concurrently:
//                                        cache -> persistent tier; the mover
//                                        copies the local file if evicted first)
//
// Threads: each is owned by a component held here (the stages below, each
// in its own class, and the zero-copy reader), stopped and joined by
// Shutdown(). Pipeline wires them (the state they share, and their Owners)
// and orders the shutdown; the application-thread paths (capture.cpp,
// restore.cpp, chain_restore.cpp, history.cpp) stay here because they
// coordinate all of them. docs/design.md ("Who owns what") draws the
// threads, what each runs and the locks it holds.
//
// GPU tier: a block of a device or managed region is captured into a
// device-cache slot (device -> device on Cairn's stream) and drained to a
// host chunk in the background; with no device cache it is copied device ->
// host straight into a host chunk. A block's data is always in at least one
// of: its device slot, its host chunk, the written file. Device slots are
// evicted only once their data is in the host tier, and only after the
// device cache is fully mapped (HiPC'22, constraint 1).
//
// Locking: one mutex (mu_, a cairn::Mutex) guards every piece of state below,
// and the fields of every Entry (entry.hpp). It is never held across memcpy,
// file I/O or checksums; those run on pinned entries, with the lock dropped
// by a MutexUnlock (util/mutex.hpp) that names the step. The one exception is
// RemoveNameDirIfUnused's rmdir (history.cpp says why). Captures are
// serialized by capture_mu_ (taken before mu_), which guarantees progress:
// the flusher always works on the oldest entry, and the only entry that can be
// waiting for chunks is the one being captured.
//
// The annotations are checked: the clang build (CMakePresets.json "tsa",
// scripts/test.sh step "thread-safety (clang)") compiles with
// -Wthread-safety -Werror=thread-safety. A helper that needs mu_ says
// CAIRN_REQUIRES(mu_); a public entry point says CAIRN_EXCLUDES(mu_).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
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
#include "engine/stages/checksummer.hpp"
#include "engine/stages/device_io.hpp"
#include "engine/stages/device_mover.hpp"
#include "engine/stages/flusher.hpp"
#include "engine/stages/initializer.hpp"
#include "engine/stages/mover.hpp"
#include "engine/stages/prefetcher.hpp"
#include "engine/trace.hpp"
#include "engine/worker.hpp"
#include "engine/zero_copy_capture.hpp"
#include "format/file_writer.hpp"
#include "gpu/runtime.hpp"
#include "os/mem/numa.hpp"
#include "tiers/device_cache.hpp"
#include "tiers/file_tier.hpp"
#include "tiers/host_cache.hpp"
#include "tiers/tier_cache.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::format {
class Chain;
}  // namespace cairn::format

namespace cairn::core {

class ZeroCopyOrder;

// One region to restore into.
struct RestoreTarget {
  int32_t id = 0;
  MemoryKind memory = MemoryKind::kHost;
  void* data = nullptr;
  uint64_t bytes = 0;
};

// How a restore reads files: the way the tier writes them (O_DIRECT under
// storage.direct_io), or through the page cache, for a version that other
// processes of the node read at the same time: its files then come off the
// disk once for all of them instead of once per process.
enum class FileRead { kAsWritten, kThroughPageCache };

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

 private:
  void GrowCache(uint64_t bytes) CAIRN_REQUIRES(mu_);
  // One batch of a capture (pipeline.cpp): the blocks [first, end) and where
  // their bytes go.
  struct CaptureBatch {
    std::vector<uint32_t> blocks;  // planned, in the order asked for
    // host -> host chunk (CPU copies), into untouched [0] and touched [1]
    // chunks: copied one after the other, so that the touch model gets both
    // rates.
    std::vector<CopySegment> host[2];
    std::vector<CopySegment> gpu;                    // device/managed -> slot or host chunk
    std::vector<bool> to_slot;                       // per block of the batch
    std::vector<std::pair<uint8_t*, size_t>> tails;  // chunk tails to zero
    bool touching_allowed = false;                   // the touch mode allowed touching meanwhile
    // Host copies with streaming stores: the capture is larger than the
    // last-level cache, so its chunks leave the caches anyway
    // (CopyEngine::Stores; Pipeline::StreamsCapture).
    CopyEngine::Stores stores = CopyEngine::Stores::kCached;
  };
  // Whether a capture of `bytes` copies into the cache with streaming stores:
  // from the size of a server's last-level cache on (32 MiB, our VM's L3).
  // Not asked of the system: CPUID (sysconf, glibc) claims 256 MiB here.
  // Below it, cached stores leave the blocks in the cache for the checksummer.
  static constexpr uint64_t kStreamCaptureBytes = 32ull << 20;
  static bool StreamsCapture(uint64_t bytes) { return bytes >= kStreamCaptureBytes; }

  explicit Pipeline(const Config& config);
  Status Init();

  // Chunks (pipeline.cpp).
  // For a capture: the caller writes the chunk's first write_bytes bytes.
  // was_touched (optional): whether the chunk's memory was fully touched
  // before. Blocks for space (the application's blocking, capture_blocked_s);
  // before waiting it takes back the room held for the persister (TakeChunk).
  // `node` >= 0: a chunk on that NUMA node first (HostCache::Allocate).
  int32_t AcquireChunk(uint32_t write_bytes, bool* was_touched = nullptr, int node = -1)
      CAIRN_REQUIRES(mu_);
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
  double CaptureBlockedSeconds() const CAIRN_REQUIRES(mu_) {  // both kinds of wait
    return stats_.capture_blocked_s + stats_.device.capture_blocked_s;
  }
  // No waiting; evicts only clean blocks of entries captured before
  // below_seq (the prefetcher's rule: nothing needed sooner goes).
  std::optional<uint32_t> TryAcquireChunk(uint32_t write_bytes, bool* was_touched = nullptr,
                                          uint64_t below_seq = UINT64_MAX, int node = -1)
      CAIRN_REQUIRES(mu_);
  // TryAcquireChunk, taking the room held for the persister back when that
  // is what it takes (a capture's or a drain's chunk; never waits).
  std::optional<uint32_t> TakeChunk(uint32_t write_bytes, bool* was_touched = nullptr,
                                    int node = -1) CAIRN_REQUIRES(mu_);
  // Host-cache room for the device mover while drains are pending: whether a
  // capture of `capturing` may take a chunk now, and waiting until it may.
  bool DrainRoomAfterTaking(const Entry& capturing) const CAIRN_REQUIRES(mu_);
  void WaitForDrainRoom(const Entry& capturing) CAIRN_REQUIRES(mu_);
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
  // Counts a served restore or pop in the stats and the trace.
  void NoteRead(bool hit, uint64_t bytes, std::chrono::steady_clock::time_point t0,
                const char* span, const std::string& name, int64_t number) CAIRN_REQUIRES(mu_);

  // Capture steps (pipeline.cpp).
  Status CheckSources(const std::vector<CaptureSource>& sources);
  // Whether e's key may be captured now (kState when closing or the history
  // is not open, kExists when it is still in the pipeline).
  Status CheckCapturable(const Entry& e) CAIRN_REQUIRES(mu_);
  // Registers the entry, whose layout is set (catalog, history, flush
  // queue); kExists/kState.
  Status BeginCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0,
                      double* interval_s) CAIRN_REQUIRES(mu_);
  // Plans a prefix of the blocks `want` (at least the first) into `batch`:
  // slots and chunks taken, the first block waiting for room, the others
  // taking what is free right now. packed: where each of the layout's
  // extents starts in its region's packed stream (SourcePieces).
  // *held: a host chunk the caller already took for the first block (a
  // zero-copy reader takes room before it picks the block: HoldRoom); left
  // as it is (chunk >= 0) when the first block does not take it.
  struct HeldChunk {
    int32_t chunk = -1;
    bool touched = false;
  };
  void PlanBatch(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                 const std::vector<uint64_t>& packed, const std::vector<uint32_t>& want,
                 CaptureBatch* batch, HeldChunk* held) CAIRN_REQUIRES(mu_);
  // A zero-copy reader's room for its next block, taken before the block is
  // chosen (capture.cpp, CaptureBlocks). The reader keeps *spares (as many
  // as zero_copy_.spares() says) for pages that go RED: a normal block waits for
  // another chunk, looking for RED pages every kRedPoll, and a RED page
  // takes a spare at once.
  static constexpr auto kRedPoll = std::chrono::microseconds(100);
  HeldChunk HoldRoom(const Entry& e, ZeroCopyOrder& order, std::vector<HeldChunk>* spares)
      CAIRN_REQUIRES(mu_);
  void FreeHeld(std::vector<HeldChunk>* held) CAIRN_REQUIRES(mu_);  // back to the cache
  // Copies a planned batch (no lock): device copies, then host copies, then
  // the chunk tails. Adds the device bytes and seconds to the totals.
  Status CopyBatch(CaptureBatch& batch, double copy_s[2], uint64_t copy_bytes[2], bool* touching,
                   uint64_t* gpu_bytes, double* gpu_seconds, ZeroCopy* zc) CAIRN_EXCLUDES(mu_);
  // Copies e's blocks into the cache, batch by batch (mu_ dropped around each
  // copy), in address order; zc: host pieces are read through the zero-copy
  // epoch instead, one block at a time in the flush order
  // (checkpoint.zero_copy_order; capture/zero_copy/zero_copy_order.hpp).
  // The NUMA node of each block's source (Entry::block_nodes); without mu_,
  // before the entry is published.
  std::vector<int32_t> SourceNodes(const Entry& e, const std::vector<CaptureSource>& sources);
  Status CaptureBlocks(const EntryPtr& e, const std::vector<CaptureSource>& sources, ZeroCopy* zc)
      CAIRN_REQUIRES(mu_);

  // Zero-copy checkpoints (zero_copy_): StartZeroCopy begins an epoch over
  // e's host memory and hands the rest of the capture to its reader thread,
  // which runs ReadZeroCopy; false when e must be copied instead.
  bool StartZeroCopy(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                     std::chrono::steady_clock::time_point t0, double interval_s)
      CAIRN_REQUIRES(mu_, capture_mu_);
  void ReadZeroCopy(const EntryPtr& e, const std::vector<CaptureSource>& sources, ZeroCopy* zc,
                    std::chrono::steady_clock::time_point t0, double interval_s)
      CAIRN_EXCLUDES(mu_);
  // A device copy failed: this version never existed.
  Status RollBackCapture(const EntryPtr& e, const CaptureBatch& batch, const Status& copied)
      CAIRN_REQUIRES(mu_);
  // Seals a copied batch and queues its blocks for checksum or drain.
  void SealBatch(const EntryPtr& e, const CaptureBatch& batch) CAIRN_REQUIRES(mu_);
  void EndCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0, double interval_s,
                  double blocked_before) CAIRN_REQUIRES(mu_);

  // Each stage's view of the pipeline (its Owner), one class per stage
  // (stage_owners.hpp), and what follows their jobs.
  struct StageOwners;
  // After every flush: a history closed meanwhile gets its directory removed.
  void FlushDone(const EntryPtr& e) CAIRN_REQUIRES(mu_);
  // Tells layering_ (once) whether checkpoint e committed locally.
  void SettleLayering(Entry& e) CAIRN_REQUIRES(mu_);
  void CommitFlushed(const EntryPtr& e, std::chrono::steady_clock::time_point flush_start,
                     double io_seconds) CAIRN_REQUIRES(mu_);
  void RemoveNameDirIfUnused(const std::string& name) CAIRN_EXCLUDES(mu_);
  // Persistence (persistence.cpp): what follows the persister's and the
  // mover's jobs, and the hold that keeps a checkpoint's written blocks in
  // the host cache until the persister wrote them too.
  // A checkpoint starts its capture: bound for the persistent tier.
  void BeginPersist(const EntryPtr& e) CAIRN_REQUIRES(mu_);
  void PersisterDone(const EntryPtr& e) CAIRN_REQUIRES(mu_);
  void NotePersisted(const EntryPtr& e, const Status& s, std::chrono::steady_clock::time_point t0,
                     double seconds, const char* span) CAIRN_REQUIRES(mu_);
  bool MayRetire(const std::string& name, int64_t v, bool local) CAIRN_REQUIRES(mu_);
  // Fast initialization: what the stages tell the initializer.
  // A writer took a chunk: the cache may be fully touched now.
  void NoteTouchProgress() CAIRN_REQUIRES(mu_) { initializer_.NoteTouchProgress(); }

  // GPU tier (gpu_tier.cpp).
  Status OpenGpu() CAIRN_EXCLUDES(mu_);  // at Init: runtime, device cache (best effort)

  // Restore helpers (restore.cpp).
  // Committed checkpoint versions of `name` in the local and persistent tiers.
  Result<std::set<int64_t>> CommittedVersions(const std::string& name);
  // The version's chain (or its cache entry) checks out structurally in
  // some tier; else appends why to *damaged (chain_restore.cpp).
  bool Intact(const std::string& name, int64_t version, std::string* damaged) CAIRN_EXCLUDES(mu_);
  // From the files, chain by chain (chain_restore.cpp): the local tier's
  // chain, else the persistent tier's.
  Status ReadFromFiles(const EntryPtr& e, format::EntryKind kind, const std::string& name,
                       int64_t number, const std::vector<RestoreTarget>& targets,
                       FileRead read = FileRead::kAsWritten) CAIRN_EXCLUDES(mu_);
  // One verifying pass per link of an opened chain of `tier` into targets.
  Status ReadChain(const format::Chain& chain, const tiers::FileTier& tier,
                   const std::string& label, const std::vector<RestoreTarget>& targets,
                   FileRead read) CAIRN_EXCLUDES(mu_);
  // Precondition: e is pinned and fully cached. Drops mu_ for the copies.
  // *device_hit: some block came from the device cache.
  Status CopyFromCache(const EntryPtr& e, const std::vector<RestoreTarget>& targets,
                       bool* device_hit) CAIRN_REQUIRES(mu_);
  // Wait() for an entry no longer (or never) in this pipeline: the committed
  // files answer (no lock held: it stats files).
  Status WaitForFiles(format::EntryKind kind, const std::string& name, int64_t number, Level level)
      CAIRN_EXCLUDES(mu_);

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

  // GPU tier. gpu_ is null without a usable driver (gpu_unavailable_ says
  // why); dcache_ is null with device_cache.size = 0 or when it could not be
  // created; both are set by Init before any thread starts, then constant
  // (the device cache locks itself). dio_: the streams and bounce buffers
  // (device_io.hpp, its own locks), made by Init, after OpenGpu. Init lends
  // dcache_ and dio_ to the device mover (DeviceMover::Attach).
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
  // The stages (worker.hpp), over mu_. Declared after everything they use:
  // started by Init, stopped and joined by Shutdown (and their destructors).
  //   checksummer   CRC32C of sealed blocks, ahead of the flusher (so
  //                 checksums cost no flush bandwidth; queue: captures, drains)
  //   flusher       FIFO: writes entries block by block to the local tier and
  //                 commits them (temp + fsync + rename + dir fsync); it
  //                 streams a checkpoint still being captured, which is how
  //                 one larger than the cache passes through (flusher.hpp)
  //   persister     a Flusher for the persistent tier: writes checkpoints from
  //                 the cache while the flusher writes them locally
  //                 (persistence.cpp)
  //   mover         copies committed checkpoints to the persistent tier when
  //                 the persister had to give them up, deletes consumed and
  //                 retired files, applies retention (queue: chores)
  //   prefetcher    reads history steps back into free chunks ahead of the
  //                 pops, highest step first (the adjoint pattern; polls)
  //   device_mover  GPU tier only: drains captured device-cache slots to host
  //                 chunks in FIFO order, then prefetches steps host -> device
  //                 ahead of the pops; owns the device tier's slot bookkeeping
  //   initializer   maps the host cache, touches it ahead of the captures
  //                 (paced by the touch model), then pins it (its own thread;
  //                 host_cache.init and .pin)
  Checksummer checksummer_;
  Flusher flusher_;
  Flusher persister_;
  Mover mover_;
  Prefetcher prefetcher_;
  DeviceMover device_mover_;
  Initializer initializer_;  // last: joined first
};

}  // namespace cairn::core
