// Cairn configuration: what a client is opened with.
//
// A Config is plain data. LoadConfig() builds one from built-in defaults, an
// optional TOML file and CAIRN_* environment variables (in that order, later
// wins), and validates it. docs/config.md lists every key.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/export.h"
#include "cairn/status.hpp"

namespace cairn {

namespace os {
class FileSystem;
class MemoryPinner;
class Numa;
}  // namespace os

// How the host cache's memory is prepared (docs/design.md, "Fast
// initialization"). Numeric values match cairn_cache_init_t.
enum class CacheInit : int {  // config_enums.def
#define CAIRN_CACHE_INIT(cpp, value, name, c, doc) cpp = value,
#include "cairn/config_enums.def"
};
CAIRN_EXPORT const char* CacheInitName(CacheInit init);  // "eager", ...
// "eager", "memset", "lazy", "concurrent", "sequential", "adaptive".
CAIRN_EXPORT Result<CacheInit> ParseCacheInit(std::string_view text);

// How the device cache gets its GPU memory (docs/gpu.md, "Device cache").
// Numeric values match cairn_device_cache_init_t.
enum class DeviceCacheInit : int {  // config_enums.def
#define CAIRN_DEVICE_CACHE_INIT(cpp, value, name, c, doc) cpp = value,
#include "cairn/config_enums.def"
};
CAIRN_EXPORT const char* DeviceCacheInitName(DeviceCacheInit init);  // "direct", "incremental"
// "direct" or "incremental"; kConfig on anything else.
CAIRN_EXPORT Result<DeviceCacheInit> ParseDeviceCacheInit(std::string_view text);

// How a checkpoint finds what changed since the version it is layered on
// (docs/design.md, "Change detection"). checkpoint.changes; CAIRN_CHANGES.
enum class ChangeDetection : int {  // config_enums.def
#define CAIRN_CHANGE_DETECTION(cpp, value, name, c, doc) cpp = value,
#include "cairn/config_enums.def"
};
CAIRN_EXPORT const char* ChangeDetectionName(ChangeDetection mode);  // "full", ...
// "full", "pages", "hash" or "auto"; kConfig on anything else.
CAIRN_EXPORT Result<ChangeDetection> ParseChangeDetection(std::string_view text);

// How a checkpoint takes host memory (docs/design.md, "Zero-copy captures").
// checkpoint.capture; CAIRN_CAPTURE.
enum class CaptureMode : int {  // config_enums.def
#define CAIRN_CAPTURE_MODE(cpp, value, name, c, doc) cpp = value,
#include "cairn/config_enums.def"
};
CAIRN_EXPORT const char* CaptureModeName(CaptureMode mode);  // "copy", "zero-copy"
// "copy" or "zero-copy"; kConfig on anything else.
CAIRN_EXPORT Result<CaptureMode> ParseCaptureMode(std::string_view text);

// How zero-copy checkpoints write-protect memory (docs/design.md, "Zero-copy
// captures"). checkpoint.write_protect; CAIRN_WRITE_PROTECT.
enum class WriteProtectMode : int {  // config_enums.def
#define CAIRN_WRITE_PROTECT_MODE(cpp, value, name, c, doc) cpp = value,
#include "cairn/config_enums.def"
};
CAIRN_EXPORT const char* WriteProtectModeName(WriteProtectMode mode);  // "auto", "userfaultfd", "mprotect"
// "auto", "userfaultfd" or "mprotect"; kConfig on anything else.
CAIRN_EXPORT Result<WriteProtectMode> ParseWriteProtectMode(std::string_view text);

// The code of the L3 parity sets (docs/mpi.md, "Parity (L3)"). mpi.l3_code;
// CAIRN_L3_CODE.
enum class L3Code : int {  // config_enums.def
#define CAIRN_L3_CODE(cpp, value, name, c, doc) cpp = value,
#include "cairn/config_enums.def"
};
CAIRN_EXPORT const char* L3CodeName(L3Code code);  // "xor", "rs"
// "xor" or "rs"; kConfig on anything else.
CAIRN_EXPORT Result<L3Code> ParseL3Code(std::string_view text);
// The lost members a parity set of `code` survives when mpi.l3_parity is
// `parity`: `parity` itself when > 0, else the code's default, 1 for XOR
// and 2 for Reed-Solomon. The one place that default is written.
CAIRN_EXPORT int EffectiveL3Parity(L3Code code, int parity);

struct CAIRN_EXPORT Config {
  // [storage]
  std::string scratch_dir;     // local (node-local) directory; CAIRN_SCRATCH
  std::string persistent_dir;  // shared/persistent directory, "" = none; CAIRN_PERSISTENT
  // Write checkpoints to it from the host cache, beside the local write
  // (false: copy each committed local file). CAIRN_PERSIST_FROM_CACHE
  bool persist_from_cache = true;
  uint32_t file_mode = 0600;   // permission bits of created files
  bool direct_io = true;       // O_DIRECT for durable checkpoint files when the
                               // file system supports it (falls back silently)
  bool fsync = true;           // fsync files and directories on commit

