// Cairn C++ API: asynchronous multi-level checkpoint/restart.
//
// A Client captures the application's protected memory regions into its host
// cache and moves the data in the background to the local (scratch) directory
// and, when configured, to the persistent directory. See docs/design.md.
//
// Thread safety: every method of Client and History may be called from any
// thread; calls are internally synchronized. A History must be closed (or
// destroyed) before its Client.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/config.hpp"
#include "cairn/export.h"
#include "cairn/status.hpp"

namespace cairn {

// Where a version is durable. Numeric values match cairn_level_t.
enum class Level : int { kCache = 0, kLocal = 1, kPersistent = 2 };

// Where a protected region lives; Protect and Push find out from the CUDA
// driver (host when there is none). Recorded in the file format.
enum class MemoryKind : uint32_t { kHost = 0, kDevice = 1, kManaged = 2 };

// Traffic through one stage of the pipeline.
struct TierStats {
  uint64_t bytes = 0;    // payload bytes moved
  uint64_t ops = 0;      // number of versions/steps moved
  double seconds = 0.0;  // busy time of the stage
  double gbps() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; }
};

// How the host cache was prepared (host_cache.init; docs/design.md, "Fast
// initialization"). Times are seconds since Client::Open began; < 0 = not yet.
struct InitStats {
  CacheInit strategy = CacheInit::kAdaptive;
  double open_s = 0;           // time Open spent preparing the cache
  double fully_touched_s = -1; // every chunk touched (by the initializer or writers)
  double pinned_s = -1;        // the cache was pinned (host_cache.pin)
  double pin_wait_s = 0;       // time spent waiting for the node's pin lock
  double pin_call_s = 0;       // duration of the pin call itself
  std::string pin_error;       // why pinning failed ("" = it did not, or is off)
  uint64_t touched_bytes = 0;  // touched (or memset) by the initializer thread
  uint64_t touch_slices = 0;   // slices it touched
  uint64_t capture_untouched_bytes = 0;  // captured into untouched memory
  uint64_t capture_touched_bytes = 0;    // ... touched, not pinned
  uint64_t capture_pinned_bytes = 0;     // ... pinned
  uint64_t mode_switches = 0;  // adaptive: concurrent <-> sequential changes
  bool concurrent_now = false; // adaptive: the mode in use
  // Restores the application is waiting on now (a read from files, an MPI
  // job's collective restore with its recovery): the touch pauses meanwhile
  // under every strategy but the fixed concurrent one.
  uint64_t restores_now = 0;
};

// The GPU tier (docs/gpu.md). All zero when no device cache and no device
// region were used.
struct DeviceStats {
  bool gpu = false;             // a CUDA driver and device are in use
  DeviceCacheInit init = DeviceCacheInit::kIncremental;
  uint64_t capacity_bytes = 0;  // device cache size (0 = none)
  uint64_t mapped_bytes = 0;    // backed by device memory so far
  double fully_mapped_s = -1;   // since open; -1 = still mapping (or no cache)
  std::string map_error;        // why mapping stopped early ("" = it did not)
  TierStats capture;            // device/managed regions -> device cache (or host cache)
  TierStats drain;              // device cache -> host cache (background)
  TierStats prefetch;           // host cache -> device cache (background)
  uint64_t hits = 0;            // restores/pops served from the device cache
  uint64_t evictions = 0;       // device cache slots evicted (data safe in the host tier)
  double capture_blocked_s = 0; // captures waited for mapped or free device slots
  uint64_t bounce_bytes = 0;    // moved through the pinned bounce buffers
  uint64_t used_bytes = 0;      // device cache slots holding data now
};

