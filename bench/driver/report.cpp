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

namespace cairn::bench {
namespace {

std::optional<double> Rate(double bytes, double seconds) {
  if (seconds <= 0) return std::nullopt;
  return bytes / seconds / 1e9;
}

std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

// A statistic's JSON value: enums by name, times since open null when < 0
// ("not yet", the WHEN rows of cairn_stats.def).
Json StatJson(uint64_t v, bool) { return Json(v); }
Json StatJson(double v, bool when) { return when && v < 0 ? Json() : Json(v); }
Json StatJson(bool v, bool) { return Json(v); }
Json StatJson(const std::string& v, bool) { return Json(v); }
Json StatJson(CacheInit v, bool) { return Json(std::string(CacheInitName(v))); }
Json StatJson(DeviceCacheInit v, bool) { return Json(std::string(DeviceCacheInitName(v))); }

// Adds every statistic of include/cairn/cairn_stats.def whose name starts with
// `prefix` under the rest of its name: "init_pinned_s" is init.pinned_s. Two
// keep the names docs/bench.md and the plotting scripts know them by.
void AddStats(Json* out, const Stats& s, std::string_view prefix) {
  auto add = [&](std::string_view name, Json value) {
    if (name.substr(0, prefix.size()) != prefix) return;
    if (name == "init_open_s") name = "init_cache_prepare_s";  // init.open_s is Client::Open's time
    if (name == "device_used_bytes") name = "device_used_bytes_at_end";
    out->Set(std::string(name.substr(prefix.size())), std::move(value));
  };
#define CAIRN_STAT(kind, name, expr, doc) add(#name, StatJson(expr, std::string_view(#kind) == "WHEN"));
#define CAIRN_STAT_TEXT(name, expr, doc) add(#name, StatJson(expr, false));
#include "cairn/cairn_stats.def"
#undef CAIRN_STAT_TEXT
#undef CAIRN_STAT
}

// What the restart's versions changed and what the library wrote for them
// (docs/bench.md, "Changed data"). bytes_written = payload (async: Cairn's
// flush_local.bytes, the stored payload it wrote; sync: the bytes written) +
// metadata, the metadata measured on the version files still present at the
// end (file size - the version's stored payload), averaged and counted for
// every version.
Json ChangesJson(const TrialResult& t, const Stats* s) {
  Json ch = Json::Object();
  if (s) AddStats(&ch, *s, "changes_");
  const size_t k = t.changed_bytes.size();
  uint64_t changed = 0, changed_after = 0, stored_after = 0;
  for (size_t v = 0; v < k; ++v) {
    changed += t.changed_bytes[v];
    if (v > 0) changed_after += t.changed_bytes[v];
    if (v > 0 && v < t.stored_bytes.size()) stored_after += t.stored_bytes[v];
  }
  uint64_t meta_sum = 0, meta_files = 0;
  const TrialResult::VersionFile* tip = nullptr;
  for (const TrialResult::VersionFile& f : t.version_files) {
    if (f.version < 0 || static_cast<size_t>(f.version) >= t.stored_bytes.size()) continue;
    const uint64_t stored = t.stored_bytes[static_cast<size_t>(f.version)];
    meta_sum += f.bytes > stored ? f.bytes - stored : 0;
    ++meta_files;
    if (static_cast<size_t>(f.version) + 1 == k) tip = &f;
  }
  const double meta_per = meta_files > 0 ? static_cast<double>(meta_sum) / meta_files : 0;
  const uint64_t payload = s ? s->flush_local.bytes : t.forward.bytes;
  const uint64_t meta = static_cast<uint64_t>(meta_per * static_cast<double>(k) + 0.5);
  const uint64_t written = payload + meta;
  const uint64_t meta_after = static_cast<uint64_t>(meta_per * static_cast<double>(k > 0 ? k - 1 : 0) + 0.5);
  auto ratio = [](uint64_t a, uint64_t b) { return b > 0 ? Json(static_cast<double>(a) / b) : Json(); };
  ch.Set("bytes_changed", changed);
  ch.Set("bytes_written", written);
  ch.Set("payload_bytes", payload);
  ch.Set("metadata_bytes", meta);
  ch.Set("metadata_files", meta_files);
  ch.Set("written_to_changed", ratio(written, changed));
  ch.Set("metadata_fraction", ratio(meta, written));
  // Versions 1.. only: version 0 changes (and stores) everything.
  ch.Set("bytes_changed_after_first", changed_after);
  ch.Set("bytes_written_after_first", stored_after + meta_after);
  ch.Set("written_to_changed_after_first", ratio(stored_after + meta_after, changed_after));
  // The chain depth of the newest version (the one restored) and the
  // version it is layered on, from its file's version record; without one
  // (the baseline; a file gone), layered versions since the last full one.
  int64_t depth = 0;
  for (bool l : t.layered) depth = l ? depth + 1 : 0;
  ch.Set("tip_depth", tip != nullptr && tip->depth >= 0 ? tip->depth : depth);
  ch.Set("tip_base_version", tip != nullptr && tip->depth >= 0 ? Json(tip->base_version) : Json());
  std::vector<double> writes(t.app_write_s.begin() + (t.app_write_s.empty() ? 0 : 1),
                             t.app_write_s.end());
  ch.Set("app_write_s", writes.empty() ? Json() : Json(Median(writes)));
  // Per-checkpoint blocking of versions 1.. (version 0 is full in every mode).
  std::vector<double> blocking(t.checkpoint_s.begin() + (t.checkpoint_s.empty() ? 0 : 1),
                               t.checkpoint_s.end());
  ch.Set("checkpoint_blocking_after_first_s", blocking.empty() ? Json() : Json(Median(blocking)));
  Json per = Json::Array();
  for (size_t v = 0; v < k; ++v) {
    Json e = Json::Object();
    e.Set("version", static_cast<uint64_t>(v));
    e.Set("changed_bytes", t.changed_bytes[v]);
    e.Set("stored_bytes", v < t.stored_bytes.size() ? Json(t.stored_bytes[v]) : Json());
    e.Set("layered", v < t.layered.size() ? Json(static_cast<bool>(t.layered[v])) : Json());
    e.Set("blocking_s", v < t.checkpoint_s.size() ? Json(t.checkpoint_s[v]) : Json());
    e.Set("app_write_s", v < t.app_write_s.size() ? Json(t.app_write_s[v]) : Json());
    for (const TrialResult::VersionFile& f : t.version_files) {
      if (f.version != static_cast<int64_t>(v)) continue;
      e.Set("file_bytes", f.bytes);
      if (f.depth >= 0) e.Set("depth", f.depth);
      if (f.depth >= 0) e.Set("base_version", f.base_version);
    }
    per.Push(std::move(e));
  }
  ch.Set("versions", std::move(per));
  return ch;
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

Json TrialJson(const TrialResult& t, Workload w) {
  const bool restart = w == Workload::kRestart;
  const Stats* s = t.stats ? &*t.stats : nullptr;
  Json j = Json::Object();
  j.Set("status", t.status.ok() ? std::string("ok") : t.status.ToString());
  if (!t.async) j.Set("fsync", t.sync_fsync);  // which baseline variant

  Json init = Json::Object();
  init.Set("open_s", t.open_s);
  if (t.async && !restart) init.Set("history_open_s", t.history_open_s);
  init.Set("close_s", t.close_s);
  // Fast initialization (host_cache.init): times since Open began; null =
  // never happened during the trial.
  if (s) AddStats(&init, *s, "init_");
  j.Set("init", std::move(init));
  // The HiPC'22 Fig. 5a/6 metric: what the application waited for before and
  // during the forward pass (opening the client included).
  j.Set("open_forward_blocking_s", t.open_s + t.forward.blocking_s);

  Json fwd = Json::Object();
  fwd.Set("blocking_s", t.forward.blocking_s);
  fwd.Set("capture_gbps", s ? std::optional<double>(s->capture.gbps())
                            : Rate(static_cast<double>(t.forward.bytes), t.forward.blocking_s));
  // Copy-only (above: waits for cache space excluded) vs. what the
  // application saw per captured byte, waits for the cache included: only
  // the latter shows back-pressure. Sync: the same as capture_gbps.
  fwd.Set("capture_with_waits_gbps",
          s ? Rate(static_cast<double>(s->capture.bytes),
                   s->capture.seconds + s->capture_blocked_s + s->device.capture_blocked_s)
            : Rate(static_cast<double>(t.forward.bytes), t.forward.blocking_s));
  fwd.Set("max_op_s", t.forward.max_op_s);
  fwd.Set("wall_s", t.forward.wall_s);
  fwd.Set("bytes", t.forward.bytes);
  fwd.Set("ops", t.forward.ops);
  fwd.Set("compute_overruns", t.forward.compute_overruns);
  j.Set("forward", std::move(fwd));

  Json flush = Json::Object();
  if (s) {
    flush.Set("gbps", s->flush_local.gbps());
    flush.Set("bytes", s->flush_local.bytes);
    flush.Set("seconds", s->flush_local.seconds);
    flush.Set("ops", s->flush_local.ops);
    flush.Set("skipped", s->flushes_skipped);
    flush.Set("failed", s->failed_flushes);
    flush.Set("capture_blocked_s", s->capture_blocked_s);
  } else {
    flush.Set("gbps", Rate(static_cast<double>(t.forward.bytes), t.sync_write_s));
    flush.Set("bytes", t.forward.bytes);
    flush.Set("seconds", t.sync_write_s);
  }
  j.Set("flush", std::move(flush));

  Json bwd = Json::Object();
  bwd.Set("blocking_s", t.backward.blocking_s);
  std::optional<double> hit;
  if (s && s->cache_hits + s->cache_misses > 0) {
    hit = static_cast<double>(s->cache_hits) / static_cast<double>(s->cache_hits + s->cache_misses);
  }
  bwd.Set("cache_hit_ratio", hit);
  bwd.Set("restore_gbps", s ? std::optional<double>(s->restore.gbps())
                            : Rate(static_cast<double>(t.backward.bytes), t.backward.blocking_s));
  bwd.Set("max_op_s", t.backward.max_op_s);
  bwd.Set("wall_s", t.backward.wall_s);
  bwd.Set("bytes", t.backward.bytes);
  bwd.Set("ops", t.backward.ops);
  bwd.Set("compute_overruns", t.backward.compute_overruns);
  if (s) {
    bwd.Set("cache_hits", s->cache_hits);
    bwd.Set("cache_misses", s->cache_misses);
    bwd.Set("prefetch_waits", s->prefetch_waits);
    bwd.Set("prefetch_gbps", s->prefetch.gbps());
    bwd.Set("prefetch_bytes", s->prefetch.bytes);
  }
  j.Set("backward", std::move(bwd));

  if (s) {
    // The GPU tier (DeviceStats): all zero when no device region and no
    // device cache were used.
    const DeviceStats& d = s->device;
    Json dev = Json::Object();
    AddStats(&dev, *s, "device_");
    dev.Set("capture_gbps", d.capture.gbps());
    dev.Set("drain_gbps", d.drain.gbps());
    dev.Set("prefetch_gbps", d.prefetch.gbps());
    j.Set("device", std::move(dev));

    Json cache = Json::Object();
    cache.Set("capacity_bytes", s->cache_capacity_bytes);
    cache.Set("evictions", s->evictions);
    cache.Set("used_bytes_at_end", s->cache_used_bytes);
    cache.Set("dirty_bytes_at_end", s->cache_dirty_bytes);
    j.Set("cache", std::move(cache));
  }

  j.Set("total_blocking_s", t.forward.blocking_s + t.wait_s + t.backward.blocking_s);

  if (restart) {
    Json r = Json::Object();
    double mx = 0;
    Json calls = Json::Array();
    for (double c : t.checkpoint_s) {
      mx = c > mx ? c : mx;
      calls.Push(c);
    }
    r.Set("checkpoint_blocking_s", t.checkpoint_s.empty() ? Json() : Json(Median(t.checkpoint_s)));
    r.Set("checkpoint_blocking_max_s", mx);
    r.Set("checkpoint_blocking_sum_s", t.forward.blocking_s);
    r.Set("checkpoint_calls_s", std::move(calls));
    r.Set("wait_s", t.wait_s);
    r.Set("latest_s", t.latest_s);
    r.Set("restore_s", t.restore_s);
    r.Set("restore_gbps", Rate(static_cast<double>(t.restore_s > 0 ? t.backward.bytes : 0),
                               t.restore_s));
    r.Set("latest_version", t.latest_version);
    r.Set("persistent_durable_s", t.persistent_durable_s);
    if (t.cold) {  // the new-process restart (restart_child.cpp)
      const ColdRestart& c = *t.cold;
      r.Set("cold_restore_s", c.restored_s);
      r.Set("cold_process_s", c.process_s);
      r.Set("cold_start_s", c.start_s);
      r.Set("cold_open_s", c.open_s);
      r.Set("cold_latest_s", c.latest_s);
      r.Set("cold_restore_call_s", c.restore_s);
      r.Set("cold_restore_call_gbps", Rate(static_cast<double>(t.backward.bytes), c.restore_s));
      r.Set("cold_verify_s", c.verify_s);
      r.Set("cold_version", c.version);
      r.Set("cold_cache_drop", c.cache_drop);
      r.Set("cold_resident_bytes", c.resident_bytes);
      r.Set("cold_file_bytes", c.file_bytes);
      r.Set("cold_raw_read_gbps", c.raw_read_gbps > 0 ? Json(c.raw_read_gbps) : Json());
      r.Set("cold_raw_read_method", c.raw_read_method);
      // The restore call's time over the raw cold read of the same file in
      // the same trial (the fastest of the reads just before and just after
      // the new process): on a disk whose speed drifts between trials this
      // pairs each restore with reads taken around it, where the run-wide
      // fastest read (limits.cold_read_gbps) is one extreme sample.
      r.Set("cold_restore_call_to_raw_read",
            c.raw_read_gbps > 0 && c.file_bytes > 0
                ? Json(c.restore_s * c.raw_read_gbps * 1e9 / static_cast<double>(c.file_bytes))
                : Json());
      if (c.whole_s > 0) {  // --whole-restart
        r.Set("whole_restart_s", c.whole_s);
        r.Set("whole_raw_s", c.whole_raw_s);
        r.Set("whole_raw_method", c.whole_raw_method);
        r.Set("whole_to_raw", c.whole_raw_s > 0 ? Json(c.whole_s / c.whole_raw_s) : Json());
      }
    }
    j.Set("restart", std::move(r));
    j.Set("changes", ChangesJson(t, s));
  }

  Json v = Json::Object();
  v.Set("checks", t.verify.checks);
  v.Set("stamp_words", t.verify.stamp_words);
  v.Set("bytes_compared", t.verify.bytes_compared);
  v.Set("mismatches", t.verify.mismatches);
  Json errs = Json::Array();
  for (const std::string& e : t.verify.errors) errs.Push(e);
  v.Set("errors", std::move(errs));
  j.Set("verify", std::move(v));
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

void PrintTable(std::FILE* out, const Json& doc) {
  auto f = [&](const Json* j, const char* path, const char* fmt, int width) {
    std::optional<double> v = j ? j->Number(path) : std::nullopt;
    if (v) std::fprintf(out, fmt, width, *v);
    else std::fprintf(out, "%*s", width, "-");
  };
  auto str = [&](const char* path) {
    const Json* j = doc.Find(path);
    return j != nullptr && j->type() == Json::Type::kString ? j->string() : std::string("?");
  };
  const bool restart = str("workload") == "restart";
  std::fprintf(out, "cairn-bench %s\n", str("workload").c_str());
  std::fprintf(out, "limits (GB/s): memcpy ");
  f(&doc, "limits.memcpy_gbps", "%*.2f", 0);
  std::fprintf(out, " (");
  f(&doc, "limits.memcpy_threads", "%*.0f", 0);
  std::fprintf(out, " threads; 1 thread ");
  f(&doc, "limits.memcpy_single_thread_gbps", "%*.2f", 0);
  std::fprintf(out, ")");
  std::fprintf(out, " | write+fsync ");
  f(&doc, "limits.write_gbps", "%*.2f", 0);
  std::fprintf(out, " | page-cache write ");
  f(&doc, "limits.write_nofsync_gbps", "%*.2f", 0);
  std::fprintf(out, " | O_DIRECT write ");
  f(&doc, "limits.direct_write_gbps", "%*.2f", 0);
  std::fprintf(out, " | read (%s) ", str("limits.read_method").c_str());
  f(&doc, "limits.read_gbps", "%*.2f", 0);
  if (restart) {
    std::fprintf(out, " | cold read ");
    f(&doc, "limits.cold_read_gbps", "%*.2f", 0);
  }
  std::fprintf(out, "\n");

  if (restart) {
    std::fprintf(out, "%-10s %9s %11s %11s %9s %9s %10s %13s %10s\n", "mode", "open_s",
                 "ckpt_med_s", "ckpt_max_s", "wait_s", "latest_s", "restore_s", "total_block_s",
                 "cold_rst_s");
  } else {
    std::fprintf(out, "%-10s %9s %11s %11s %10s %11s %9s %13s\n", "mode", "open_s",
                 "fwd_block_s", "capture_GBs", "flush_GBs", "bwd_block_s", "hit_ratio",
                 "total_block_s");
  }
  for (const char* mode : {"async", "sync", "sync_other"}) {
    const Json* m = doc.Find(mode);
    if (m == nullptr) continue;
    const Json* fs = m->Find("fsync");
    const bool is_sync = fs != nullptr && fs->type() == Json::Type::kBool;
    const std::string name = !is_sync ? std::string(mode) : fs->boolean() ? "sync+fsync" : "sync";
    std::fprintf(out, "%-10s ", name.c_str());
    f(m, "init.open_s", "%*.4f", 9);
    if (restart) {
      f(m, "restart.checkpoint_blocking_s", " %*.4f", 11);
      f(m, "restart.checkpoint_blocking_max_s", " %*.4f", 11);
      f(m, "restart.wait_s", " %*.4f", 9);
      f(m, "restart.latest_s", " %*.4f", 9);
      f(m, "restart.restore_s", " %*.4f", 10);
    } else {
      f(m, "forward.blocking_s", " %*.4f", 11);
      f(m, "forward.capture_gbps", " %*.2f", 11);
      f(m, "flush.gbps", " %*.2f", 10);
      f(m, "backward.blocking_s", " %*.4f", 11);
      f(m, "backward.cache_hit_ratio", " %*.3f", 9);
    }
    f(m, "total_blocking_s", " %*.4f", 13);
    if (restart) f(m, "restart.cold_restore_s", " %*.4f", 10);
    const Json* status = m->Find("status");
    std::fprintf(out, "%s\n", status != nullptr && status->string() == "ok" ? "" : "  FAILED");
  }
  std::fprintf(out, "ratios: sync/async total blocking ");
  f(&doc, "ratios.sync_to_async_total_blocking", "%*.2fx", 0);
  std::fprintf(out, " (other fsync variant ");
  f(&doc, "ratios.sync_other_to_async_total_blocking", "%*.2fx", 0);
  std::fprintf(out, ") | capture/memcpy ");
  f(&doc, "ratios.capture_to_memcpy", "%*.2f", 0);
  std::fprintf(out, " (waits included ");
  f(&doc, "ratios.capture_with_waits_to_memcpy", "%*.2f", 0);
  std::fprintf(out, ")");
  std::fprintf(out, " | flush/O_DIRECT write ");
  f(&doc, "ratios.flush_to_direct_write", "%*.2f", 0);
  std::fprintf(out, " | flush/buffered write ");
  f(&doc, "ratios.flush_to_buffered_write", "%*.2f", 0);
  std::fprintf(out, "\n");
  if (restart) {
    std::fprintf(out, "changes (%s, fraction ", str("params.changes").c_str());
    f(&doc, "params.change_fraction", "%*.3f", 0);
    std::fprintf(out, " %s): changed ", str("params.change_pattern").c_str());
    f(&doc, "changes.bytes_changed", "%*.0f", 0);
    std::fprintf(out, " B, written ");
    f(&doc, "changes.bytes_written", "%*.0f", 0);
    std::fprintf(out, " B (");
    f(&doc, "changes.written_to_changed", "%*.3fx", 0);
    std::fprintf(out, "; after version 0: ");
    f(&doc, "changes.written_to_changed_after_first", "%*.3fx", 0);
    std::fprintf(out, ") | tip depth ");
    f(&doc, "changes.tip_depth", "%*.0f", 0);
    std::fprintf(out, " | tracking overhead ");
    f(&doc, "tracking.overhead", "%*.4f", 0);
    std::fprintf(out, "\n");
  }

  // The GPU tier, when one was used (device/managed memory or a device cache
  // that got a GPU): Cairn's (async) medians.
  const Json* dev = doc.Find("async.device");
  const Json* gpu = dev ? dev->Find("gpu") : nullptr;
  const bool used = (gpu != nullptr && gpu->type() == Json::Type::kBool && gpu->boolean()) ||
                    str("params.memory") != "host";
  if (!used) return;
  const std::optional<double> cache = doc.Number("params.device_cache_bytes");
  std::fprintf(out, "device: %s memory, device cache %.0f MiB %s", str("params.memory").c_str(),
               cache ? *cache / (1 << 20) : 0.0, str("params.device_cache_init").c_str());
  if (dev != nullptr) {  // Cairn ran
    std::fprintf(out, " | capture ");
    f(dev, "capture_gbps", "%*.2f", 0);
    std::fprintf(out, " GB/s | drain ");
    f(dev, "drain_gbps", "%*.2f", 0);
    std::fprintf(out, " GB/s (%.1f MiB) | prefetch ", dev->Number("drain_bytes").value_or(0) / (1 << 20));
    f(dev, "prefetch_gbps", "%*.2f", 0);
    std::fprintf(out, " GB/s | hits ");
    f(dev, "hits", "%*.0f", 0);
    std::fprintf(out, " | blocked ");
    f(dev, "capture_blocked_s", "%*.4f", 0);
    std::fprintf(out, " s | fully mapped ");
    f(dev, "fully_mapped_s", "%*.3f s", 0);
  }
  std::fprintf(out, "\ndevice limits (GB/s): HtoD ");
  f(&doc, "limits.htod_gbps", "%*.2f", 0);
  std::fprintf(out, " | DtoH ");
  f(&doc, "limits.dtoh_gbps", "%*.2f", 0);
  std::fprintf(out, " | DtoD ");
  f(&doc, "limits.dtod_gbps", "%*.2f", 0);
  std::fprintf(out, "\n");
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
