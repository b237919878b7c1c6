// cairn-bench: command line, run directory, limits, warm-up and interleaved
// trials, report. The only place that decides exit codes:
//   0  every call succeeded and every restored byte checked was right
//   1  a Cairn (or baseline/I-O) call failed, or restored data was wrong
//   2  usage error (bad option, bad trace file, invalid Cairn configuration)
//
// Memory-state contract (see docs/bench.md): this VM hands freed memory back
// to its host, so a trial's speed depends on what ran before it. Trials are
// therefore preceded by an untimed warm-up round and interleaved (async, sync,
// async, sync, ...), and the report uses medians.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/files.hpp"
#include "driver/ai_ckpt.hpp"
#include "driver/bench.hpp"
#include "driver/bench_buffer.hpp"
#include "driver/report.hpp"
#include "driver/trial.hpp"

namespace cairn::bench {
namespace {

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;

// Removes what the run created, on every path out of Run(): the whole
// directory when the bench made it, else only its own subdirectories (a
// user's --dir is never removed).
class DirCleanup {
 public:
  DirCleanup(std::string dir, bool created, bool keep, std::string persistent)
      : dir_(std::move(dir)), created_(created), keep_(keep), persistent_(std::move(persistent)) {}
  ~DirCleanup() {
    if (keep_) return;
    if (!persistent_.empty()) {  // a user's directory: only what the bench put there
      (void)RemoveTree(persistent_ + "/cairn");
      (void)RemoveTree(persistent_ + "/sync");
    }
    if (created_) {
      (void)RemoveTree(dir_);
    } else {
      (void)RemoveTree(dir_ + "/cairn");
      (void)RemoveTree(dir_ + "/sync");
    }
  }
  DirCleanup(const DirCleanup&) = delete;
  DirCleanup& operator=(const DirCleanup&) = delete;