// Change detection (checkpoint.changes; docs/design.md, "Layered captures").
// All zero with changes = full.
struct ChangeStats {
  std::string mode;            // checkpoint.changes: "full", "hash", "pages", "auto"
  std::string tracker;         // page tracker in use ("uffd-async", ...); "" = none made
  std::string fallback_note;   // the first reason a region lost its detection mode; "" = none
  uint64_t full_versions = 0;     // checkpoint versions planned full
  uint64_t layered_versions = 0;  // ... and layered (changed extents only)
  uint64_t bytes_examined = 0;    // host region bytes offered to detection
  uint64_t bytes_stored = 0;      // payload the planned versions store
  uint64_t bytes_hashed = 0;      // read by the hash detector
  uint64_t tracking_faults = 0;   // first writes trapped (uffd-sync, mprotect trackers)
  uint64_t fallbacks = 0;         // regions that fell back (untrackable, tracking lost)
  uint64_t deactivations = 0;     // auto: times monitoring was deactivated
  uint64_t deactivated_regions = 0;  // auto: regions deactivated now
};

// The redundancy levels of a client opened in a group (docs/mpi.md): which
// level served each of its collective restores, and the L2/L3/L4 work of its
// collective waits. All zero for a client opened alone.
struct MpiStats {
  uint64_t restored_local = 0;  // collective restores served by the rank's own local file (L1)
  uint64_t restored_l2 = 0;     // ... by a partner copy brought back first (L2)
  uint64_t restored_l3 = 0;     // ... by a file rebuilt from XOR parity first (L3)
  uint64_t restored_l4 = 0;     // ... by the rank's persistent file (L4)
  uint64_t l2_copies = 0;       // versions stored at the partner (L2 turns)
  uint64_t l3_parity_writes = 0;  // parity files written (L3 waits)
  uint64_t l3_parity_bytes = 0;   // their bytes
  double l3_encode_s = 0;         // time the waits spent encoding and storing them, and
                                  // the re-encodings of a rebuilt rank's parity
  uint64_t l3_rebuilds = 0;       // versions of this rank rebuilt from parity
  double l3_rebuild_s = 0;        // time of the recoveries that rebuilt them (without re-encoding)
  // Where the rebuilds this rank took part in (lost member or survivor)
  // spent their time (docs/mpi.md "Measuring a rebuild"). The lost
  // member's CRC and write run on a thread of their own, beside its
  // exchanges; write_wait_s is what its receiving waited for them.
  double l3_read_s = 0;        // survivor: reading its bundle and parity
  double l3_exchange_s = 0;    // in the exchanges (sending, receiving, waiting)
  double l3_xor_s = 0;         // survivor: XOR of the received windows
  double l3_crc_s = 0;         // CRCs of the windows read or received
  double l3_write_s = 0;       // lost member: writing the rebuilt file
  double l3_write_wait_s = 0;  // lost member: receiving waited for the writes
  double l3_sync_s = 0;        // lost member: the commit (fsync, rename, dir fsync)
  uint64_t l4_waits = 0;          // versions made persistent by CAIRN_L4_EVERY
};

// Zero-copy captures (checkpoint.capture = zero-copy; docs/design.md,
// "Zero-copy captures"). All zero in copy mode.
struct ZeroCopyStats {
  std::string note;             // why a checkpoint was copied instead, why mprotect under auto ("" = none)
  uint64_t versions = 0;        // checkpoints captured zero-copy
  uint64_t fallbacks = 0;       // checkpoints copied because protection failed
  uint64_t protected_bytes = 0; // bytes write-protected, summed over versions
  uint64_t cow_peak_bytes = 0;  // most copy-on-write buffer bytes in use at once
  uint64_t red = 0;             // first writes that waited for their page's read
  uint64_t orange = 0;          // first writes copied into the COW buffer
  uint64_t green = 0;           // pages read before any write
  uint64_t blue = 0;            // first writes after the version was read (learned order, userfaultfd)
  uint64_t watch_faults = 0;    // first writes trapped after their page's read (GREEN + BLUE; the watch's cost)
  uint64_t faults = 0;          // write faults handled
  double red_wait_s = 0;        // application time blocked in RED faults
  double fault_s = 0;           // handler time on faults (divide by faults: per page)
  double call_s = 0;            // time inside checkpoint calls captured zero-copy
  uint64_t huge_restored_bytes = 0;  // cairn_alloc huge pages whole again after epochs (os/mem/mappings.hpp)
  // learned-order epochs planned in address order: the learned ranks did not
  // foretell the first writes better than address order (docs/design.md, "Flush order")
  uint64_t address_epochs = 0;
};

