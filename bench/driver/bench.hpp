// cairn-bench: the HiPC'22 evaluation (sections V-C to V-E) on this machine.
//
// Shared vocabulary of the benchmark: the parsed command line (Options), the
// per-step plan of a run (Step), the machine limits (Limits) and what one
// trial measured (TrialResult). Each .cpp file owns one concept:
//   options.cpp       command line -> Options (usage errors are values)
//   plan.cpp          Options (+ trace file) -> std::vector<Step>
//   files.cpp         POSIX helpers: errno statuses, scratch dirs, buffers
//   memory.cpp        BenchBuffer: the application buffer in host, device or
//                     managed memory (--memory), its host view, device limits
//   pattern.cpp       checkpoint content: fill, stamp per step, verify
//   limits.cpp        memcpy / write / O_DIRECT write / read bandwidth
//   sync_baseline.cpp the naive synchronous library the paper compares against
//   workloads.cpp     adjoint (uniform, trace) trials
//   restart.cpp       restart trials
//   restart_child.cpp the restart in a new process (cold page cache)
//   json.cpp          a small JSON value with a strict writer
//   report.cpp        medians, stdout table, JSON document
//   main.cpp          dispatch: limits, warm-up, interleaved trials, exit code
//
// Nothing here calls exit(): errors travel as cairn::Status up to main(), which
// maps them to exit codes (0 ok, 1 a Cairn/IO failure or wrong data, 2 usage).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/cairn.hpp"
#include "cairn/status.hpp"
#include "driver/changed_pages.hpp"
#include "common/timing.hpp"

