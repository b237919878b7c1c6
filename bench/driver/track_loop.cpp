#include "driver/track_loop.hpp"

#include <algorithm>
#include <cstring>

#include "driver/bench_buffer.hpp"
#include "common/pattern.hpp"
#include "driver/restart.hpp"
#include "driver/trial.hpp"

namespace cairn::bench {
namespace {

constexpr size_t kSlice = 64u << 10;
constexpr const char* kLoopName = "track-loop";

// The compute: `slices` 64 KiB slices of reads (one word per cache line),
// sweeping the buffer round and round from where the last call stopped.
void Compute(const uint8_t* buf, size_t n, uint64_t slices, size_t& pos) {
  uint64_t sum = 0;
  for (uint64_t s = 0; s < slices; ++s) {
    if (pos + kSlice > n) pos = 0;
    for (size_t end = std::min(n, pos + kSlice); pos + 8 <= end; pos += 64) {
      uint64_t w;
      std::memcpy(&w, buf + pos, 8);
      sum += w;
    }
  }
  asm volatile("" : : "r"(sum));
}

// Slices that take `ms` on this machine, untracked (median of 3 probes).
uint64_t Calibrate(const uint8_t* buf, size_t n, double ms, double& seconds) {
  constexpr uint64_t kProbe = 256;
  std::vector<double> t;
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const Clock::time_point t0 = Clock::now();
    Compute(buf, n, kProbe, pos);
    t.push_back(Seconds(t0, Clock::now()));
  }
  const double per = std::max(Median(t) / kProbe, 1e-9);
  const uint64_t slices = std::max<uint64_t>(1, static_cast<uint64_t>(ms / 1e3 / per));
  seconds = static_cast<double>(slices) * per;
  return slices;
}

// One trial. Tracked: under a client with o.changes, checkpointing (and
// waiting for the version to be local) between intervals, untimed.
// Untracked: the same under a client with --track-loop-baseline (hash by
// default: small layered checkpoints like the tracked side's, no tracker),
// or with no client at all. The control must have a client: on the
// development VM the compute ran 14-38% slower beside an idle-looking client
// than with none (its background work), and a changes = full client's full
// checkpoints left the next interval slower than tracking costs; both
// measured something other than tracking (docs/bench.md).
Status Trial(const Options& o, const std::string& dir, BenchBuffer& app, bool tracked,
             uint64_t salt, TrackLoopResult& r) {
  std::unique_ptr<Client> c;
  if (tracked || o.track_loop_baseline) {
    Options opt = o;
    if (!tracked) opt.changes = *o.track_loop_baseline;
    CAIRN_RETURN_IF_ERROR(EmptyDir(dir));
    CAIRN_ASSIGN_OR_RETURN(c, Client::Open(MakeConfig(opt, dir)));
    CAIRN_RETURN_IF_ERROR(c->Protect(0, app.app(), o.size));
  }
  uint8_t* host = app.host();
  FillBase(host, o.size);
  (void)StampVersion(o, host, salt, 0);
  if (c) {
    CAIRN_RETURN_IF_ERROR(c->Checkpoint(kLoopName, 0));
    CAIRN_RETURN_IF_ERROR(c->Wait(kLoopName, 0, Level::kLocal));
  }
  std::vector<double>& out = tracked ? r.tracked_s : r.untracked_s;
  std::vector<double>& writes = tracked ? r.tracked_write_s : r.untracked_write_s;
  size_t pos = 0;
  for (int i = 1; i <= o.track_loop_intervals; ++i) {
    const Clock::time_point t0 = Clock::now();
    const uint64_t changed = StampVersion(o, host, salt, static_cast<uint64_t>(i));
    writes.push_back(Seconds(t0, Clock::now()));
    Compute(host, o.size, r.work_slices, pos);
    out.push_back(Seconds(t0, Clock::now()));
    r.changed_pages = (changed + kPage - 1) / kPage;
    if (c) {
      CAIRN_RETURN_IF_ERROR(c->Checkpoint(kLoopName, i));
      CAIRN_RETURN_IF_ERROR(c->Wait(kLoopName, i, Level::kLocal));
    }
  }
  if (!tracked) return c ? c->Close() : Status::Ok();
  const Stats s = c->GetStats();
  r.tracker = s.changes.tracker;
  r.tracking_faults += s.changes.tracking_faults;
  r.fallbacks += s.changes.fallbacks;
  return c->Close();
}

}  // namespace

TrackLoopResult RunTrackLoop(const Options& o, const std::string& dir, BenchBuffer& app) {
  TrackLoopResult r;
  if (app.kind() != MemoryKind::kHost) {
    r.status = Status::InvalidArgument("--track-loop needs --memory host");
    return r;
  }
  r.work_slices = Calibrate(app.host(), o.size, o.track_loop_ms.value_or(o.interval_ms),
                            r.calibrated_s);
  const std::string loop_dir = dir + "/track-loop";
  for (int i = 0; i < o.repeat && r.status.ok(); ++i) {
    const uint64_t salt = NextTrialSalt();
    // Alternate which side goes first, so that neither always follows the
    // other's after-effects.
    for (bool tracked : {i % 2 == 1, i % 2 == 0}) {
      if (Status st = Trial(o, loop_dir, app, tracked, salt, r); !st.ok()) {
        r.status = st.WithContext(std::string("track loop (") +
                                  (tracked ? "tracked" : "untracked") + ")");
        break;
      }
    }
  }
  (void)RemoveTree(loop_dir);
  return r;
}

}  // namespace cairn::bench