  // [host_cache]
  uint64_t host_cache_bytes = 512ull << 20;  // CAIRN_HOST_CACHE
  // Grow the cache to hold one version of the protected regions (within
  // half the available memory); CAIRN_HOST_CACHE_GROW
  bool host_cache_grow = true;
  uint64_t block_bytes = 4ull << 20;         // cache chunk == file block size
  // Helper threads lent to the application's blocking copies (capture,
  // restore from the cache); -1 = auto: min(cores - 1, 3). CAIRN_COPY_THREADS
  int copy_threads = -1;
  CacheInit init = CacheInit::kAdaptive;  // host_cache.init; CAIRN_HOST_CACHE_INIT
  bool huge_pages = true;  // madvise(MADV_HUGEPAGE) on the cache; CAIRN_HUGE_PAGES
  // Pin the cache (mlock; the GPU backend registers it with the driver) once
  // it is fully touched. A failed pin is reported once (Stats::init) and the
  // cache keeps working unpinned. CAIRN_PIN
  bool pin = false;
  // Processes of a node pin one at a time (a node-wide lock file).
  bool pin_serialize = true;
  std::string pin_lock_path;  // "" = /dev/shm/cairn-pin-<uid>.lock

  // [device_cache] (docs/gpu.md). Used only when a CUDA driver and device are
  // present; device and managed regions need them.
  // GPU memory captures of device/managed regions land in first; 0 = none:
  // those regions are copied straight into the host cache. CAIRN_DEVICE_CACHE
  uint64_t device_cache_bytes = 0;
  DeviceCacheInit device_cache_init = DeviceCacheInit::kIncremental;  // CAIRN_DEVICE_CACHE_INIT
  // Incremental: bytes mapped per cuMemCreate/cuMemMap (rounded up to the
  // allocation granularity). device_cache.map_chunk
  uint64_t device_map_chunk_bytes = 1ull << 30;
  // The CUDA device; -1 = the context current on the thread that opens the
  // client, else device 0. device_cache.device; CAIRN_DEVICE
  int device = -1;
  // Page-locked staging buffers (of block_bytes each) for device <-> host
  // cache copies while the host cache is not registered (host_cache.pin).
  int bounce_buffers = 2;

  // [retention]
  int keep_versions = 2;  // committed versions kept per name and tier; CAIRN_KEEP

  // [checkpoint] (docs/design.md, "Change detection")
  // What a version stores: everything, or what changed since the version it
  // is layered on. CAIRN_CHANGES
  ChangeDetection changes = ChangeDetection::kFull;
  // Layered versions in a chain before a full one; 0 = never layered.
  // CAIRN_MAX_LAYERS
  int max_layers = 10;
  // Granularity of `hash`: one 128-bit hash per this many bytes. CAIRN_HASH_CHUNK
  uint64_t hash_chunk_bytes = 64ull << 10;
  // Copy into the cache at the call, or write-protect and read in the
  // background. CAIRN_CAPTURE
  CaptureMode capture = CaptureMode::kCopy;
  // zero-copy: the copy-on-write buffer as a fraction of the bytes a version
  // protects (floor 16 pages unless 0, cap 1 GiB). CAIRN_COW
  double cow_fraction = 0.05;
  // zero-copy: learned | address, the order the epoch's pages are read in
  // (docs/design.md, "Flush order"). CAIRN_ZERO_COPY_ORDER
  std::string zero_copy_order = "learned";
  // zero-copy: how memory is write-protected. CAIRN_WRITE_PROTECT
  WriteProtectMode write_protect = WriteProtectMode::kAuto;
  // The mean time between failures in seconds, for Client::CheckpointDue's
  // optimal interval (docs/design.md, "When to checkpoint"); 0 = not set.
  // CAIRN_MTBF
  double mtbf_s = 0;

