// cairn-bench's option table (option_table.hpp): one row per option, with
// how its value is parsed and its usage and docs text.
#include "driver/option_table.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "cairn/config.hpp"
#include "common/parse.hpp"

namespace cairn::bench {
namespace {

using Value = const std::string&;

// A size where 0 is allowed (0 = off).
Result<uint64_t> ParseBytesOrZero(std::string_view opt, Value v) {
  if (v == "0") return uint64_t{0};
  return ParseBytes(opt, v);
}

Result<double> ParseMillis(std::string_view opt, Value v) {
  char* end = nullptr;
  errno = 0;
  const double d = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || end != v.c_str() + v.size() || !std::isfinite(d) || d < 0 ||
      d > 3.6e6) {
    return Bad(opt, "expected milliseconds between 0 and 3600000, got '" + v + "'");
  }
  return d;
}

Result<bool> OnOff(std::string_view opt, Value v) {
  if (v == "on") return true;
  if (v == "off") return false;
  return Bad(opt, "expected on or off, got '" + v + "'");
}

// One of the values in `choices` (name, value), or an error listing them.
template <typename T, size_t K>
Status Pick(std::string_view opt, Value v, const std::pair<std::string_view, T> (&choices)[K],
            T* out) {
  std::string names;
  for (size_t k = 0; k < K; ++k) {
    if (v == choices[k].first) {
      *out = choices[k].second;
      return Status::Ok();
    }
    names += std::string(k == 0 ? "" : k + 1 == K ? " or " : ", ") + std::string(choices[k].first);
  }
  return Bad(opt, "expected " + names + ", got '" + v + "'");
}

Status NotEmpty(std::string_view opt, Value v, std::string* out) {
  if (v.empty()) return Bad(opt, "must not be empty");
  *out = v;
  return Status::Ok();
}

// The config keys that cairn-bench's own options set (MakeConfig, trial.hpp):
// --set of one of them would be overridden, so it is refused, naming the
// option to use.
constexpr std::pair<std::string_view, std::string_view> kKeysWithAnOption[] = {
    {"storage.scratch", "--dir"},
    {"storage.persistent", "--persistent"},
    {"host_cache.size", "--host-cache"},
    {"host_cache.block_size", "--block-size"},
    {"host_cache.init", "--init"},
    {"host_cache.pin", "--pin"},
    {"host_cache.huge_pages", "--huge-pages"},
    {"device_cache.size", "--device-cache"},
    {"device_cache.init", "--device-cache-init"},
    {"device_cache.map_chunk", "--device-map-chunk"},
    {"checkpoint.changes", "--changes"},
    {"checkpoint.max_layers", "--max-layers"},
};

// A TOML value as the user would write it on a command line: booleans and
// numbers as they are, anything else ("zero-copy", "512MiB") as a string.
std::string TomlValue(Value v) {
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

Status AddConfigSet(Value arg, Options& o) {
  const size_t eq = arg.find('=');
  const std::string key = arg.substr(0, eq);
  if (eq == std::string::npos || key.find('.') == std::string::npos || key.front() == '.')
    return Bad("--set", "expected SECTION.KEY=VALUE (a key of docs/config.md), got '" + arg + "'");
  for (const auto& [k, option] : kKeysWithAnOption) {
    if (key == k)
      return Bad("--set", key + " has an option of its own: use " + std::string(option));
  }
  std::string toml = o.config_toml + key + " = " + TomlValue(arg.substr(eq + 1)) + "\n";
  Result<Config> c = LoadConfigFromString(toml, "--set", /*apply_environment=*/false);
  if (!c.ok()) return Bad("--set", c.status().message());
  o.config_toml = std::move(toml);
  o.config_sets.push_back(arg);
  return Status::Ok();
}

// A parse function per option (the table's last column).
using P = ParseState&;
using N = std::string_view;

// An on|off option that sets a flag of the Options.
template <bool Options::*kFlag>
Status OnOffOption(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.*kFlag, OnOff(n, v));
  return Status::Ok();
}

Status Count(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.count, ParseCount(n, v, 1));
  if (p.o.count > 10'000'000) return Bad(n, "at most 10000000");
  p.count_given = true;
  return Status::Ok();
}
Status Size(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.size, ParseBytes(n, v));
  p.size_given = true;
  return Status::Ok();
}
Status Interval(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.interval_ms, ParseMillis(n, v));
  p.interval_given = true;
  return Status::Ok();
}
Status Compute(P p, N n, Value v) {
  static constexpr std::pair<std::string_view, ComputeKind> kChoices[] = {
      {"sleep", ComputeKind::kSleep}, {"busy", ComputeKind::kBusy}};
  return Pick(n, v, kChoices, &p.o.compute);
}
Status HostCache(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.host_cache, ParseBytes(n, v));
  return Status::Ok();
}
Status BlockSize(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(n, v));
  p.o.block_size = b;
  return Status::Ok();
}
Status Init(P p, N n, Value v) {
  Result<CacheInit> init = ParseCacheInit(v);
  if (!init.ok()) return Bad(n, init.status().message());
  p.o.init = *init;
  return Status::Ok();
}
Status Memory(P p, N n, Value v) {
  static constexpr std::pair<std::string_view, MemoryKind> kChoices[] = {
      {"host", MemoryKind::kHost},
      {"device", MemoryKind::kDevice},
      {"managed", MemoryKind::kManaged}};
  return Pick(n, v, kChoices, &p.o.memory);
}
Status DeviceCache(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.device_cache, ParseBytesOrZero(n, v));
  return Status::Ok();
}
Status DeviceCacheInit(P p, N n, Value v) {
  Result<cairn::DeviceCacheInit> init = ParseDeviceCacheInit(v);
  if (!init.ok()) return Bad(n, "expected direct or incremental, got '" + v + "'");
  p.o.device_cache_init = *init;
  return Status::Ok();
}
Status DeviceMapChunk(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(n, v));
  p.o.device_map_chunk = b;
  return Status::Ok();
}
Status ForwardOnly(P p, N, Value) {
  p.o.forward_only = true;
  return Status::Ok();
}
Status Procs(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t k, ParseCount(n, v, 1));
  if (k > 256) return Bad(n, "at most 256");
  p.o.procs = static_cast<int>(k);
  return Status::Ok();
}
Status Dir(P p, N n, Value v) { return NotEmpty(n, v, &p.o.dir); }
Status Mode(P p, N n, Value v) {
  if (v != "async" && v != "sync" && v != "both")
    return Bad(n, "expected async, sync or both, got '" + v + "'");
  p.o.run_async = v != "sync";
  p.o.run_sync = v != "async";
  return Status::Ok();
}
Status Repeat(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t r, ParseCount(n, v, 1));
  if (r > 1000) return Bad(n, "at most 1000");
  p.o.repeat = static_cast<int>(r);
  return Status::Ok();
}
Status NoWarmup(P p, N, Value) {
  p.o.warmup = false;
  return Status::Ok();
}
Status SyncFsync(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(bool on, OnOff(n, v));
  p.fsync_given = on;
  return Status::Ok();
}
Status Persistent(P p, N n, Value v) { return NotEmpty(n, v, &p.o.persistent_dir); }
Status Verify(P p, N n, Value v) {
  if (v != "sample" && v != "full") return Bad(n, "expected sample or full, got '" + v + "'");
  p.o.verify_full = v == "full";
  return Status::Ok();
}
// Changed data (restart only: each says so in changes_given).
Status Changes(P p, N n, Value v) {
  Result<ChangeDetection> c = ParseChangeDetection(v);
  if (!c.ok()) return Bad(n, "expected full, pages, hash or auto, got '" + v + "'");
  p.o.changes = *c;
  p.changes_given = true;
  return Status::Ok();
}
Status ChangeFraction(P p, N n, Value v) {
  char* end = nullptr;
  errno = 0;
  const double f = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || end != v.c_str() + v.size() || !(f > 0) || f > 1) {
    return Bad(n, "expected a fraction 0 < F <= 1, got '" + v +
                      "' (FTI's Table I rates: bench/changes_table1.sh)");
  }
  p.o.change.fraction = f;
  p.changes_given = true;
  return Status::Ok();
}
Status ChangePatternOpt(P p, N n, Value v) {
  Result<ChangePattern> pattern = ParseChangePattern(v);
  if (!pattern.ok()) return Bad(n, pattern.status().message());
  p.o.change.pattern = *pattern;
  p.changes_given = true;
  return Status::Ok();
}
Status MaxLayers(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t k, ParseCount(n, v, 0));
  if (k > 1000) return Bad(n, "at most 1000");
  p.o.max_layers = static_cast<int>(k);
  p.changes_given = true;
  return Status::Ok();
}
Status Settle(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.settle, OnOff(n, v));
  p.changes_given = true;
  return Status::Ok();
}
Status TrackLoop(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(bool on, OnOff(n, v));
  p.o.track_loop = on;
  p.changes_given = true;
  return Status::Ok();
}
Status TrackLoopIntervals(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t k, ParseCount(n, v, 1));
  if (k > 10000) return Bad(n, "at most 10000");
  p.o.track_loop_intervals = static_cast<int>(k);
  p.changes_given = true;
  return Status::Ok();
}
Status TrackLoopMs(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(double ms, ParseMillis(n, v));
  p.o.track_loop_ms = ms;
  p.changes_given = true;
  return Status::Ok();
}
Status TrackLoopBaseline(P p, N n, Value v) {
  static constexpr std::pair<std::string_view, std::optional<ChangeDetection>> kChoices[] = {
      {"none", std::nullopt}, {"full", ChangeDetection::kFull}, {"hash", ChangeDetection::kHash}};
  p.changes_given = true;
  return Pick(n, v, kChoices, &p.o.track_loop_baseline);
}
// Output and the rest.
Status LimitsSize(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(n, v));
  if (b < (1u << 20)) return Bad(n, "must be at least 1MiB");
  p.o.limits_bytes = b;
  return Status::Ok();
}
Status Json(P p, N n, Value v) { return NotEmpty(n, v, &p.o.json_path); }
Status Set(P p, N, Value v) { return AddConfigSet(v, p.o); }
Status KeepFiles(P p, N, Value) {
  p.o.keep_files = true;
  return Status::Ok();
}
Status Quiet(P p, N, Value) {
  p.o.quiet = true;
  return Status::Ok();
}
Status Help(P p, N, Value) {
  p.o.help = true;
  return Status::Ok();
}
Status HelpMarkdown(P p, N, Value) {
  p.o.help_markdown = true;
  return Status::Ok();
}
// Hidden: the restart workload's child process (restart-child).
Status ChildLib(P p, N n, Value v) {
  if (v != "cairn" && v != "sync" && v != "raw-direct" && v != "raw-buffered")
    return Bad(n, "expected cairn, sync, raw-direct or raw-buffered");
  p.o.child_async = v == "cairn";
  p.o.child_raw = v.starts_with("raw-");
  p.o.child_raw_direct = v == "raw-direct";
  p.child_given = true;
  return Status::Ok();
}
Status ChildTouch(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.child_touch, OnOff(n, v));
  p.child_given = true;
  return Status::Ok();
}
Status ChildSalt(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(p.o.child_salt, ParseCount(n, v, 0));
  p.child_given = true;
  return Status::Ok();
}
Status ChildVersion(P p, N n, Value v) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t k, ParseCount(n, v, 0));
  p.o.child_version = static_cast<int64_t>(k);
  p.child_given = true;
  return Status::Ok();
}
Status ChildDir(P p, N n, Value v) {
  p.child_given = true;
  return NotEmpty(n, v, &p.o.child_lib_dir);
}
Status ChildReport(P p, N n, Value v) {
  p.child_given = true;
  return NotEmpty(n, v, &p.o.child_report);
}
Status ChildVerifyAs(P p, N n, Value v) {  // tests of the verification
  CAIRN_ASSIGN_OR_RETURN(uint64_t k, ParseCount(n, v, 0));
  p.o.child_verify_as = static_cast<int64_t>(k);
  return Status::Ok();
}

