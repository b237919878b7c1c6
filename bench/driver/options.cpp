// Command line of cairn-bench -> Options. Every problem is a kInvalidArgument
// Status whose message names the option; main() prints it and exits 2.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driver/bench.hpp"
#include "common/parse.hpp"
#include "cairn/config.hpp"

namespace cairn::bench {
namespace {

// A size where 0 is allowed (0 = off).
Result<uint64_t> ParseBytesOrZero(std::string_view opt, const std::string& v) {
  if (v == "0") return uint64_t{0};
  return ParseBytes(opt, v);
}

Result<double> ParseMillis(std::string_view opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double d = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || end != v.c_str() + v.size() || !std::isfinite(d) || d < 0 ||
      d > 3.6e6) {
    return Bad(opt, "expected milliseconds between 0 and 3600000, got '" + v + "'");
  }
  return d;
}

// The config keys that cairn-bench's own options set (MakeConfig, trial.hpp):
// --set of one of them would be overridden, so it is refused, naming the
// option to use.
constexpr std::pair<std::string_view, std::string_view> kKeysWithAnOption[] = {
    {"storage.scratch", "--dir"},          {"storage.persistent", "--persistent"},
    {"host_cache.size", "--host-cache"},   {"host_cache.block_size", "--block-size"},
    {"host_cache.init", "--init"},         {"host_cache.pin", "--pin"},
    {"host_cache.huge_pages", "--huge-pages"}, {"device_cache.size", "--device-cache"},
    {"device_cache.init", "--device-cache-init"}, {"device_cache.map_chunk", "--device-map-chunk"},
    {"checkpoint.changes", "--changes"},   {"checkpoint.max_layers", "--max-layers"},
};

// A TOML value as the user would write it on a command line: booleans and
// numbers as they are, anything else ("zero-copy", "512MiB") as a string.
std::string TomlValue(const std::string& v) {
  if (v == "true" || v == "false") return v;
  char* end = nullptr;
  errno = 0;
  (void)std::strtod(v.c_str(), &end);
  if (!v.empty() && errno == 0 && end == v.c_str() + v.size()) return v;
  std::string q = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

Status AddConfigSet(const std::string& arg, Options& o) {
  const size_t eq = arg.find('=');
  const std::string key = arg.substr(0, eq);
  if (eq == std::string::npos || key.find('.') == std::string::npos || key.front() == '.')
    return Bad("--set", "expected SECTION.KEY=VALUE (a key of docs/config.md), got '" + arg + "'");
  for (const auto& [k, option] : kKeysWithAnOption) {
    if (key == k) return Bad("--set", key + " has an option of its own: use " + std::string(option));
  }
  std::string toml = o.config_toml + key + " = " + TomlValue(arg.substr(eq + 1)) + "\n";
  Result<Config> c = LoadConfigFromString(toml, "--set", /*apply_environment=*/false);
  if (!c.ok()) return Bad("--set", c.status().message());
  o.config_toml = std::move(toml);
  o.config_sets.push_back(arg);
  return Status::Ok();
}

}  // namespace

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kUniform: return "uniform";
    case Workload::kTrace: return "trace";
    case Workload::kRestart: return "restart";
  }
  return "?";
}

bool SyncFsyncDefault(Workload w) { return w == Workload::kRestart; }