namespace cairn::bench {

enum class Workload { kUniform, kTrace, kRestart };
enum class ComputeKind { kSleep, kBusy };

struct Options {
  Workload workload = Workload::kUniform;
  std::string trace_path;           // trace only
  uint64_t count = 64;              // restart: 4 unless given
  uint64_t size = 64ull << 20;      // restart: 1 GiB unless given
  double interval_ms = 20;          // restart: 200 unless given
  ComputeKind compute = ComputeKind::kSleep;
  uint64_t host_cache = 1ull << 30;
  CacheInit init = CacheInit::kAdaptive;  // --init
  bool pin = false;                       // --pin
  bool huge_pages = true;                 // --huge-pages
  bool app_huge_pages = false;            // --app-huge-pages: the application buffer
  int procs = 1;                          // --procs: processes on the node
  bool forward_only = false;              // --forward-only: no backward pass (uniform, trace)
  MemoryKind memory = MemoryKind::kHost;  // --memory: where the application buffer lives
  uint64_t device_cache = 0;              // --device-cache: Cairn device_cache_bytes (0 = none)
  DeviceCacheInit device_cache_init = DeviceCacheInit::kIncremental;  // --device-cache-init
  std::optional<uint64_t> device_map_chunk;  // --device-map-chunk; unset: Cairn's
  std::optional<uint64_t> block_size;  // unset: Cairn's default
  std::string dir;                  // "" = fresh directory under $TMPDIR or /tmp
  bool run_async = true;
  bool run_sync = true;
  int repeat = 1;
  bool warmup = true;
  std::string json_path;            // "" = no JSON file
  // --set KEY=VALUE, in order: Cairn config keys the bench has no option for,
  // as given and as the TOML (one dotted key per line) that MakeConfig starts
  // from instead of the defaults. Validated by ParseOptions.
  std::vector<std::string> config_sets;
  std::string config_toml;
  bool keep_files = false;
  bool quiet = false;
  // The baseline's fsync after each write. Resolved by ParseOptions: --sync-fsync
  // if given, else what a careful naive user does for the workload's data:
  // off for scratch data (uniform/trace: history steps), on for checkpoints
  // (restart). See SyncFsyncDefault().
  bool sync_fsync = false;
  bool sync_other = true;           // --sync-other: also run the other fsync variant
  std::string persistent_dir;       // restart --persistent: Cairn's persistent tier (and
                                    // the baseline's copy), "" = none
  bool cold_restart = true;         // restart --cold-restart: the new-process restart
  // restart --whole-restart: also the restart as a program lives it, from
  // the spawn to restored data in memory nobody touched yet, against a raw
  // program that allocates, reads and so touches the same bytes.
  bool whole_restart = false;
  bool verify_full = false;         // compare every restored page in full
  // restart (docs/bench.md, "Changed data"): Cairn's change
  // detection (the baseline always writes everything), which pages each
  // version changes, and Cairn's max_layers (unset: Cairn's default).
  ChangeDetection changes = ChangeDetection::kFull;  // --changes
  ChangeSpec change;                                 // --change-fraction, --change-pattern
  std::optional<int> max_layers;                     // --max-layers
  // --track-loop: time the application's compute loop with tracking on and
  // off (default on with --changes pages|auto and a fraction < 1).
  std::optional<bool> track_loop;
  int track_loop_intervals = 8;                      // --track-loop-intervals
  std::optional<double> track_loop_ms;               // --track-loop-ms; unset: --interval-ms
  // --track-loop-baseline: the untracked side runs under a client with this
  // change detection (hash, the default, or full: no tracker) or with no
  // client (unset: none). docs/bench.md says why hash is the default.
  std::optional<ChangeDetection> track_loop_baseline = ChangeDetection::kHash;
  // --settle: Cairn waits (untimed) until each version is local before the
  // next interval, so each version can layer on the one before it (a base
  // must be committed) whatever the disk's speed: chains of a known depth.
  bool settle = false;
  std::optional<uint64_t> limits_bytes;  // unset: derived from the workload
  bool help = false;                // --help was given: print usage, exit 0
  bool help_markdown = false;       // --help-markdown: print docs/bench.md's options table
  // The hidden sub-command "restart-child" (spawned by ColdRestartTrial):
  // --child-lib cairn|sync, --child-salt, --child-version, --child-report.
  bool restart_child = false;
  bool child_async = true;
  bool child_raw = false;  // --child-lib raw-direct|raw-buffered: no library
  bool child_raw_direct = false;
  bool child_touch = true;  // --child-touch: touch the buffer before "started"
  uint64_t child_salt = 0;
  int64_t child_version = -1;
  std::string child_lib_dir;        // the library's directory (DIR/cairn or DIR/sync)
  std::string child_report;         // where the child writes its timings
  std::optional<int64_t> child_verify_as;  // --child-verify-as V: expect V's content (tests)
};

// --changes pages|auto: the application buffer is tracked memory (cairn::Alloc).
inline bool UsesTrackedMemory(const Options& o) {
  return o.workload == Workload::kRestart &&
         (o.changes == ChangeDetection::kPages || o.changes == ChangeDetection::kAuto);
}
// Whether the run times the compute loop with tracking on and off (by
// default with tracked host memory and a fraction < 1; asked for with
// device memory, it fails with a clear error).
inline bool TrackLoopOn(const Options& o) {
  const bool by_default = UsesTrackedMemory(o) && !o.change.all() && o.memory == MemoryKind::kHost;
  return o.track_loop.value_or(by_default) && !o.restart_child;
}

// Why parsing stopped; main() prints the message and exits 2.
// Returns kInvalidArgument for every usage error.
Result<Options> ParseOptions(int argc, char** argv);
const char* UsageText();
// docs/bench.md's options table, from the same rows as the usage.
std::string OptionsMarkdown();
const char* WorkloadName(Workload w);
// The fair default of --sync-fsync for a workload: false for scratch data
// (uniform, trace), true for checkpoints (restart).
bool SyncFsyncDefault(Workload w);

// One step of an adjoint run: checkpoint size and the compute time before it
// (and before the matching restore in the backward pass).
struct Step {
  uint64_t bytes = 0;
  double compute_ms = 0;
};

// uniform: count x {size, interval}; trace: the file's lines (kInvalidArgument
// names the file and line on a bad line); restart: count x {size, interval}.
Result<std::vector<Step>> BuildPlan(const Options& options);

// Largest step, total bytes of one forward pass.
uint64_t MaxBytes(const std::vector<Step>& plan);
uint64_t TotalBytes(const std::vector<Step>& plan);

// Machine limits measured in the same run, before the trials.
struct Limits {
  // memcpy like a capture: `memcpy_threads` threads (the application's and
  // Cairn's copy helpers) into pages of the cache's kind (huge or 4 KiB).
  double memcpy_gbps = 0;
  int memcpy_threads = 1;
  bool memcpy_huge_pages = false;
  double memcpy_single_thread_gbps = 0;     // one thread, same page kind
  double memcpy_single_thread_4k_gbps = 0;  // one thread into 4 KiB pages
  uint64_t memcpy_bytes = 0;
  double write_gbps = 0;            // buffered write + fsync
  double write_nofsync_gbps = 0;    // buffered write, before the fsync
  std::optional<double> direct_write_gbps;  // O_DIRECT write + fsync; unset: unsupported
  double read_gbps = 0;
  std::string read_method;          // "direct" or "buffered"
  // restart with the cold restart: the fastest raw read (O_DIRECT or
  // buffered after dropping its pages) of the files the new processes read.
  std::optional<double> cold_read_gbps;
  uint64_t file_bytes = 0;          // size of the probe file
  int samples = 0;                  // median of this many runs each
  // --memory device|managed only: cuMemcpy bandwidths (memory.hpp).
  std::optional<double> htod_gbps, dtoh_gbps, dtod_gbps;
  uint64_t device_copy_bytes = 0;
};

// The probe files go in `dir` and are deleted. `app` is an already-touched
// buffer of at least `copy_bytes` used as memcpy source; `threads` and
// `huge_pages` are those of Cairn's captures (CaptureThreads, --huge-pages).
Result<Limits> MeasureLimits(const std::string& dir, uint64_t file_bytes,
                             const uint8_t* app, uint64_t copy_bytes, int threads,
                             bool huge_pages, bool quiet);
// Threads that copy in a capture: the application's plus Cairn's helpers
// (host_cache.copy_threads; -1 = min(cores - 1, 3), as the pipeline does).
int CaptureThreads(const Config& config);

// What content verification found. A trial with mismatches is a failure.
struct VerifyStats {
  uint64_t checks = 0;          // restores verified
  uint64_t stamp_words = 0;     // stamped words compared
  uint64_t bytes_compared = 0;  // bytes compared in full
  uint64_t mismatches = 0;      // restores whose content was wrong
  std::vector<std::string> errors;  // the first few, for the report
  void Fail(std::string what);
};

struct PhaseResult {
  double blocking_s = 0;  // sum of the time inside Push/Pop/Checkpoint/Restore calls
  double wall_s = 0;      // the whole phase, compute included
  double max_op_s = 0;    // slowest single call
  uint64_t bytes = 0;
  uint64_t ops = 0;
  uint64_t compute_overruns = 0;  // steps whose stamping/verification outlasted the interval
};

// The new-process restart of a restart trial (restart_child.cpp): times are
// seconds from the spawn of the child (restored_s: until Restore returned),
// or of the step inside the child.
struct ColdRestart {
  double start_s = 0;      // spawn -> the child's main() began its work
  double open_s = 0;       // Client::Open / nothing much (baseline)
  double latest_s = 0;     // Latest / list the directory
  double restore_s = 0;    // Restore / open + read() the file
  double verify_s = 0;     // full comparison of the restored region
  double restored_s = 0;   // spawn -> restore returned: the restart as a user sees it
  double process_s = 0;    // spawn -> exit (verification, Close, exit included)
  int64_t version = -1;    // what the child's Latest found
  std::string cache_drop;  // how the files' pages were dropped before the spawn
  uint64_t resident_bytes = 0;  // of the files, still in the page cache after the drop
  uint64_t file_bytes = 0;      // the data file read (the newest version's)
  double raw_read_gbps = 0;     // the fastest raw cold read of that file
  std::string raw_read_method;  // "direct" or "buffered"
  // --whole-restart: spawn -> restored, for Cairn into an untouched buffer,
  // and for the faster raw program (whole_raw_method) into one; 0 when off.
  double whole_s = 0;
  double whole_raw_s = 0;
  std::string whole_raw_method;
};

struct TrialResult {
  bool async = true;
  bool sync_fsync = false;   // sync: the baseline fsynced its writes
  Status status;             // first failing call; ok() when none failed
  double open_s = 0;         // Client::Open / baseline directory creation
  double history_open_s = 0; // Client::OpenHistory (adjoint, async)
  double close_s = 0;        // History::Close + Client::Close / nothing much
  PhaseResult forward;       // restart: the checkpoints
  PhaseResult backward;      // restart: Latest + Restore
  std::optional<Stats> stats;  // async: client->GetStats() before Close
  double sync_write_s = 0;   // sync: time inside write()+fsync() only
  // restart only
  std::vector<double> checkpoint_s;  // blocking time of each Checkpoint call
  double wait_s = 0, latest_s = 0, restore_s = 0;
  int64_t latest_version = -1;
  std::optional<double> persistent_durable_s;  // --persistent: last Checkpoint -> durable there
  std::optional<ColdRestart> cold;             // --cold-restart on
  // Per version (restart): bytes the bench changed (changed pages x 4 KiB),
  // payload Cairn stored (ChangeStats::bytes_stored; the size when the
  // version was full or changes = full; the baseline: the size), whether
  // Cairn layered it, and the application's stamping time (its writes, with
  // tracking faults when tracked).
  std::vector<uint64_t> changed_bytes, stored_bytes;
  std::vector<bool> layered;
  std::vector<double> app_write_s;
  // The version files still in the local directory at the end (Cairn:
  // "<name>/v<N>.cairn"; metadata = size - stored payload), with Cairn's
  // version record (docs/format.md 4.3) when the file could be read.
  struct VersionFile {
    int64_t version = -1;
    uint64_t bytes = 0;
    int64_t depth = -1;         // layers below it when written; -1: unknown
    int64_t base_version = -1;  // the version it is layered on; -1: full
  };
  std::vector<VersionFile> version_files;
  VerifyStats verify;
};

class BenchBuffer;  // memory.hpp

// Runs one trial. `app` has MaxBytes(plan) (adjoint) or options.size
// (restart) touched bytes, in options.memory. `dir` is the run's directory; the trial uses
// dir/cairn (async) or dir/sync (sync), emptied first. The returned result's
// status says whether every call succeeded; content errors are in verify.
TrialResult RunAdjointTrial(const Options& options, const std::vector<Step>& plan, bool async,
                            const std::string& dir, BenchBuffer& app);
TrialResult RunRestartTrial(const Options& options, bool async, const std::string& dir,
                            BenchBuffer& app);

// The restart's new process (restart_child.cpp). ColdRestartTrial drops the
// page cache of the files under `lib_dirs`, spawns this binary as
// "cairn-bench restart-child ..." to open `lib_dir`, find the newest version,
// restore it into fresh memory and verify it (pattern.hpp: MakeTag(salt, version)), and reads its
// report; errors (a failed or wrong restore) go to r.status / r.verify.
void ColdRestartTrial(const Options& options, bool async, const std::string& lib_dir,
                      const std::vector<std::string>& lib_dirs, int64_t version, uint64_t salt,
                      TrialResult& r);
// The hidden sub-command: the child's side. Returns the exit code.
int RunRestartChild(const Options& options);

// --procs (procs.cpp): runs options.procs children and merges their reports.
int RunProcesses(const Options& options, int argc, char** argv);
// In a child of RunProcesses: blocks until every sibling is ready; no-op otherwise.
void WaitAtBarrier();

}  // namespace cairn::bench