// The optimal checkpoint interval (Client::CheckpointDue; docs/design.md,
// "When to checkpoint"): the last decision, for the name it was asked about.
// All zero before the first call that had a measured checkpoint.
struct IntervalStats {
  double period_s = 0;      // the optimal interval T_opt in use
  double waste = 0;         // expected waste fraction (0 to 1) checkpointing every period_s
  double checkpoint_s = 0;  // C: median blocking cost of the recent checkpoints
  double restore_s = 0;     // R: the measured (or estimated) restore cost
};

struct Stats {
  TierStats capture;           // application memory -> host cache (app thread);
                               // seconds: copy time, without the waits below
  TierStats flush_local;       // host cache -> local directory
  TierStats flush_persistent;  // -> persistent directory (from the host cache,
                               // or copied from the local file)
  TierStats prefetch;          // files -> host cache (background)
  TierStats restore;           // cache or file -> application memory
  uint64_t cache_hits = 0;     // restores/pops served entirely from the cache
  uint64_t cache_misses = 0;   // restores/pops that read a file
  uint64_t prefetch_waits = 0; // pops that waited for an in-flight prefetch
  uint64_t evictions = 0;      // cache blocks evicted (clean data only)
  uint64_t flushes_skipped = 0;  // history steps consumed before being flushed
  double capture_blocked_s = 0;  // time captures waited for cache space
  uint64_t cache_capacity_bytes = 0;
  uint64_t cache_used_bytes = 0;   // currently holding data (dirty + clean)
  uint64_t cache_dirty_bytes = 0;  // not yet in the local directory
  uint64_t failed_flushes = 0;
  // Checkpoints copied local file -> persistent directory because the
  // persister could not write them from the host cache (a block it needed
  // was evicted first), and the holds released for the cache's room.
  uint64_t persist_file_copies = 0;
  uint64_t persist_holds_released = 0;
  // host_cache.numa: captured blocks whose chunk is on their source's node,
  // and those that got another node's (theirs had none free).
  uint64_t numa_local_chunks = 0;
  uint64_t numa_remote_chunks = 0;
  InitStats init;
  DeviceStats device;
  ChangeStats changes;
  MpiStats mpi;
  ZeroCopyStats zero_copy;
  IntervalStats interval;
};

// Per-region options of Client::Protect.
struct ProtectOptions {
  // checkpoint.changes for this region; unset: the client's. E.g. kHash for
  // memory that cannot be tracked page by page, kFull for a region that
  // changes everywhere each time.
  std::optional<ChangeDetection> changes;
  // host_cache.grow: the cache grows at once to hold a version of everything
  // protected, while the application still computes. false: the region is
  // only restored into (e.g. a load into fresh memory) and makes the cache
  // grow for no checkpoint; a capture larger than the cache still grows it.
  bool reserve_cache = true;
};

// How Unprotect lets go of a region's memory.
struct UnprotectOptions {
  // true: Unprotect returns once no capture reads the memory any more (a
  // zero-copy checkpoint still reading it is read to the end first, and its
  // write protection is gone), so it may be freed at once. false: it returns
  // at once, and the memory must stay mapped (it may change) until the next
  // Checkpoint, Restore or Close of this client returns; for callers that
  // keep it alive so anyway (Python's Client does). Copy-mode captures are
  // over when Checkpoint returns: then both are the same.
  bool wait_for_reads = true;
};

// How Restore reads a version that is no longer in the cache.
struct RestoreOptions {
  // Other processes of this node read the same version at about the same
  // time (every rank of a job loading a replicated model): its files are
  // read through the page cache, so they come off the disk once for all of
  // them instead of once per process. false: they are read the way they
  // were written (O_DIRECT under storage.direct_io), which is faster for a
  // version that one process reads alone.
  bool shared_on_node = false;
};