const char* UsageText() {
  return R"(usage: cairn-bench [WORKLOAD] [options]

Workloads (HiPC'22 evaluation, see docs/bench.md):
  uniform        forward pass of --count checkpoints of --size, then restore
                 them in reverse order (adjoint pattern; the default)
  trace FILE     same, sizes (and optional per-step compute ms) from FILE
  restart        checkpoint --count versions of one --size region, wait,
                 Latest, Restore and verify (fault-tolerance pattern), then
                 restart in a new process from cold files and verify

Options:
  --count N          checkpoints (uniform 64, restart 4; trace: first N steps)
  --size S           checkpoint/region size (uniform 64MiB, restart 1GiB)
  --interval-ms T    compute time before each checkpoint and restore
                     (uniform/trace 20, restart 200)
  --compute KIND     sleep (default, like the paper) or busy (read the app
                     buffer in a loop)
  --host-cache S     Cairn host cache (default 1GiB)
  --block-size S     Cairn block size (default: Cairn's)
  --init STRATEGY    host cache initialization: eager, memset, lazy,
                     concurrent, sequential or adaptive (the default)
  --pin on|off       pin the host cache once it is touched (default off;
                     eager pins at open)
  --huge-pages on|off  transparent huge pages for the host cache (default on)
  --app-huge-pages on|off  the application buffer in transparent huge pages
                     (default off: small pages, like malloc under THP madvise)
  --memory KIND      where the application buffer lives: host (default),
                     device (cuMemAlloc) or managed (cuMemAllocManaged);
                     device/managed need a CUDA driver ($CAIRN_CUDA_DRIVER or
                     libcuda.so.1). Content is made on the host and copied in
                     with cuMemcpyHtoD; the sync baseline copies to/from a
                     host buffer around its write()/read()
  --device-cache S   Cairn device cache (device_cache_bytes; default 0 = none)
  --device-cache-init direct|incremental
                     how the device cache gets its memory (default incremental)
  --device-map-chunk S  incremental: bytes mapped per step (default: Cairn's)
  --forward-only     uniform/trace: stop after the forward pass (the
                     fast-init figures measure open + forward only)
  --procs P          run P copies of the benchmark at once on this node (each
                     its own process, cache and directory) and report each
                     and their mean (Fig. 6a); default 1
  --dir DIR          working directory (default: fresh under $TMPDIR or /tmp)
  --mode M           async (Cairn), sync (naive baseline) or both (default)
  --repeat R         measured trials per mode (default 1), interleaved
  --no-warmup        skip the untimed warm-up round
  --sync-fsync on|off  fsync each baseline write (default: what a careful
                     naive user does: off for scratch data (uniform, trace),
                     on for checkpoints (restart))
  --sync-other on|off  also run the baseline with the other --sync-fsync
                     value, reported as "sync_other" (default on)
  --persistent DIR   restart: Cairn's persistent tier is DIR/cairn (the
                     baseline copies each version to DIR/sync too); reports
                     the time until the last version is durable there
  --cold-restart on|off  restart: restore each trial's newest version in a
                     new process from cold files (default on)
  --whole-restart on|off  restart: also time the whole restart, spawn to
                     restored, into a buffer the new process has not touched
                     yet, against a raw program that allocates it and reads
                     the same file into it (default off)
  --verify V         sample (default: stamps of every page, a sample of
                     pages in full) or full (every page in full; slower, it
                     eats into the compute interval)
  --changes MODE     restart: Cairn's change detection (checkpoint.changes):
                     full (default: every version stores everything),
                     pages, hash or auto; pages/auto get the application
                     buffer from cairn::Alloc (tracked memory). The
                     baseline always writes everything
  --change-fraction F  restart: the fraction of the pages each version
                     changes, 0 < F <= 1 (default 1: every page). Version 0
                     changes every page. FTI's Table I rates: 0.034, 0.104,
                     0.298 (bench/changes_table1.sh runs the three)
  --change-pattern P which pages change (with F < 1): random-pages (default),
                     runs (64 KiB runs at random 64 KiB-aligned offsets),
                     strided (every round(1/F)-th page, shifted each
                     version) or hot (F of the pages drawn each version from
                     a hot set of 2F of the pages)
  --max-layers N     Cairn's checkpoint.max_layers (default: Cairn's, 10)
  --track-loop on|off  restart: time the application's compute loop (read
                     the buffer, write F of its pages) with page tracking on
                     and off (default on with --changes pages|auto and F < 1)
  --track-loop-intervals N  intervals per --track-loop trial (default 8)
  --track-loop-ms T  compute per --track-loop interval (default --interval-ms)
  --track-loop-baseline hash|full|none  the untracked side: a client with
                     that change detection (no tracker; default hash),
                     checkpointing between intervals like the tracked side,
                     or no client at all
  --settle on|off    restart: after each checkpoint, wait (untimed, outside
                     the interval) until Cairn has the version on the local
                     tier, so that no flush runs during the next interval;
                     default off
  --limits-size S    probe file size for the disk limits (default: the
                     bytes of one forward pass, clamped to [16MiB, 1GiB])
  --json FILE        write the results as JSON
  --set KEY=VALUE    set a Cairn config key that no option here sets (TOML
                     name, e.g. --set checkpoint.capture=zero-copy, --set
                     host_cache.grow=false; docs/config.md); repeatable
  --keep-files       keep the files written under --dir
  --quiet            no progress lines on stderr
  --help             this text

Sizes take B, KiB, MiB, GiB (e.g. 64MiB). Exit: 0 ok, 1 failure or wrong
data, 2 usage error.
)";
}

