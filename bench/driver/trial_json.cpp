// One trial's results -> its JSON object (docs/bench.md lists every field).
#include "driver/trial_json.hpp"

#include <optional>
#include <string>
#include <string_view>

#include "driver/trial.hpp"

namespace cairn::bench {
namespace {

std::optional<double> Rate(double bytes, double seconds) {
  if (seconds <= 0) return std::nullopt;
  return bytes / seconds / 1e9;
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
#define CAIRN_STAT(kind, name, expr, doc) \
  add(#name, StatJson(expr, std::string_view(#kind) == "WHEN"));
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
  const uint64_t meta_after =
      static_cast<uint64_t>(meta_per * static_cast<double>(k > 0 ? k - 1 : 0) + 0.5);
  auto ratio = [](uint64_t a, uint64_t b) {
    return b > 0 ? Json(static_cast<double>(a) / b) : Json();
  };
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

Json InitJson(const TrialResult& t, const Stats* s, bool restart) {
  Json init = Json::Object();
  init.Set("open_s", t.open_s);
  if (t.async && !restart) init.Set("history_open_s", t.history_open_s);
  init.Set("close_s", t.close_s);
  // Fast initialization (host_cache.init): times since Open began; null =
  // never happened during the trial.
  if (s) AddStats(&init, *s, "init_");
  return init;
}

Json ForwardJson(const TrialResult& t, const Stats* s) {
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
  return fwd;
}

Json FlushJson(const TrialResult& t, const Stats* s) {
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
  return flush;
}

Json BackwardJson(const TrialResult& t, const Stats* s) {
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
  return bwd;
}

// The GPU tier (DeviceStats): all zero when no device region and no device
// cache were used.
Json DeviceJson(const Stats& s) {
  const DeviceStats& d = s.device;
  Json dev = Json::Object();
  AddStats(&dev, s, "device_");
  dev.Set("capture_gbps", d.capture.gbps());
  dev.Set("drain_gbps", d.drain.gbps());
  dev.Set("prefetch_gbps", d.prefetch.gbps());
  return dev;
}

Json CacheJson(const Stats& s) {
  Json cache = Json::Object();
  cache.Set("capacity_bytes", s.cache_capacity_bytes);
  cache.Set("evictions", s.evictions);
  cache.Set("used_bytes_at_end", s.cache_used_bytes);
  cache.Set("dirty_bytes_at_end", s.cache_dirty_bytes);
  return cache;
}

// The new-process restart (restart_child.cpp), into the restart object.
void AddColdRestart(Json* r, const TrialResult& t, const ColdRestart& c) {
  r->Set("cold_restore_s", c.restored_s);
  r->Set("cold_process_s", c.process_s);
  r->Set("cold_start_s", c.start_s);
  r->Set("cold_open_s", c.open_s);
  r->Set("cold_latest_s", c.latest_s);
  r->Set("cold_restore_call_s", c.restore_s);
  r->Set("cold_restore_call_gbps", Rate(static_cast<double>(t.backward.bytes), c.restore_s));
  r->Set("cold_verify_s", c.verify_s);
  r->Set("cold_version", c.version);
  r->Set("cold_cache_drop", c.cache_drop);
  r->Set("cold_resident_bytes", c.resident_bytes);
  r->Set("cold_file_bytes", c.file_bytes);
  r->Set("cold_raw_read_gbps", c.raw_read_gbps > 0 ? Json(c.raw_read_gbps) : Json());
  r->Set("cold_raw_read_method", c.raw_read_method);
  // The restore call's time over the raw cold read of the same file in the
  // same trial (the fastest of the reads just before and just after the new
  // process): on a disk whose speed drifts between trials this pairs each
  // restore with reads taken around it, where the run-wide fastest read
  // (limits.cold_read_gbps) is one extreme sample.
  r->Set("cold_restore_call_to_raw_read",
         c.raw_read_gbps > 0 && c.file_bytes > 0
             ? Json(c.restore_s * c.raw_read_gbps * 1e9 / static_cast<double>(c.file_bytes))
             : Json());
  if (c.whole_s > 0) {  // --whole-restart
    r->Set("whole_restart_s", c.whole_s);
    r->Set("whole_raw_s", c.whole_raw_s);
    r->Set("whole_raw_method", c.whole_raw_method);
    r->Set("whole_to_raw", c.whole_raw_s > 0 ? Json(c.whole_s / c.whole_raw_s) : Json());
  }
}

Json RestartJson(const TrialResult& t) {
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
  r.Set("restore_gbps",
        Rate(static_cast<double>(t.restore_s > 0 ? t.backward.bytes : 0), t.restore_s));
  r.Set("latest_version", t.latest_version);
  r.Set("persistent_durable_s", t.persistent_durable_s);
  if (t.cold) AddColdRestart(&r, t, *t.cold);
  return r;
}

Json VerifyJson(const TrialResult& t) {
  Json v = Json::Object();
  v.Set("checks", t.verify.checks);
  v.Set("stamp_words", t.verify.stamp_words);
  v.Set("bytes_compared", t.verify.bytes_compared);
  v.Set("mismatches", t.verify.mismatches);
  Json errs = Json::Array();
  for (const std::string& e : t.verify.errors) errs.Push(e);
  v.Set("errors", std::move(errs));
  return v;
}

}  // namespace

Json TrialJson(const TrialResult& t, Workload w) {
  const bool restart = w == Workload::kRestart;
  const Stats* s = t.stats ? &*t.stats : nullptr;
  Json j = Json::Object();
  j.Set("status", t.status.ok() ? std::string("ok") : t.status.ToString());
  if (!t.async) j.Set("fsync", t.sync_fsync);  // which baseline variant
  j.Set("init", InitJson(t, s, restart));
  // The HiPC'22 Fig. 5a/6 metric: what the application waited for before and
  // during the forward pass (opening the client included).
  j.Set("open_forward_blocking_s", t.open_s + t.forward.blocking_s);
  j.Set("forward", ForwardJson(t, s));
  j.Set("flush", FlushJson(t, s));
  j.Set("backward", BackwardJson(t, s));
  if (s) {
    j.Set("device", DeviceJson(*s));
    j.Set("cache", CacheJson(*s));
  }
  j.Set("total_blocking_s", t.forward.blocking_s + t.wait_s + t.backward.blocking_s);
  if (restart) {
    j.Set("restart", RestartJson(t));
    j.Set("changes", ChangesJson(t, s));
  }
  j.Set("verify", VerifyJson(t));
  return j;
}

}  // namespace cairn::bench