class History;
class Group;
struct GlobalCommitState;  // cairn/group.hpp
struct WaitLevels;         // cairn/group.hpp

class CAIRN_EXPORT Client {
 public:
  // Opens a client. Creates the directories it needs (mode 0700), allocates the
  // host cache (which grows only under host_cache.grow, to hold one version of
  // the protected regions) and starts the background threads.
  static Result<std::unique_ptr<Client>> Open(const Config& config);
  // Convenience: LoadConfig(config_path) then Open().
  static Result<std::unique_ptr<Client>> Open(const char* config_path);

  ~Client();  // Close(), ignoring its Status.
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Drains pending flushes, persistent copies and retention deletes (a run
  // that waited only at kLocal pays its pending persistent copies here), joins
  // all threads, releases the cache. Returns the first flush error not yet
  // reported by Wait(). Idempotent.
  Status Close();

  // Registers (or re-registers) region `id` (any int) at [ptr, ptr+bytes).
  // The memory must stay valid until Unprotect() or Close(). bytes may be 0.
  // ptr may be host, CUDA device or CUDA managed memory: the CUDA driver
  // says which (host without one); kInvalidArgument for a range spanning two
  // allocations, kUnsupported for GPU memory Cairn cannot use (with why).
  // Device captures start after the work on the legacy default stream;
  // synchronize other streams that write the region before Checkpoint.
  Status Protect(int id, void* ptr, size_t bytes);
  // The same, with this region's own options (a re-registration with other
  // options starts its change detection afresh: its next version is full).
  Status Protect(int id, void* ptr, size_t bytes, const ProtectOptions& options);
  // Forgets region `id`; later checkpoints leave it out. Returns once no
  // capture reads its memory (UnprotectOptions): the memory may then be
  // freed. kNotFound if it is not protected, kState once the client is closed.
  Status Unprotect(int id);
  Status Unprotect(int id, const UnprotectOptions& options);

  // Captures every protected region into version `version` (>= 0) of `name`.
  // Returns once all regions are copied into the host cache: the application
  // may modify its memory right away. Blocks only while the cache is full of
  // data not yet flushed (back-pressure). Flushing continues in the background.
  // kExists if that version is still in this client's pipeline.
  Status Checkpoint(std::string_view name, int64_t version);

  // Blocks until `version` is durable at `level`; returns the flush's error if
  // it failed. kCache returns once it is captured. Levels are cumulative:
  // kPersistent also waits for the local commit (the persistent copy, written
  // from the cache beside the local one, may commit first). kPersistent with
  // no persistent directory configured is kInvalidArgument.
  Status Wait(std::string_view name, int64_t version, Level level);

  // Newest version of `name` committed to a file tier (local or persistent)
  // whose file's structure checks out (header, footer, tables and their
  // CRCs); versions with such damage are skipped. The data is not read here:
  // damaged data is found by the restore, which verifies every block as it
  // reads it (RestoreLatest falls back on its own). kNotFound if none.
  Result<int64_t> Latest(std::string_view name);
  // The same, among the versions <= at_most (>= 0; kInvalidArgument
  // otherwise): the newest such version, collective on a group's client like
  // Latest. kNotFound if none (VELOC_Restart_test's bound, docs/veloc.md).
  Result<int64_t> Latest(std::string_view name, int64_t at_most);

  // Copies version `version` into the protected regions (same ids and sizes).
  // Reads from the cache when resident, else from the local, else persistent
  // file, verifying every block's CRC32C. kCorrupt names the file and block; the
  // regions' content is then unspecified. kSizeMismatch if a region's size
  // differs; kNotFound if a protected id is missing from the version.
  Status Restore(std::string_view name, int64_t version);
  // The same, reading the files as `options` says (RestoreOptions).
  Status Restore(std::string_view name, int64_t version, const RestoreOptions& options);
  // A restore made of several calls (a framework's load: it reads its own
  // metadata, plans, then calls Restore for the data): from BeginRestore to
  // its EndRestore the application counts as waiting on a restore, as it
  // does inside each Restore call, so the host cache's background
  // preparation (host_cache.init) pauses instead of taking the cores and the
  // memory bandwidth the load needs (stats: init.restores_now). They nest.
  // EndRestore with none begun is kState; Close ends those left open.
  Status BeginRestore();
  Status EndRestore();

  // The restart in one pass: restores the newest committed version of `name`
  // that verifies into the protected regions and returns its number. Each
  // byte is read once (the blocks are verified as they are read). When a
  // version turns out damaged (kCorrupt) or unreadable (kIo) part-way, the
  // regions have already been partly overwritten: the next older committed
  // version is restored into the same regions, and so on; on success the
  // regions hold exactly the returned version. kNotFound when there is no
  // committed version, or when every one is damaged (the regions then hold
  // partial data; the message lists the damage). kSizeMismatch / kNotFound
  // for a region that does not match the newest version stop at once.
  Result<int64_t> RestoreLatest(std::string_view name);

  // Restarting on another number of ranks (docs/mpi.md): reading the files
  // of the MPI job that saved `name` under the same storage roots (the
  // configured scratch and persistent directories, before any rank
  // subdirectory; docs/format.md 3.7), whatever the size of this job. On a
  // client opened in a group (cairn_open_mpi) SavedRanks and SavedLatest are
  // collective, each member checking a share of the saved ranks; on another
  // client they check every saved rank themselves.
  struct SavedVersion {
    int64_t version = -1;
    int ranks = 0;  // the saved job's number of ranks
  };
  // The saved job's number of ranks N, once every saved rank 0 .. N-1 is
  // found to have `version` globally committed and its file intact
  // (structure; the data is verified when read). kNotFound naming the first
  // saved rank that lacks it and why; kNotFound when no job saved `name`.
  Result<int> SavedRanks(std::string_view name, int64_t version);
  // The newest version that SavedRanks accepts, with N. kNotFound if none.
  Result<SavedVersion> SavedLatest(std::string_view name);
  // Local (any rank, any time): the size in bytes of region `region` of
  // saved rank `saved_rank`'s version, and a copy of its bytes [offset,
  // offset + bytes) into host memory `dst`, every block's CRC verified
  // (falling back from the local to the persistent directory on damage).
  // kInvalidArgument for a saved rank >= N, a region id the version lacks or
  // a range past the region's end; kNotFound for a version not globally
  // committed (the message says where it looked and what it found).
  Result<uint64_t> SavedRegionSize(std::string_view name, int64_t version, int saved_rank,
                                   int region);
  Status ReadSavedRegion(std::string_view name, int64_t version, int saved_rank, int region,
                         uint64_t offset, void* dst, size_t bytes);

  // Whether a checkpoint of `name` is due under the optimal interval
  // (docs/design.md, "When to checkpoint"): true before any checkpoint of
  // `name` by this client (it measures the cost), then once
  // T = max(C, sqrt(2 C (MTBF - R))) has passed since the last checkpoint of
  // `name` returned (or the last wait on it): C is the median blocking time
  // of its last 5 checkpoints (each call plus the waits on its version), R
  // its last restore's time (else its bytes over the last restore's read
  // bandwidth, or 1 GB/s), MTBF checkpoint.mtbf_s. kConfig when
  // checkpoint.mtbf_s is not set. In a group (cairn_open_mpi) it is
  // collective: true on every rank when it is true on any, so that the ranks
  // checkpoint the same versions. Updates Stats::interval.
  Result<bool> CheckpointDue(std::string_view name);

  // Opens the adjoint history `name` (see History).
  Result<std::unique_ptr<History>> OpenHistory(std::string_view name);

  // Placement (docs/design.md, "Placement"; cairn_register_thread and
  // cairn_restore_affinity in cairn.h are the contract). RegisterThread
  // remembers the calling thread under `index` (>= 0; kInvalidArgument
  // otherwise), so that every later checkpoint records its CPU affinity.
  // RestoreAffinity sets the calling thread's affinity to the one recorded
  // under `index` (kCheckpointingThread: the thread that called Checkpoint)
  // in the version last restored: kState before a restore whose version has
  // a placement record, kNotFound for an index it did not record; a no-op
  // with restart.placement = keep.
  static constexpr int kCheckpointingThread = -1;
  Status RegisterThread(int index);
  Status RestoreAffinity(int index);

  // A snapshot of the pipeline's counters; all zero once the client is closed.
  Stats GetStats() const;
  // The configuration the client was opened with.
  const Config& config() const;

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  // The bodies of Wait, Restore and RestoreLatest, which time them for
  // CheckpointDue's model.
  Status WaitFor(std::string_view name, int64_t version, Level level);
  Status RestoreVersion(std::string_view name, int64_t version, const RestoreOptions& options);
  Result<int64_t> RestoreNewest(std::string_view name);
  std::unique_ptr<Impl> impl_;
  friend class History;
  // cairn/group.hpp: a client whose Latest, RestoreLatest, Restore and Wait
  // are collective over a group of processes (docs/mpi.md).
  friend Result<std::unique_ptr<Client>> OpenInGroup(Result<Config> config, std::unique_ptr<Group> group);
  friend Result<GlobalCommitState> ProgressGlobalCommit(Client& client, std::string_view name);
  friend Status RemoveLocalCopies(Client& client, std::string_view name);
  friend Status WaitAtLevels(Client& client, std::string_view name, int64_t version,
                             WaitLevels levels);
};

// A sequence of steps pushed in a forward pass and popped (usually in reverse)
// in a backward pass. Steps may have different sizes. A popped step is consumed:
// its cache blocks are freed and its file is deleted; a step consumed before its
// flush began is never written. Pops trigger prefetching of the next lower
// steps into the cache. Ephemeral unless history_persistent is set.
class CAIRN_EXPORT History {
 public:
  ~History();  // Close(), ignoring its Status.
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // Copies [data, data+bytes) as step `step` (>= 0). kExists if present.
  Status Push(int64_t step, const void* data, size_t bytes);
  // Copies step `step` into dst (capacity bytes) and consumes it. Returns the
  // step's size. kNotFound if absent, kSizeMismatch if capacity is too small
  // (the step is then not consumed).
  Result<size_t> Pop(int64_t step, void* dst, size_t capacity);
  // Size of a step that has been pushed and not popped.
  Result<size_t> StepSize(int64_t step) const;
  // Drops every remaining step (deleting ephemeral files). Idempotent.
  Status Close();