Result<Options> ParseOptions(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  bool count_given = false, size_given = false, interval_given = false;
  std::optional<bool> fsync_given;
  bool child_given = false;
  bool changes_given = false;

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    // --name=value or --name value
    std::string name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    auto flag = [&](bool& target) -> Status {
      if (has_value) return Bad(name, "takes no value");
      target = true;
      return Status::Ok();
    };
    if (name == "--no-warmup") {
      bool b = false;
      CAIRN_RETURN_IF_ERROR(flag(b));
      o.warmup = false;
      continue;
    }
    if (name == "--keep-files") { CAIRN_RETURN_IF_ERROR(flag(o.keep_files)); continue; }
    if (name == "--quiet") { CAIRN_RETURN_IF_ERROR(flag(o.quiet)); continue; }
    if (name == "--forward-only") { CAIRN_RETURN_IF_ERROR(flag(o.forward_only)); continue; }

    // clang-format off
    static const char* const kWithValue[] = {
        "--count", "--size", "--interval-ms", "--compute", "--host-cache", "--block-size", "--dir",
        "--mode", "--repeat", "--json", "--sync-fsync", "--limits-size", "--verify",
        "--init", "--pin", "--huge-pages", "--app-huge-pages", "--procs", "--memory", "--device-cache",
        "--device-cache-init", "--device-map-chunk", "--sync-other", "--persistent",
        "--cold-restart", "--child-lib", "--child-salt", "--child-version", "--child-dir",
        "--child-report", "--changes", "--change-fraction", "--change-pattern",
        "--max-layers", "--set", "--track-loop", "--track-loop-intervals", "--child-verify-as",
        "--child-touch", "--whole-restart", "--settle", "--track-loop-ms", "--track-loop-baseline"};
    // clang-format on
    bool known = false;
    for (const char* k : kWithValue) known = known || name == k;
    if (!known) return Bad(name, "unknown option (see --help)");
    if (!has_value) {
      if (i + 1 >= argc) return Bad(name, "needs a value");
      value = argv[++i];
    }

    if (name == "--count") {
      CAIRN_ASSIGN_OR_RETURN(o.count, ParseCount(name, value, 1));
      if (o.count > 10'000'000) return Bad(name, "at most 10000000");
      count_given = true;
    } else if (name == "--size") {
      CAIRN_ASSIGN_OR_RETURN(o.size, ParseBytes(name, value));
      size_given = true;
    } else if (name == "--interval-ms") {
      CAIRN_ASSIGN_OR_RETURN(o.interval_ms, ParseMillis(name, value));
      interval_given = true;
    } else if (name == "--compute") {
      if (value == "sleep") o.compute = ComputeKind::kSleep;
      else if (value == "busy") o.compute = ComputeKind::kBusy;
      else return Bad(name, "expected sleep or busy, got '" + value + "'");
    } else if (name == "--host-cache") {
      CAIRN_ASSIGN_OR_RETURN(o.host_cache, ParseBytes(name, value));
    } else if (name == "--block-size") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(name, value));
      o.block_size = b;
    } else if (name == "--dir") {
      if (value.empty()) return Bad(name, "must not be empty");
      o.dir = value;
    } else if (name == "--mode") {
      if (value == "async") { o.run_async = true; o.run_sync = false; }
      else if (value == "sync") { o.run_async = false; o.run_sync = true; }
      else if (value == "both") { o.run_async = true; o.run_sync = true; }
      else return Bad(name, "expected async, sync or both, got '" + value + "'");
    } else if (name == "--repeat") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t r, ParseCount(name, value, 1));
      if (r > 1000) return Bad(name, "at most 1000");
      o.repeat = static_cast<int>(r);
    } else if (name == "--set") {
      CAIRN_RETURN_IF_ERROR(AddConfigSet(value, o));
    } else if (name == "--json") {
      if (value.empty()) return Bad(name, "must not be empty");
      o.json_path = value;
    } else if (name == "--sync-fsync" || name == "--sync-other" || name == "--cold-restart") {
      bool on = false;
      if (value == "on") on = true;
      else if (value != "off") return Bad(name, "expected on or off, got '" + value + "'");
      if (name == "--sync-fsync") fsync_given = on;
      else if (name == "--sync-other") o.sync_other = on;
      else o.cold_restart = on;
    } else if (name == "--child-lib") {  // hidden: restart-child only
      if (value != "cairn" && value != "sync" && value != "raw-direct" && value != "raw-buffered") {
        return Bad(name, "expected cairn, sync, raw-direct or raw-buffered");
      }
      o.child_async = value == "cairn";
      o.child_raw = value.starts_with("raw-");
      o.child_raw_direct = value == "raw-direct";
      child_given = true;
    } else if (name == "--child-touch" || name == "--whole-restart") {
      if (value != "on" && value != "off")
        return Bad(name, "expected on or off, got '" + value + "'");
      (name == "--child-touch" ? o.child_touch : o.whole_restart) = value == "on";
      if (name == "--child-touch") child_given = true;
    } else if (name == "--child-salt") {
      CAIRN_ASSIGN_OR_RETURN(o.child_salt, ParseCount(name, value, 0));
      child_given = true;
    } else if (name == "--child-version") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t v, ParseCount(name, value, 0));
      o.child_version = static_cast<int64_t>(v);
      child_given = true;
    } else if (name == "--child-dir" || name == "--child-report") {
      if (value.empty()) return Bad(name, "must not be empty");
      (name == "--child-dir" ? o.child_lib_dir : o.child_report) = value;
      child_given = true;
    } else if (name == "--child-verify-as") {  // hidden: tests of the verification
      CAIRN_ASSIGN_OR_RETURN(uint64_t v, ParseCount(name, value, 0));
      o.child_verify_as = static_cast<int64_t>(v);
    } else if (name == "--changes") {
      Result<ChangeDetection> c = ParseChangeDetection(value);
      if (!c.ok()) return Bad(name, "expected full, pages, hash or auto, got '" + value + "'");
      o.changes = *c;
      changes_given = true;
    } else if (name == "--change-fraction") {
      char* end = nullptr;
      errno = 0;
      const double f = value.empty() ? NAN : std::strtod(value.c_str(), &end);
      if (value.empty() || errno != 0 || end != value.c_str() + value.size() || !(f > 0) || f > 1) {
        return Bad(name, "expected a fraction 0 < F <= 1, got '" + value +
                             "' (FTI's Table I rates: bench/changes_table1.sh)");
      }
      o.change.fraction = f;
      changes_given = true;
    } else if (name == "--change-pattern") {
      Result<ChangePattern> p = ParseChangePattern(value);
      if (!p.ok()) return Bad(name, p.status().message());
      o.change.pattern = *p;
      changes_given = true;
    } else if (name == "--max-layers") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t n, ParseCount(name, value, 0));
      if (n > 1000) return Bad(name, "at most 1000");
      o.max_layers = static_cast<int>(n);
      changes_given = true;
    } else if (name == "--track-loop-ms") {
      CAIRN_ASSIGN_OR_RETURN(double ms, ParseMillis(name, value));
      o.track_loop_ms = ms;
      changes_given = true;
    } else if (name == "--track-loop-baseline") {
      if (value == "none") o.track_loop_baseline.reset();
      else if (value == "full") o.track_loop_baseline = ChangeDetection::kFull;
      else if (value == "hash") o.track_loop_baseline = ChangeDetection::kHash;
      else return Bad(name, "expected none, full or hash, got '" + value + "'");
      changes_given = true;
    } else if (name == "--settle") {
      if (value == "on") o.settle = true;
      else if (value == "off") o.settle = false;
      else return Bad(name, "expected on or off, got '" + value + "'");
      changes_given = true;
    } else if (name == "--track-loop") {
      if (value == "on") o.track_loop = true;
      else if (value == "off") o.track_loop = false;
      else return Bad(name, "expected on or off, got '" + value + "'");
      changes_given = true;
    } else if (name == "--track-loop-intervals") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t n, ParseCount(name, value, 1));
      if (n > 10000) return Bad(name, "at most 10000");
      o.track_loop_intervals = static_cast<int>(n);
      changes_given = true;
    } else if (name == "--persistent") {
      if (value.empty()) return Bad(name, "must not be empty");
      o.persistent_dir = value;
    } else if (name == "--verify") {
      if (value == "sample") o.verify_full = false;
      else if (value == "full") o.verify_full = true;
      else return Bad(name, "expected sample or full, got '" + value + "'");
    } else if (name == "--init") {
      Result<CacheInit> init = ParseCacheInit(value);
      if (!init.ok()) return Bad(name, init.status().message());
      o.init = *init;
    } else if (name == "--pin" || name == "--huge-pages" || name == "--app-huge-pages") {
      bool& target = name == "--pin" ? o.pin : name == "--huge-pages" ? o.huge_pages : o.app_huge_pages;
      if (value == "on") target = true;
      else if (value == "off") target = false;
      else return Bad(name, "expected on or off, got '" + value + "'");
    } else if (name == "--procs") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t p, ParseCount(name, value, 1));
      if (p > 256) return Bad(name, "at most 256");
      o.procs = static_cast<int>(p);
    } else if (name == "--memory") {
      if (value == "host") o.memory = MemoryKind::kHost;
      else if (value == "device") o.memory = MemoryKind::kDevice;
      else if (value == "managed") o.memory = MemoryKind::kManaged;
      else return Bad(name, "expected host, device or managed, got '" + value + "'");
    } else if (name == "--device-cache") {
      CAIRN_ASSIGN_OR_RETURN(o.device_cache, ParseBytesOrZero(name, value));
    } else if (name == "--device-cache-init") {
      Result<DeviceCacheInit> init = ParseDeviceCacheInit(value);
      if (!init.ok()) return Bad(name, "expected direct or incremental, got '" + value + "'");
      o.device_cache_init = *init;
    } else if (name == "--device-map-chunk") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(name, value));
      o.device_map_chunk = b;
    } else if (name == "--limits-size") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(name, value));
      if (b < (1u << 20)) return Bad(name, "must be at least 1MiB");
      o.limits_bytes = b;
    }
  }

  size_t next = 0;
  if (next < positional.size()) {
    const std::string& w = positional[next++];
    if (w == "uniform") o.workload = Workload::kUniform;
    else if (w == "trace") o.workload = Workload::kTrace;
    else if (w == "restart") o.workload = Workload::kRestart;
    else if (w == "restart-child") {  // hidden: spawned by the restart workload
      o.workload = Workload::kRestart;
      o.restart_child = true;
    }
    else return Bad(w, "unknown workload (expected uniform, trace or restart)");
  }
  if (o.workload == Workload::kTrace) {
    if (next >= positional.size()) return Bad("trace", "needs a FILE");
    o.trace_path = positional[next++];
    if (size_given) return Bad("--size", "does not apply to trace (sizes come from the file)");
  }
  if (next < positional.size()) return Bad(positional[next], "unexpected argument");

  if (o.forward_only && o.workload == Workload::kRestart) {
    return Bad("--forward-only", "applies to uniform and trace only");
  }
  if (child_given != o.restart_child ||
      (o.restart_child && (o.child_lib_dir.empty() || o.child_report.empty()))) {
    return Bad("restart-child", "is spawned by the restart workload, with all its --child-* options");
  }
  if (changes_given && o.workload != Workload::kRestart) {
    return Bad("--changes/--change-*/--max-layers/--track-loop", "apply to restart only");
  }
  if (!o.persistent_dir.empty() && o.workload != Workload::kRestart) {
    return Bad("--persistent", "applies to restart only");
  }
  o.sync_fsync = fsync_given.value_or(SyncFsyncDefault(o.workload));
  if (o.workload == Workload::kRestart) {
    if (!count_given) o.count = 4;
    if (!size_given) o.size = 1ull << 30;
    if (!interval_given) o.interval_ms = 200;
  } else if (o.workload == Workload::kTrace && !count_given) {
    o.count = 0;  // all of the file's steps
  }
  return o;
}

}  // namespace cairn::bench