  // auto | on | off: host-cache chunks bound per NUMA node (docs/config.md).
  // CAIRN_HOST_CACHE_NUMA
  std::string host_cache_numa = "auto";

  // Placement records (docs/design.md, "Placement"): sampled page nodes and
  // thread affinities beside every version. CAIRN_RECORD_PLACEMENT
  bool record_placement = true;

  // [restart]
  // restore | keep | interleave (docs/config.md). CAIRN_PLACEMENT
  std::string placement = "restore";

  // [history]
  int prefetch_depth = 0;        // steps prefetched ahead of pops; 0 = as many as fit
  bool history_persistent = false;  // false: history files are deleted on close

  // [mpi]: the redundancy levels of a client opened in an MPI job
  // (docs/mpi.md); 0 = off. A client outside a job ignores them.
  int l2_every = 0;  // every n-th checkpoint is an L2 turn; CAIRN_L2_EVERY
  int l3_every = 0;  // every n-th collective wait gets XOR parity; CAIRN_L3_EVERY
  int l3_group = 0;  // ranks per parity set, 0 = min(4, nodes); CAIRN_L3_GROUP
  L3Code l3_code = L3Code::kXor;  // CAIRN_L3_CODE
  int l3_parity = 0;  // parity members' worth per set (lost members it survives), 0 = 1 (xor) or 2
                      // (rs); CAIRN_L3_PARITY
  int l4_every = 0;  // every n-th collective wait is made persistent; CAIRN_L4_EVERY
  // Cairn's own progress thread where MPI_THREAD_MULTIPLE allows it, else
  // progress at Cairn calls; CAIRN_MPI_PROGRESS_THREAD.
  bool progress_thread = true;
  // Simulated nodes of k consecutive ranks, 0 = the real ones;
  // CAIRN_MPI_RANKS_PER_NODE (read by libcairn_mpi when it builds the group).
  int ranks_per_node = 0;

  // [trace]
  std::string trace_path;  // Chrome/Perfetto trace file written at close, "" = off; CAIRN_TRACE

  // Not a config key: the OS layer to use (tests inject faults through it).
  // nullptr selects os::FileSystem::Default(). Not owned.
  os::FileSystem* fs = nullptr;
  // Not a config key: how the cache is pinned. nullptr = mlock. Not owned.
  os::MemoryPinner* pinner = nullptr;
  // Not a config key: the NUMA layer (tests simulate nodes with os::FakeNuma).
  // nullptr = the real one. Not owned.
  os::Numa* numa = nullptr;
  // Not a config key: the clock of Client::CheckpointDue's model, which
  // times checkpoints, waits and restores and measures the interval (tests
  // inject one). nullptr = std::chrono::steady_clock::now.
  std::chrono::steady_clock::time_point (*now)() = nullptr;

  // Checks invariants (sizes, directories non-empty, ...). Returns kConfig
  // naming the offending key.
  Status Validate() const;
};

// Built-in defaults: scratch_dir = $TMPDIR/cairn-$USER/scratch (or /tmp/...).
CAIRN_EXPORT Config DefaultConfig();

// Defaults, then the TOML file at `path` (nullptr or "" = no file), then the
// CAIRN_* environment variables, then Validate(). Unknown keys, bad types and
// bad values give kConfig with the key's name and the file's line.
CAIRN_EXPORT Result<Config> LoadConfig(const char* path);

// Same, from TOML text (for tests and embedding); `origin` names it in errors.
CAIRN_EXPORT Result<Config> LoadConfigFromString(std::string_view toml, std::string_view origin,
                                                bool apply_environment);

// "512MiB", "4 GiB", "100MB", "4096" -> bytes. kConfig on anything else.
CAIRN_EXPORT Result<uint64_t> ParseSize(std::string_view text);
// 536870912 -> "512 MiB" (binary units, up to 3 significant digits).
CAIRN_EXPORT std::string FormatSize(uint64_t bytes);

}  // namespace cairn