  struct Impl;

 private:
  explicit History(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Client;
};

// Tracked memory (cairn_alloc/cairn_free in cairn.h, where the contract is).
// Alloc returns zero-filled, page-aligned anonymous memory of at least
// `bytes` bytes (2 MiB-aligned, with transparent huge pages advised, from
// 2 MiB up), which checkpoint.changes = pages can track page by page. Free
// releases memory that Alloc returned (nullptr: no-op); kInvalidArgument for
// any other pointer.
CAIRN_EXPORT Result<void*> Alloc(size_t bytes);
CAIRN_EXPORT Status Free(void* ptr);

// Messages (cairn_set_log_fn in cairn.h, where the contract is): every later
// message goes to fn(level, message) instead of stderr; an empty fn restores
// the default.
enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2 };
CAIRN_EXPORT void SetLogFunction(std::function<void(LogLevel, std::string_view)> fn);

// RAII owner of tracked memory.
class TrackedBuffer {
 public:
  TrackedBuffer() = default;
  static Result<TrackedBuffer> Create(size_t bytes) {
    Result<void*> p = Alloc(bytes);
    if (!p.ok()) return p.status();
    TrackedBuffer b;
    b.data_ = *p;
    b.size_ = bytes;
    return b;
  }
  ~TrackedBuffer() { (void)Free(data_); }
  TrackedBuffer(TrackedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; o.size_ = 0; }
  TrackedBuffer& operator=(TrackedBuffer&& o) noexcept {
    if (this != &o) {
      (void)Free(data_);
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return size_; }  // as requested

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cairn
