// The restart trial (fault-tolerance pattern): one protected region of
// --size, --count versions checkpointed --interval-ms apart, Wait(kLocal) for
// the last one, Latest, then Restore into the scribbled-over region and a full
// verification. The baseline does the same with one synchronous file per
// version, keeping the newest two like Cairn's default keep_versions.
// The timing contract is in trial.hpp.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "driver/bench.hpp"
#include "cairn/cairn.hpp"
#include "common/files.hpp"
#include "format/file_reader.hpp"
#include "os/fs/fs.hpp"
#include "driver/bench_buffer.hpp"
#include "common/pattern.hpp"
#include "driver/restart.hpp"
#include "driver/sync_baseline.hpp"
#include "driver/trial.hpp"

namespace cairn::bench {

std::string VersionFile(int64_t v) { return std::string(kRestartName) + ".v" + std::to_string(v); }

Result<int64_t> SyncLatest(const SyncStore& store) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, store.List());
  const std::string prefix = std::string(kRestartName) + ".v";
  int64_t best = -1;
  for (const std::string& n : names) {
    if (n.compare(0, prefix.size(), prefix) != 0 || n.size() == prefix.size()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(n.c_str() + prefix.size(), &end, 10);
    if (*end == '\0' && v > best) best = v;
  }
  if (best < 0) return Status::NotFound("no version of " + std::string(kRestartName));
  return best;
}

uint64_t StampVersion(const Options& o, uint8_t* host, uint64_t salt, uint64_t v) {
  const uint64_t tag = MakeTag(salt, v);
  if (v == 0 || o.change.all()) {  // every page, as before --change-fraction
    Stamp(host, o.size, tag);
    return o.size;
  }
  const size_t pages = (o.size + kPage - 1) / kPage;
  const std::vector<uint32_t> changed = ChangedPages(o.change, pages, salt, v);
  StampPages(host, o.size, tag, changed);
  uint64_t bytes = 0;
  for (uint32_t p : changed) bytes += std::min<uint64_t>(kPage, o.size - uint64_t{p} * kPage);
  return bytes;
}

bool VerifyVersion(const Options& o, const uint8_t* host, uint64_t salt, int64_t version,
                   bool full, VerifyStats& stats) {
  const uint64_t v = static_cast<uint64_t>(version);
  const std::string what = "version " + std::to_string(version);
  if (o.change.all()) return Verify(host, o.size, MakeTag(salt, v), full, what, stats);
  const size_t pages = (o.size + kPage - 1) / kPage;
  std::vector<uint64_t> tags = LastStampVersions(o.change, pages, salt, v);
  for (uint64_t& t : tags) t = MakeTag(salt, t);
  return VerifyPages(host, o.size, tags, MakeTag(salt, v), full, what, stats);
}

