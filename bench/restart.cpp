// The restart trial (fault-tolerance pattern): one protected region of
// --size, --count versions checkpointed --interval-ms apart, Wait(kLocal) for
// the last one, Latest, then Restore into the scribbled-over region and a full
// verification. The baseline does the same with one synchronous file per
// version, keeping the newest two like Cairn's default keep_versions.
// The timing contract is in trial.hpp.
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "bench.hpp"
#include "cairn/cairn.hpp"
#include "files.hpp"
#include "memory.hpp"
#include "pattern.hpp"
#include "restart.hpp"
#include "sync_baseline.hpp"
#include "trial.hpp"

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

namespace {

constexpr const char* kName = kRestartName;
constexpr int kKeepVersions = 2;  // Cairn's default retention, mirrored by the baseline

// What both modes do, parameterized by the library's calls. Content is
// stamped into app's host view and uploaded inside the compute interval
// (no-op for host memory); the restored region is downloaded, then verified.
// `durable(v)` waits until version v is durable at the persistent tier
// (--persistent only; the baseline's returns at once).
template <typename CkptFn, typename WaitFn, typename DurableFn, typename LatestFn,
          typename RestoreFn>
void RunRestart(const Options& o, uint64_t salt, BenchBuffer& app, CkptFn checkpoint, WaitFn wait,
                DurableFn durable, LatestFn latest, RestoreFn restore, TrialResult& r) {
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
    Stamp(host, size, MakeTag(salt, v));
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
  Verify(host, size, MakeTag(salt, static_cast<uint64_t>(*newest)), true,
         "version " + std::to_string(*newest), r.verify);
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
    RunRestart(
        o, salt, app, [&](int64_t v) { return c.Checkpoint(kName, v); },
        [&](int64_t v) { return c.Wait(kName, v, Level::kLocal); },
        [&](int64_t v) { return c.Wait(kName, v, Level::kPersistent); },
        [&]() { return c.Latest(kName); }, [&](int64_t v) { return c.Restore(kName, v); }, r);
    r.stats = c.GetStats();
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
