// Results -> JSON document and stdout table. Field definitions and units are
// in docs/bench.md; keep the two in sync.
#include "driver/report.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>

#include "common/files.hpp"
#include "driver/bench_buffer.hpp"
#include "driver/trial.hpp"
#include "driver/trial_json.hpp"

namespace cairn::bench {
namespace {

std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

// restart --track-loop (track_loop.hpp): medians of the timed intervals.
Json TrackingJson(const TrackLoopResult& t) {
  Json j = Json::Object();
  j.Set("status", t.status.ok() ? std::string("ok") : t.status.ToString());
  const double off = Median(t.untracked_s), on = Median(t.tracked_s);
  j.Set("untracked_s", t.untracked_s.empty() ? Json() : Json(off));
  j.Set("tracked_s", t.tracked_s.empty() ? Json() : Json(on));
  j.Set("overhead", off > 0 && !t.tracked_s.empty() ? Json(on / off - 1) : Json());
  j.Set("extra_s", t.tracked_s.empty() || t.untracked_s.empty() ? Json() : Json(on - off));
  j.Set("extra_us_per_changed_page",
        t.changed_pages > 0 && !t.tracked_s.empty() && !t.untracked_s.empty()
            ? Json((on - off) / static_cast<double>(t.changed_pages) * 1e6)
            : Json());
  // The writes alone (the first writes that fault when tracked) and the rest
  // of the interval (the reads: tracking should not touch them).
  const double w_off = Median(t.untracked_write_s), w_on = Median(t.tracked_write_s);
  j.Set("untracked_write_s", t.untracked_write_s.empty() ? Json() : Json(w_off));
  j.Set("tracked_write_s", t.tracked_write_s.empty() ? Json() : Json(w_on));
  j.Set("write_extra_us_per_changed_page",
        t.changed_pages > 0 && !t.tracked_write_s.empty() && !t.untracked_write_s.empty()
            ? Json((w_on - w_off) / static_cast<double>(t.changed_pages) * 1e6)
            : Json());
  j.Set("changed_pages", t.changed_pages);
  j.Set("intervals", static_cast<uint64_t>(t.tracked_s.size()));
  j.Set("work_slices", t.work_slices);
  j.Set("calibrated_s", t.calibrated_s);
  j.Set("tracker", t.tracker);
  j.Set("tracking_faults", t.tracking_faults);
  j.Set("fallbacks", t.fallbacks);
  Json a = Json::Array(), b = Json::Array();
  for (double x : t.untracked_s) a.Push(x);
  for (double x : t.tracked_s) b.Push(x);
  j.Set("untracked_intervals_s", std::move(a));
  j.Set("tracked_intervals_s", std::move(b));
  return j;
}

// The median, leaf by leaf, of trial objects of the same shape. Numbers: the
// median of the trials that have one (null if none); strings and booleans:
// the first trial's; arrays are per-trial data and are left out (nullopt).
std::optional<Json> MedianTree(const std::vector<const Json*>& xs) {
  const Json* first = nullptr;
  for (const Json* x : xs) {
    if (x != nullptr && !x->is_null()) {
      first = x;
      break;
    }
  }
  if (first == nullptr) return xs.empty() ? std::nullopt : std::optional<Json>(Json());
  switch (first->type()) {
    case Json::Type::kArray:
      return std::nullopt;
    case Json::Type::kObject: {
      Json out = Json::Object();
      for (const auto& [key, unused] : first->members()) {
        std::vector<const Json*> kids;
        for (const Json* x : xs) kids.push_back(x != nullptr ? x->Find(key) : nullptr);
        if (std::optional<Json> m = MedianTree(kids)) out.Set(key, std::move(*m));
      }
      return out;
    }
    case Json::Type::kInt:
    case Json::Type::kDouble: {
      std::vector<double> v;
      bool all_int = true;
      for (const Json* x : xs) {
        if (x == nullptr || !x->is_number()) continue;
        v.push_back(x->number());
        all_int = all_int && x->type() == Json::Type::kInt;
      }
      const double m = Median(v);
      if (all_int && m == std::floor(m)) return Json(static_cast<int64_t>(m));
      return Json(m);
    }
    default:
      return *first;
  }
}

Json ModeJson(const std::vector<TrialResult>& trials, bool failed, Workload w) {
  std::vector<Json> per;
  for (const TrialResult& t : trials) per.push_back(TrialJson(t, w));
  std::vector<const Json*> ptrs;
  for (const Json& p : per) ptrs.push_back(&p);
  std::optional<Json> median = MedianTree(ptrs);
  Json mode = median && median->type() == Json::Type::kObject ? std::move(*median) : Json::Object();
  mode.Set("status", failed ? "failed" : "ok");
  mode.Set("n_trials", static_cast<uint64_t>(trials.size()));
  Json arr = Json::Array();
  for (Json& p : per) arr.Push(std::move(p));
  mode.Set("trials", std::move(arr));
  return mode;
}

Json ParamsJson(const RunResults& run) {
  const Options& o = run.options;
  Json p = Json::Object();
  p.Set("count", static_cast<uint64_t>(o.workload == Workload::kRestart ? o.count : run.plan.size()));
  if (o.workload == Workload::kTrace) p.Set("trace_file", o.trace_path);
  else p.Set("size_bytes", o.size);
  p.Set("max_step_bytes", o.workload == Workload::kRestart ? o.size : MaxBytes(run.plan));
  p.Set("total_bytes", o.workload == Workload::kRestart ? o.size * o.count : TotalBytes(run.plan));
  p.Set("interval_ms", o.interval_ms);
  p.Set("compute", o.compute == ComputeKind::kSleep ? "sleep" : "busy");
  p.Set("host_cache_bytes", o.host_cache);
  p.Set("block_bytes", MakeConfig(o, run.dir).block_bytes);
  Json sets = Json::Array();
  for (const std::string& set : o.config_sets) sets.Push(set);
  p.Set("config_set", std::move(sets));
  p.Set("init", std::string(CacheInitName(o.init)));
  p.Set("pin", o.pin);
  p.Set("huge_pages", o.huge_pages);
  p.Set("app_huge_pages", o.app_huge_pages);
  p.Set("memory", MemoryKindName(o.memory));
  p.Set("device_cache_bytes", o.device_cache);
  p.Set("device_cache_init", std::string(DeviceCacheInitName(o.device_cache_init)));
  p.Set("device_map_chunk_bytes", MakeConfig(o, run.dir).device_map_chunk_bytes);
  p.Set("dir", run.dir);
  p.Set("mode", o.run_async && o.run_sync ? "both" : o.run_async ? "async" : "sync");
  p.Set("repeat", o.repeat);
  p.Set("warmup", o.warmup);
  p.Set("sync_fsync", o.sync_fsync);
  p.Set("sync_fsync_is_default", o.sync_fsync == SyncFsyncDefault(o.workload));
  p.Set("sync_other", o.run_sync && o.sync_other);
  if (o.workload == Workload::kRestart) {
    p.Set("persistent_dir", o.persistent_dir.empty() ? Json() : Json(o.persistent_dir));
    p.Set("cold_restart", o.cold_restart);
    p.Set("changes", ChangeDetectionName(o.changes));
    p.Set("change_fraction", o.change.fraction);
    p.Set("change_pattern", ChangePatternName(o.change.pattern));
    p.Set("max_layers", MakeConfig(o, run.dir).max_layers);
    p.Set("hash_chunk_bytes", MakeConfig(o, run.dir).hash_chunk_bytes);
    p.Set("tracked_memory", UsesTrackedMemory(o));
    p.Set("track_loop", TrackLoopOn(o));
    p.Set("settle", o.settle);
    p.Set("track_loop_baseline", o.track_loop_baseline
                                     ? Json(std::string(ChangeDetectionName(*o.track_loop_baseline)))
                                     : Json("none"));
  }
  return p;
}

Json LimitsJson(const Limits& l) {
  Json j = Json::Object();
  j.Set("memcpy_gbps", l.memcpy_gbps);
  j.Set("memcpy_threads", l.memcpy_threads);
  j.Set("memcpy_huge_pages", l.memcpy_huge_pages);
  j.Set("memcpy_single_thread_gbps", l.memcpy_single_thread_gbps);
  j.Set("memcpy_single_thread_4k_gbps", l.memcpy_single_thread_4k_gbps);
  j.Set("memcpy_bytes", l.memcpy_bytes);
  j.Set("write_gbps", l.write_gbps);
  j.Set("write_nofsync_gbps", l.write_nofsync_gbps);
  j.Set("direct_write_gbps", l.direct_write_gbps);
  j.Set("read_gbps", l.read_gbps);
  j.Set("read_method", l.read_method);
  j.Set("cold_read_gbps", l.cold_read_gbps);
  j.Set("file_bytes", l.file_bytes);
  j.Set("samples", l.samples);
  if (l.dtoh_gbps) {  // --memory device|managed
    j.Set("htod_gbps", l.htod_gbps);
    j.Set("dtoh_gbps", l.dtoh_gbps);
    j.Set("dtod_gbps", l.dtod_gbps);
    j.Set("device_copy_bytes", l.device_copy_bytes);
  }
  return j;
}

Json RatiosJson(const Json& doc, bool restart) {
  const Json* a = doc.Find("async");
  const Json* s = doc.Find("sync");
  const Json* so = doc.Find("sync_other");
  auto an = [&](const char* p) { return a ? a->Number(p) : std::nullopt; };
  auto sn = [&](const char* p) { return s ? s->Number(p) : std::nullopt; };
  auto son = [&](const char* p) { return so ? so->Number(p) : std::nullopt; };
  Json r = Json::Object();
  r.Set("capture_to_memcpy", Ratio(an("forward.capture_gbps"), doc.Number("limits.memcpy_gbps")));
  r.Set("capture_with_waits_to_memcpy",
        Ratio(an("forward.capture_with_waits_gbps"), doc.Number("limits.memcpy_gbps")));
  r.Set("restore_to_memcpy", Ratio(an("backward.restore_gbps"), doc.Number("limits.memcpy_gbps")));
  r.Set("flush_to_direct_write", Ratio(an("flush.gbps"), doc.Number("limits.direct_write_gbps")));
  r.Set("flush_to_buffered_write", Ratio(an("flush.gbps"), doc.Number("limits.write_gbps")));
  r.Set("flush_to_pagecache_write",
        Ratio(an("flush.gbps"), doc.Number("limits.write_nofsync_gbps")));
  // Ratios of the medians; > 1 means Cairn blocked the application less.
  r.Set("sync_to_async_total_blocking", Ratio(sn("total_blocking_s"), an("total_blocking_s")));
  r.Set("sync_to_async_forward_blocking",
        Ratio(sn("forward.blocking_s"), an("forward.blocking_s")));
  r.Set("sync_to_async_backward_blocking",
        Ratio(sn("backward.blocking_s"), an("backward.blocking_s")));
  // The baseline's other fsync variant (--sync-other), for reference.
  r.Set("sync_other_to_async_total_blocking",
        Ratio(son("total_blocking_s"), an("total_blocking_s")));
  if (doc.Find("limits.dtoh_gbps") != nullptr) {  // --memory device|managed
    r.Set("device_capture_to_dtod",
          Ratio(an("device.capture_gbps"), doc.Number("limits.dtod_gbps")));
    r.Set("device_drain_to_dtoh", Ratio(an("device.drain_gbps"), doc.Number("limits.dtoh_gbps")));
    r.Set("device_prefetch_to_htod",
          Ratio(an("device.prefetch_gbps"), doc.Number("limits.htod_gbps")));
  }
  if (restart) {
    r.Set("sync_to_async_checkpoint_blocking",
          Ratio(sn("restart.checkpoint_blocking_s"), an("restart.checkpoint_blocking_s")));
    r.Set("sync_to_async_restore", Ratio(sn("restart.restore_s"), an("restart.restore_s")));
    r.Set("sync_to_async_cold_restore",
          Ratio(sn("restart.cold_restore_s"), an("restart.cold_restore_s")));
    r.Set("sync_other_to_async_cold_restore",
          Ratio(son("restart.cold_restore_s"), an("restart.cold_restore_s")));
    r.Set("cold_restore_call_to_cold_read",
          Ratio(an("restart.cold_restore_call_gbps"), doc.Number("limits.cold_read_gbps")));
    // Changed data: what Cairn wrote per changed byte, and against the
    // baseline (which writes everything).
    r.Set("changes_written_to_changed",
          Ratio(an("changes.bytes_written"), an("changes.bytes_changed")));
    r.Set("sync_to_async_bytes_written",
          Ratio(sn("changes.bytes_written"), an("changes.bytes_written")));
    r.Set("tracking_overhead", doc.Number("tracking.overhead"));
  }
  return r;
}

}  // namespace

Json BuildDocument(const RunResults& run) {
  const Workload w = run.options.workload;
  Json doc = Json::Object();
  doc.Set("tool", "cairn-bench");
  doc.Set("schema_version", 1);
  doc.Set("workload", WorkloadName(w));
  bool ok = run.errors.empty();
  doc.Set("status", ok ? "ok" : "failed");
  Json errs = Json::Array();
  for (const std::string& e : run.errors) errs.Push(e);
  doc.Set("errors", std::move(errs));
  doc.Set("params", ParamsJson(run));
  doc.Set("limits", LimitsJson(run.limits));
  if (run.options.run_async) doc.Set("async", ModeJson(run.async_trials, run.async_failed, w));
  if (run.options.run_sync) doc.Set("sync", ModeJson(run.sync_trials, run.sync_failed, w));
  if (run.options.run_sync && run.options.sync_other) {
    doc.Set("sync_other", ModeJson(run.sync_other_trials, run.sync_other_failed, w));
  }
  if (run.track_loop) doc.Set("tracking", TrackingJson(*run.track_loop));
  doc.Set("ratios", RatiosJson(doc, w == Workload::kRestart));
  // The async (Cairn) figures again at the top level, so that the headline
  // paths (forward.blocking_s, flush.gbps, ...) exist as they are.
  if (const Json* a = doc.Find("async")) {
    Json copy = *a;
    for (const char* key : {"init", "forward", "flush", "backward", "device", "total_blocking_s",
                            "restart", "changes"}) {
      if (const Json* v = copy.Find(key)) doc.Set(key, *v);
    }
  }
  return doc;
}

Status WriteJsonFile(const std::string& path, const Json& doc) {
  const std::string tmp = path + ".tmp";
  std::FILE* fp = std::fopen(tmp.c_str(), "w");
  if (fp == nullptr) return ErrnoStatus(errno, "open", tmp);
  const std::string text = doc.Dump() + "\n";
  const bool wrote = std::fwrite(text.data(), 1, text.size(), fp) == text.size();
  const int err = wrote ? 0 : errno;
  if (std::fclose(fp) != 0 || !wrote) {
    std::remove(tmp.c_str());
    return ErrnoStatus(err != 0 ? err : EIO, "write", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return ErrnoStatus(e, "rename", path);
  }
  return Status::Ok();
}

}  // namespace cairn::bench