namespace {

constexpr const char* kName = kRestartName;
constexpr int kKeepVersions = 2;  // Cairn's default retention, mirrored by the baseline

// What both modes do, parameterized by the library's calls. Content is
// stamped into app's host view and uploaded inside the compute interval
// (no-op for host memory); the restored region is downloaded, then verified.
// `durable(v)` waits until version v is durable at the persistent tier
// (--persistent only; the baseline's returns at once).
// `after(v)` runs after version v's checkpoint returned, outside the timed
// call: it records what the library stored for it (r.stored_bytes, r.layered).
template <typename CkptFn, typename AfterFn, typename WaitFn, typename DurableFn,
          typename LatestFn, typename RestoreFn>
void RunRestart(const Options& o, uint64_t salt, BenchBuffer& app, CkptFn checkpoint,
                AfterFn after, WaitFn wait, DurableFn durable, LatestFn latest, RestoreFn restore,
                TrialResult& r) {
  const size_t size = o.size;
  const int64_t k = static_cast<int64_t>(o.count);
  uint8_t* host = app.host();
  FillBase(host, size);
  if (Status st = app.Upload(size); !st.ok()) {
    r.status = st.WithContext("upload");
    return;
  }

  const Clock::time_point phase = Clock::now();
  Clock::time_point last_checkpoint;
  for (int64_t v = 0; v < k; ++v) {
    const Clock::time_point deadline = DeadlineAfter(o.interval_ms);
    const Clock::time_point w0 = Clock::now();
    r.changed_bytes.push_back(StampVersion(o, host, salt, static_cast<uint64_t>(v)));
    r.app_write_s.push_back(Seconds(w0, Clock::now()));
    if (Status st = app.Upload(size); !st.ok()) {
      r.status = st.WithContext("upload version " + std::to_string(v));
      return;
    }
    r.forward.compute_overruns += ComputeUntil(deadline, o.compute, host, size) ? 1 : 0;
    const Clock::time_point t0 = Clock::now();
    last_checkpoint = t0;
    Status st = checkpoint(v);
    const double dt = Seconds(t0, Clock::now());
    Account(r.forward, dt, size);
    r.checkpoint_s.push_back(dt);
    if (!st.ok()) {
      r.status = st.WithContext("checkpoint version " + std::to_string(v));
      return;
    }
    after(v);
  }
  r.forward.wall_s = Seconds(phase, Clock::now());

  Clock::time_point t0 = Clock::now();
  Status st = wait(k - 1);
  r.wait_s = Seconds(t0, Clock::now());
  if (!st.ok()) {
    r.status = st.WithContext("wait for version " + std::to_string(k - 1));
    return;
  }
  if (!o.persistent_dir.empty()) {
    if (st = durable(k - 1); !st.ok()) {
      r.status = st.WithContext("wait for version " + std::to_string(k - 1) + " (persistent)");
      return;
    }
    r.persistent_durable_s = Seconds(last_checkpoint, Clock::now());
  }
  t0 = Clock::now();
  Result<int64_t> newest = latest();
  r.latest_s = Seconds(t0, Clock::now());
  Account(r.backward, r.latest_s, 0);
  if (!newest.ok()) {
    r.status = newest.status().WithContext("latest");
    return;
  }
  r.latest_version = *newest;
  if (*newest != k - 1) {
    r.verify.Fail("latest returned version " + std::to_string(*newest) + ", expected " +
                  std::to_string(k - 1));
    if (*newest < 0 || *newest >= k) return;  // nothing we know how to verify
  }

  std::memset(host, 0xA5, size);  // a restore that does nothing must not pass
  if (st = app.Upload(size); !st.ok()) {
    r.status = st.WithContext("upload scribble");
    return;
  }
  t0 = Clock::now();
  st = restore(*newest);
  r.restore_s = Seconds(t0, Clock::now());
  Account(r.backward, r.restore_s, size);
  r.backward.ops = 1;  // one restore (Latest is bookkeeping)
  if (!st.ok()) {
    r.status = st.WithContext("restore version " + std::to_string(*newest));
    return;
  }
  if (st = app.Download(size); !st.ok()) {
    r.status = st.WithContext("download version " + std::to_string(*newest));
    return;
  }
  VerifyVersion(o, host, salt, *newest, true, r.verify);
}

// The local directory's version files of the checkpoint: (version, size).
// Cairn's are "<dir>/restart/v<N>.cairn" (docs/format.md 3.1); temporary
// files (dot names) are skipped.
std::vector<TrialResult::VersionFile> VersionFiles(const std::string& lib_dir, bool async) {
  std::vector<TrialResult::VersionFile> out;
  const std::string dir = async ? lib_dir + "/" + kName : lib_dir;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  const std::string prefix = async ? "v" : std::string(kName) + ".v";
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    if (async && (n.size() < 7 || n.compare(n.size() - 6, 6, ".cairn") != 0)) continue;
    char* end = nullptr;
    const long long v = std::strtoll(n.c_str() + prefix.size(), &end, 10);
    if (end == n.c_str() + prefix.size() || (async ? *end != '.' : *end != '\0')) continue;
    struct stat sb {};
    const std::string path = dir + "/" + n;
    if (::stat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    TrialResult::VersionFile f{.version = v, .bytes = static_cast<uint64_t>(sb.st_size)};
    if (async) {  // the chain link as written (verifies the file's tables only)
      if (auto reader = format::FileReader::Open(os::FileSystem::Default(), path); reader.ok()) {
        f.depth = (*reader)->record().depth;
        f.base_version = (*reader)->record().base_version;
      }
    }
    out.push_back(f);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  return out;
}

}  // namespace

TrialResult RunRestartTrial(const Options& o, bool async, const std::string& dir,
                            BenchBuffer& app) {
  TrialResult r;
  r.async = async;
  r.sync_fsync = !async && o.sync_fsync;
  const uint64_t salt = NextTrialSalt();
  const std::string lib_dir = dir + (async ? "/cairn" : "/sync");
  const std::string persistent =
      o.persistent_dir.empty() ? "" : o.persistent_dir + (async ? "/cairn" : "/sync");
  if (!async) {
    Result<SyncStore> store = OpenTrialStore(o, lib_dir, o.size, r);
    if (!store.ok()) return r;
    // --persistent: the naive library writes each version there too, the same way.
    std::optional<SyncStore> copy;
    if (!persistent.empty()) {
      if (r.status = RemoveTree(persistent); !r.status.ok()) return r;
      Result<SyncStore> c = SyncStore::Open(persistent, o.sync_fsync, 0);
      if (!c.ok()) {
        r.status = c.status().WithContext("sync open " + persistent);
        return r;
      }
      copy.emplace(std::move(*c));
    }
    RunRestart(
        o, salt, app,
        [&](int64_t v) -> Status {
          for (SyncStore* s : {&*store, copy ? &*copy : nullptr}) {
            if (s == nullptr) continue;
            CAIRN_RETURN_IF_ERROR(s->Write(VersionFile(v), app, o.size));
            if (v >= kKeepVersions) CAIRN_RETURN_IF_ERROR(s->Remove(VersionFile(v - kKeepVersions)));
          }
          return Status::Ok();
        },
        [&](int64_t) {  // the baseline writes everything
          r.stored_bytes.push_back(o.size);
          r.layered.push_back(false);
        },
        [](int64_t) { return Status::Ok(); },  // every write has returned
        [](int64_t) { return Status::Ok(); },  // likewise at the persistent copy
        [&]() { return SyncLatest(*store); },
        [&](int64_t v) -> Status {
          CAIRN_ASSIGN_OR_RETURN(size_t got, store->Read(VersionFile(v), app, o.size, false));
          if (got != o.size) {
            return Status::SizeMismatch(VersionFile(v) + ": " + std::to_string(got) + " bytes");
          }
          return Status::Ok();
        },
        r);
    r.sync_write_s = store->write_seconds() + (copy ? copy->write_seconds() : 0);
    r.version_files = VersionFiles(lib_dir, false);
  } else {
    if (!persistent.empty()) {
      if (r.status = EmptyDir(persistent); !r.status.ok()) return r;
    }
    std::unique_ptr<Client> client = OpenTrialClient(o, lib_dir, r);
    if (client == nullptr) return r;
    Client& c = *client;
    if (Status st = c.Protect(0, app.app(), o.size); !st.ok()) {
      r.status = st.WithContext("Protect");
      return r;
    }
    // What each version stored: the change statistics' growth over its
    // Checkpoint call (planned there); none planned (changes = full): all.
    ChangeStats prev = c.GetStats().changes;
    RunRestart(
        o, salt, app, [&](int64_t v) { return c.Checkpoint(kName, v); },
        [&](int64_t v) {
          // --settle: the error, if any, shows again at the final Wait.
          if (o.settle) (void)c.Wait(kName, v, Level::kLocal);
          const ChangeStats now = c.GetStats().changes;
          const bool planned = now.full_versions + now.layered_versions >
                               prev.full_versions + prev.layered_versions;
          r.stored_bytes.push_back(planned ? now.bytes_stored - prev.bytes_stored : o.size);
          r.layered.push_back(now.layered_versions > prev.layered_versions);
          prev = now;
        },
        [&](int64_t v) { return c.Wait(kName, v, Level::kLocal); },
        [&](int64_t v) { return c.Wait(kName, v, Level::kPersistent); },
        [&]() { return c.Latest(kName); }, [&](int64_t v) { return c.Restore(kName, v); }, r);
    r.stats = c.GetStats();
    r.version_files = VersionFiles(lib_dir, true);
    const Clock::time_point t0 = Clock::now();
    Status cs = c.Close();
    r.close_s = Seconds(t0, Clock::now());
    if (r.status.ok() && !cs.ok()) r.status = cs.WithContext("Client::Close");
  }
  // The restart as users know it: a new process restores from cold files.
  if (o.cold_restart && r.status.ok() && r.verify.mismatches == 0) {
    std::vector<std::string> dirs = {lib_dir};
    if (!persistent.empty()) dirs.push_back(persistent);
    ColdRestartTrial(o, async, lib_dir, dirs, static_cast<int64_t>(o.count) - 1, salt, r);
  }
  return r;
}

}  // namespace cairn::bench