// clang-format off
constexpr OptionRow kOptions[] = {
  {"--count", "N", "64 (restart 4)",
   "checkpoints (trace: the first N steps)",
   "checkpoints; for `trace` the first N steps (default all)", Count},
  {"--size", "S", "64MiB (restart 1GiB)",
   "checkpoint/region size; not for trace",
   "checkpoint / region size; not for `trace`", Size},
  {"--interval-ms", "T", "20 (restart 200)",
   "compute time before each checkpoint and restore",
   "compute time before each checkpoint and restore (fractions allowed)", Interval},
  {"--compute", "sleep|busy", "sleep",
   "how compute is emulated: sleep (like the paper) or busy (read the app buffer in a loop)",
   nullptr, Compute},
  {"--host-cache", "S", "1GiB", "Cairn's host cache (host_cache.size)", nullptr, HostCache},
  {"--block-size", "S", "Cairn's (4 MiB)", "Cairn's block size (host_cache.block_size)", nullptr,
   BlockSize},
  {"--init", "STRATEGY", "adaptive",
   "host cache initialization (host_cache.init): eager, memset, lazy, concurrent, sequential or "
   "adaptive", nullptr, Init},
  {"--pin", "on|off", "off", "pin the host cache once it is touched (host_cache.pin; eager pins "
   "at open)", nullptr, OnOffOption<&Options::pin>},
  {"--huge-pages", "on|off", "on", "transparent huge pages for the host cache "
   "(host_cache.huge_pages)", nullptr, OnOffOption<&Options::huge_pages>},
  {"--app-huge-pages", "on|off", "off",
   "the application buffer in transparent huge pages; off: small pages, like malloc under THP "
   "madvise",
   "the application buffer in transparent huge pages (`madvise(MADV_HUGEPAGE)`); off: small "
   "pages, what `malloc` gets where THP is `madvise`. A restore reads `O_DIRECT` straight into "
   "huge-page memory and through a huge-page staging buffer + memcpy into small pages "
   "(docs/design.md, \"Restore from files\")", OnOffOption<&Options::app_huge_pages>},
  {"--memory", "host|device|managed", "host",
   "where the application buffer lives: host memory, device memory (cuMemAlloc) or managed "
   "memory (cuMemAllocManaged); device/managed need a CUDA driver ($CAIRN_CUDA_DRIVER or "
   "libcuda.so.1). Content is made on the host and copied in with cuMemcpyHtoD; the sync "
   "baseline copies to/from a host buffer around its write()/read()",
   "where the application buffer lives: host memory, device memory (`cuMemAlloc`) or managed "
   "memory (`cuMemAllocManaged`); see \"Application memory\"", Memory},
  {"--device-cache", "S", "0",
   "Cairn's device cache (device_cache.size): GPU memory that captures of device/managed regions "
   "land in first, drained to the host cache in the background; 0 = none", nullptr, DeviceCache},
  {"--device-cache-init", "direct|incremental", "incremental",
   "how the device cache gets its memory (device_cache.init): one cuMemAlloc of the whole cache "
   "at open, or reserve + map chunk by chunk in the background", nullptr, DeviceCacheInit},
  {"--device-map-chunk", "S", "Cairn's (1 GiB)",
   "incremental device cache: bytes mapped per step (device_cache.map_chunk)", nullptr,
   DeviceMapChunk},
  {"--forward-only", nullptr, "",
   "uniform/trace: stop after the forward pass (the steps left are dropped at close); the "
   "fast-init figures measure only open + forward", nullptr, ForwardOnly},
  {"--procs", "P", "1",
   "run P copies at once (separate processes, each its cache and directory), their trials "
   "started together by a barrier; prints each table and writes {\"procs\": P, \"processes\": "
   "[...]} as JSON",
   "run P copies at once (separate processes, each its cache and directory), their trials "
   "started together by a barrier; prints each table and writes `{\"procs\": P, \"processes\": "
   "[...]}` as JSON", Procs},
  {"--dir", "DIR", "fresh `cairn-bench-XXXXXX` under `$TMPDIR` or `/tmp`",
   "working directory: Cairn's scratch is DIR/cairn, the baseline's files DIR/sync, the limit "
   "probes DIR/limits-*.probe",
   "working directory: Cairn's scratch is `DIR/cairn`, the baseline's files `DIR/sync`, the "
   "limit probes `DIR/limits-*.probe`", Dir},
  {"--mode", "async|sync|both", "both", "which libraries to run: async (Cairn), sync (the naive "
   "baseline) or both", nullptr, Mode},
  {"--repeat", "R", "1",
   "measured trials per mode; with both, interleaved async, sync, async, sync, ...",
   "measured trials per mode; with `both`, interleaved async, sync, async, sync, ...", Repeat},
  {"--no-warmup", nullptr, "",
   "skip the untimed warm-up round (one trial per mode, results discarded; failures still count)",
   nullptr, NoWarmup},
  {"--sync-fsync", "on|off", "off for `uniform`/`trace`, on for `restart`",
   "fsync each baseline write (what a careful naive user does: off for scratch data, on "
   "for checkpoints)",
   "fsync each baseline write (see \"The sync baseline\")", SyncFsync},
  {"--sync-other", "on|off", "on",
   "also run the baseline with the other --sync-fsync value, reported as sync_other",
   "also run the baseline with the other `--sync-fsync` value (`sync_other`)",
   OnOffOption<&Options::sync_other>},
  {"--persistent", "DIR", "none",
   "restart only: Cairn's persistent tier is DIR/cairn, the baseline copies each version to "
   "DIR/sync; reports the time until the last version is durable there",
   "`restart` only: Cairn's persistent tier is `DIR/cairn`, the baseline copies each version to "
   "`DIR/sync`; adds `restart.persistent_durable_s`", Persistent},
  {"--cold-restart", "on|off", "on",
   "restart: after each trial, restore the newest version in a new process from cold files",
   "`restart`: after each trial, restore the newest version in a new process from cold files",
   OnOffOption<&Options::cold_restart>},
  {"--whole-restart", "on|off", "off",
   "restart: after each cold restart, also time the whole restart, spawn to restored, into a "
   "buffer the new process has not touched yet, against a raw program that allocates it and "
   "reads the same file into it",
   "`restart`: after each cold restart, also time the whole restart into an untouched buffer "
   "against a raw program (`restart.whole_*`)", OnOffOption<&Options::whole_restart>},
  {"--verify", "sample|full", "sample",
   "verification depth of adjoint restores: sample (stamps of every page, a sample of pages in "
   "full) or full (every page in full; slower, it eats into the compute interval)",
   "verification depth of adjoint restores (see above)", Verify},
  {"--changes", "full|pages|hash|auto", "full",
   "restart: Cairn's change detection (checkpoint.changes); pages/auto get the application "
   "buffer from cairn::Alloc (tracked memory). The baseline always writes everything",
   "`restart` only: Cairn's change detection; see \"Changed data\" under `restart`", Changes},
  {"--change-fraction", "F", "1",
   "restart: the fraction of the pages each version changes, 0 < F <= 1. "
   "Version 0 changes every page. FTI's Table I rates: 0.034, 0.104, 0.298 "
   "(bench/changes_table1.sh runs the three)",
   "`restart` only: the fraction of the pages each version changes; see \"Changed data\"",
   ChangeFraction},
  {"--change-pattern", "P", "random-pages",
   "which pages change (with F < 1): random-pages, runs (64 KiB runs at random 64 KiB-aligned "
   "offsets), strided (every round(1/F)-th page, shifted each version) or hot (F of the pages "
   "drawn each version from a hot set of 2F of the pages)",
   "`restart` only: which pages change; see \"Changed data\"", ChangePatternOpt},
  {"--max-layers", "N", "Cairn's (10)", "Cairn's checkpoint.max_layers",
   "`restart` only: Cairn's `checkpoint.max_layers`", MaxLayers},
  {"--settle", "on|off", "off",
   "restart: after each checkpoint, wait (untimed, outside the interval) until Cairn has the "
   "version on the local tier, so that no flush runs during the next interval",
   "`restart` only: wait for each version's local commit between intervals; see \"Changed "
   "data\"", Settle},
  {"--track-loop", "on|off", "on with pages|auto and F < 1",
   "restart: time the application's compute loop (read the buffer, write F of its pages) with "
   "page tracking on and off",
   "`restart` only: time the compute loop with page tracking on and off; see \"Changed data\"",
   TrackLoop},
  {"--track-loop-intervals", "N", "8", "intervals per --track-loop trial",
   "`restart` only: intervals per `--track-loop` trial", TrackLoopIntervals},
  {"--track-loop-ms", "T", "`--interval-ms`", "compute per --track-loop interval",
   "`restart` only: compute per `--track-loop` interval", TrackLoopMs},
  {"--track-loop-baseline", "hash|full|none", "hash",
   "the untracked side: a client with that change detection (no tracker), checkpointing between "
   "intervals like the tracked side, or no client at all",
   "`restart` only: the untracked side of `--track-loop`; see \"Changed data\"",
   TrackLoopBaseline},
  {"--limits-size", "S", "bytes of one forward pass, clamped to [16MiB, 1GiB]",
   "probe file size for the disk limits", "probe file size of the disk limits", LimitsSize},
  {"--json", "FILE", "", "write the results as JSON (to FILE.tmp, then renamed)",
   "write the results as JSON (written to `FILE.tmp`, then renamed)", Json},
  {"--set", "KEY=VALUE", "",
   "set a Cairn config key that no option here sets, by its TOML name (e.g. --set "
   "checkpoint.capture=zero-copy, --set host_cache.grow=false; docs/config.md); repeatable",
   "a Cairn config key that no option here sets, by its TOML name (`--set "
   "checkpoint.capture=zero-copy`, `--set host_cache.grow=false`; [config.md](config.md)); "
   "repeatable, passed to the restart child, listed in `params.config_set`. A key that has an "
   "option (`host_cache.size`: `--host-cache`, ...) is refused with the option's name", Set},
  {"--keep-files", nullptr, "", "keep what the run wrote under --dir (and the directory itself)",
   "keep what the run wrote under `--dir` (and the directory itself)", KeepFiles},
  {"--quiet", nullptr, "", "no progress lines on stderr", nullptr, Quiet},
  {"--help", nullptr, "", "this text", "usage", Help},
  {"--help-markdown", nullptr, nullptr, nullptr, nullptr, HelpMarkdown},
  {"--child-lib", "L", nullptr, nullptr, nullptr, ChildLib},
  {"--child-touch", "on|off", nullptr, nullptr, nullptr, ChildTouch},
  {"--child-salt", "N", nullptr, nullptr, nullptr, ChildSalt},
  {"--child-version", "V", nullptr, nullptr, nullptr, ChildVersion},
  {"--child-dir", "DIR", nullptr, nullptr, nullptr, ChildDir},
  {"--child-report", "FILE", nullptr, nullptr, nullptr, ChildReport},
  {"--child-verify-as", "V", nullptr, nullptr, nullptr, ChildVerifyAs},
};
// clang-format on

}  // namespace

std::span<const OptionRow> OptionTable() { return kOptions; }

const OptionRow* FindOption(std::string_view name) {
  for (const OptionRow& r : kOptions) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

}  // namespace cairn::bench