 private:
  std::string dir_;
  bool created_, keep_;
  std::string persistent_;
};

// The libraries a run compares: Cairn, the naive baseline with the fair
// --sync-fsync value, and the baseline with the other one (--sync-other).
enum Variant { kAsync = 0, kSync = 1, kSyncOther = 2 };
const char* VariantName(Variant v) {
  return v == kAsync ? "async" : v == kSync ? "sync" : "sync_other";
}

void Progress(const Options& o, const char* label, int index, Variant v, const TrialResult& r) {
  if (o.quiet) return;
  const std::string mode = std::string(VariantName(v)) +
                           (v == kAsync ? "" : r.sync_fsync ? " fsync" : " no-fsync");
  if (index < 0) std::fprintf(stderr, "[warm-up %s] ", mode.c_str());
  else std::fprintf(stderr, "[%s %d/%d] ", mode.c_str(), index + 1, o.repeat);
  if (o.workload == Workload::kRestart) {
    std::fprintf(stderr, "%s: open %.3f s, checkpoints %.3f s (max %.3f), wait %.3f s, "
                 "restore %.3f s", label, r.open_s, r.forward.blocking_s, r.forward.max_op_s,
                 r.wait_s, r.restore_s);
    if (r.cold) {
      std::fprintf(stderr, ", cold restart %.3f s (open %.3f, latest %.4f, restore %.3f)",
                   r.cold->restored_s, r.cold->open_s, r.cold->latest_s, r.cold->restore_s);
    }
  } else {
    std::fprintf(stderr, "%s: open %.3f s, forward %.3f s blocking (%.2f s wall), "
                 "backward %.3f s blocking (%.2f s wall)", label, r.open_s,
                 r.forward.blocking_s, r.forward.wall_s, r.backward.blocking_s,
                 r.backward.wall_s);
  }
  if (!r.status.ok()) std::fprintf(stderr, " -- FAILED: %s", r.status.ToString().c_str());
  if (r.verify.mismatches > 0) {
    std::fprintf(stderr, " -- %llu WRONG RESTORES",
                 static_cast<unsigned long long>(r.verify.mismatches));
  }
  std::fprintf(stderr, "\n");
}

// Appends a trial's failures to `errors`; returns false when its status failed.
bool Collect(const TrialResult& r, const char* phase, Variant v,
             std::vector<std::string>& errors) {
  const std::string who = std::string(phase) + " " + VariantName(v);
  for (const std::string& e : r.verify.errors) errors.push_back(who + ": wrong data: " + e);
  if (r.verify.mismatches > r.verify.errors.size()) {
    errors.push_back(who + ": " + std::to_string(r.verify.mismatches - r.verify.errors.size()) +
                     " more wrong restores");
  }
  if (!r.status.ok()) errors.push_back(who + ": " + r.status.ToString());
  return r.status.ok();
}

// The run directory: --dir (made if missing) or a fresh one. On failure,
// the exit code.
std::variant<int, std::pair<std::string, bool>> RunDir(const Options& o) {
  if (o.dir.empty()) {
    Result<std::string> tmp = MakeTempDir();
    if (!tmp.ok()) {
      std::fprintf(stderr, "cairn-bench: %s\n", tmp.status().ToString().c_str());
      return kExitFailure;
    }
    return std::make_pair(*tmp, true);
  }
  struct stat sb {};
  const bool created = ::stat(o.dir.c_str(), &sb) != 0;
  if (Status st = MakeDirs(o.dir); !st.ok()) {
    std::fprintf(stderr, "cairn-bench: --dir: %s\n", st.ToString().c_str());
    return kExitUsage;
  }
  return std::make_pair(o.dir, created);
}

// The disk and memory limits the ratios divide by (and the device's, for
// device or managed memory); false (printed) on failure.
bool MeasureRunLimits(const Options& o, const std::vector<Step>& plan, const std::string& dir,
                      BenchBuffer& app, uint64_t app_bytes, RunResults* run) {
  const bool restart = o.workload == Workload::kRestart;
  const uint64_t moved = restart ? o.size * o.count : TotalBytes(plan);
  const uint64_t probe =
      o.limits_bytes ? *o.limits_bytes
                     : std::min<uint64_t>(std::max<uint64_t>(moved, 16ull << 20), 1ull << 30);
  Result<Limits> limits = MeasureLimits(dir, probe, app.host(), app_bytes,
                                        CaptureThreads(MakeConfig(o, dir)), o.huge_pages, o.quiet);
  if (!limits.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\n", limits.status().ToString().c_str());
    return false;
  }
  run->limits = *limits;
  if (o.memory == MemoryKind::kHost) return true;
  Result<DeviceLimits> dev = MeasureDeviceLimits(app, o.quiet);
  if (!dev.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\n", dev.status().ToString().c_str());
    return false;
  }
  run->limits.htod_gbps = dev->htod_gbps;
  run->limits.dtoh_gbps = dev->dtoh_gbps;
  run->limits.dtod_gbps = dev->dtod_gbps;
  run->limits.device_copy_bytes = dev->bytes;
  return true;
}

// The warm-up round, then --repeat rounds of every variant, interleaved; a
// variant stops at its first failed call.
void RunTrials(const Options& o, const std::vector<Step>& plan, const std::string& dir,
               BenchBuffer& app, RunResults* run) {
  const bool restart = o.workload == Workload::kRestart;
  Options other = o;  // the baseline with the other fsync choice
  other.sync_fsync = !o.sync_fsync;
  auto trial = [&](Variant v) {
    const Options& opt = v == kSyncOther ? other : o;
    const bool async = v == kAsync;
    return restart ? RunRestartTrial(opt, async, dir, app)
                   : RunAdjointTrial(opt, plan, async, dir, app);
  };
  std::vector<Variant> variants;
  if (o.run_async) variants.push_back(kAsync);
  if (o.run_sync) variants.push_back(kSync);
  if (o.run_sync && o.sync_other) variants.push_back(kSyncOther);
  bool failed[3] = {false, false, false};
  std::vector<TrialResult>* trials[3] = {&run->async_trials, &run->sync_trials,
                                         &run->sync_other_trials};
  bool* mode_failed[3] = {&run->async_failed, &run->sync_failed, &run->sync_other_failed};
  const char* label = WorkloadName(o.workload);
  if (o.warmup) {
    for (Variant v : variants) {
      TrialResult r = trial(v);
      Progress(o, label, -1, v, r);
      failed[v] = !Collect(r, "warm-up", v, run->errors);
      *mode_failed[v] |= !r.status.ok() || r.verify.mismatches > 0;
    }
  }
  for (int i = 0; i < o.repeat; ++i) {
    for (Variant v : variants) {
      if (failed[v]) continue;
      TrialResult r = trial(v);
      Progress(o, label, i, v, r);
      failed[v] = !Collect(r, ("trial " + std::to_string(i + 1)).c_str(), v, run->errors);
      *mode_failed[v] |= !r.status.ok() || r.verify.mismatches > 0;
      if (r.cold)
        run->limits.cold_read_gbps =
            std::max(run->limits.cold_read_gbps.value_or(0), r.cold->raw_read_gbps);
      trials[v]->push_back(std::move(r));
    }
  }
}

// The table on stdout, the JSON file, the errors on stderr; the exit code.
int Report(const Options& o, const std::string& dir, RunResults& run) {
  const Json doc = BuildDocument(run);
  PrintTable(stdout, doc);
  std::fflush(stdout);
  if (!o.json_path.empty()) {
    if (Status st = WriteJsonFile(o.json_path, doc); !st.ok()) {
      run.errors.push_back("--json: " + st.ToString());
    }
  }
  for (const std::string& e : run.errors) std::fprintf(stderr, "cairn-bench: error: %s\n", e.c_str());
  if (o.keep_files && !o.quiet) std::fprintf(stderr, "cairn-bench: files kept in %s\n", dir.c_str());
  return run.errors.empty() ? kExitOk : kExitFailure;
}

int Run(const Options& o) {
  Result<std::vector<Step>> plan = BuildPlan(o);
  if (!plan.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\n", plan.status().message().c_str());
    return kExitUsage;
  }
  auto made = RunDir(o);
  if (const int* code = std::get_if<int>(&made)) return *code;
  const auto [dir, created] = std::get<std::pair<std::string, bool>>(made);
  DirCleanup cleanup(dir, created, o.keep_files, o.persistent_dir);
  if (!o.persistent_dir.empty()) {
    if (Status st = MakeDirs(o.persistent_dir); !st.ok()) {
      std::fprintf(stderr, "cairn-bench: --persistent: %s\n", st.ToString().c_str());
      return kExitUsage;
    }
  }
  if (o.run_async) {
    if (Status st = MakeConfig(o, dir + "/cairn").Validate(); !st.ok()) {
      std::fprintf(stderr, "cairn-bench: invalid Cairn configuration: %s\n", st.ToString().c_str());
      return kExitUsage;
    }
  }

  // The application buffer (host, device or managed memory), touched once so
  // that no trial pays first-touch.
  const bool restart = o.workload == Workload::kRestart;
  const uint64_t app_bytes = restart ? o.size : MaxBytes(*plan);
  Result<BenchBuffer> app =
      BenchBuffer::Allocate(o.memory, app_bytes, o.app_huge_pages, UsesTrackedMemory(o));
  if (!app.ok()) {
    // No usable CUDA driver for --memory device/managed: the options cannot
    // run on this machine (a usage error, like an invalid configuration).
    const bool no_driver = app.status().code() == Code::kUnsupported;
    std::fprintf(stderr, "cairn-bench: %s%s\n", no_driver ? "" : "application buffer: ",
                 no_driver ? app.status().message().c_str() : app.status().ToString().c_str());
    return no_driver ? kExitUsage : kExitFailure;
  }

  RunResults run;
  run.options = o;
  run.plan = *plan;
  run.dir = dir;
  if (!MeasureRunLimits(o, *plan, dir, *app, app_bytes, &run)) return kExitFailure;
  WaitAtBarrier();  // --procs: start the trials together
  RunTrials(o, *plan, dir, *app, &run);
  if (restart && TrackLoopOn(o) && !run.async_failed) {
    if (!o.quiet) std::fprintf(stderr, "cairn-bench: track loop (%d x 2 trials)\n", o.repeat);
    run.track_loop = RunTrackLoop(o, dir, *app);
    if (!run.track_loop->status.ok()) run.errors.push_back(run.track_loop->status.ToString());
  }
  return Report(o, dir, run);
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  using namespace cairn::bench;
  if (argc > 1 && std::string_view(argv[1]) == "ai-ckpt") return RunAiCkpt(argc - 1, argv + 1);
  cairn::Result<Options> parsed = ParseOptions(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\nRun 'cairn-bench --help' for usage.\n",
                 parsed.status().message().c_str());
    return kExitUsage;
  }
  if (parsed->help) {
    std::fputs(UsageText(), stdout);
    return kExitOk;
  }
  if (parsed->help_markdown) {
    std::fputs(OptionsMarkdown().c_str(), stdout);
    return kExitOk;
  }
  if (parsed->procs > 1) return RunProcesses(*parsed, argc, argv);
  if (parsed->restart_child) return RunRestartChild(*parsed);
  return Run(*parsed);
}
