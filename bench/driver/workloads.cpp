// The adjoint trials (uniform, trace): a forward pass of Push calls, then a
// backward pass of Pop calls in reverse order, against Cairn's History (async)
// or the naive baseline (sync). The timing contract is in trial.hpp.
#include <string>

#include "driver/bench.hpp"
#include "cairn/cairn.hpp"
#include "common/files.hpp"
#include "driver/bench_buffer.hpp"
#include "common/pattern.hpp"
#include "driver/sync_baseline.hpp"
#include "driver/trial.hpp"

namespace cairn::bench {
namespace {

// Forward pass then backward pass over `plan`. push(step, data, n) -> Status,
// pop(step, dst, capacity) -> Result<size_t>, where data/dst is the
// application memory (app.app()). Content is stamped into the host view and
// uploaded (a no-op for host memory) inside the compute interval, and
// downloaded before it is verified, likewise. Stops at the first failing call
// (recorded in r.status).
template <typename PushFn, typename PopFn>
void RunPasses(const Options& o, const std::vector<Step>& plan, BenchBuffer& app, PushFn push,
               PopFn pop, TrialResult& r) {
  const uint64_t salt = NextTrialSalt();
  const size_t capacity = MaxBytes(plan);
  uint8_t* host = app.host();
  FillBase(host, capacity);
  if (Status st = app.Upload(capacity); !st.ok()) {
    r.status = st.WithContext("upload");
    return;
  }
  const int64_t n = static_cast<int64_t>(plan.size());

  Clock::time_point phase = Clock::now();
  for (int64_t k = 0; k < n; ++k) {
    const Step& s = plan[k];
    const Clock::time_point deadline = DeadlineAfter(s.compute_ms);
    Stamp(host, s.bytes, MakeTag(salt, k));
    if (Status st = app.Upload(s.bytes); !st.ok()) {
      r.status = st.WithContext("upload step " + std::to_string(k));
      return;
    }
    r.forward.compute_overruns += ComputeUntil(deadline, o.compute, host, s.bytes) ? 1 : 0;
    const Clock::time_point t0 = Clock::now();
    Status st = push(k, app.app(), s.bytes);
    Account(r.forward, Seconds(t0, Clock::now()), s.bytes);
    if (!st.ok()) {
      r.status = st.WithContext("push step " + std::to_string(k));
      return;
    }
  }
  r.forward.wall_s = Seconds(phase, Clock::now());
  if (o.forward_only) return;  // the steps left are dropped by History::Close

  int64_t unverified = -1;  // restored step whose check is part of the next compute
  auto check = [&](int64_t k) -> bool {
    if (Status st = app.Download(plan[k].bytes); !st.ok()) {
      r.status = st.WithContext("download step " + std::to_string(k));
      return false;
    }
    Verify(host, plan[k].bytes, MakeTag(salt, k), o.verify_full, "step " + std::to_string(k),
           r.verify);
    return true;
  };
  phase = Clock::now();
  for (int64_t k = n - 1; k >= 0; --k) {
    const Step& s = plan[k];
    const Clock::time_point deadline = DeadlineAfter(s.compute_ms);
    if (unverified >= 0 && !check(unverified)) return;
    unverified = -1;
    r.backward.compute_overruns += ComputeUntil(deadline, o.compute, host, capacity) ? 1 : 0;
    const Clock::time_point t0 = Clock::now();
    Result<size_t> got = pop(k, app.app(), capacity);
    Account(r.backward, Seconds(t0, Clock::now()), s.bytes);
    if (!got.ok()) {
      r.status = got.status().WithContext("pop step " + std::to_string(k));
      return;
    }
    if (*got != s.bytes) {
      r.verify.Fail("step " + std::to_string(k) + ": pop returned " + std::to_string(*got) +
                    " bytes, pushed " + std::to_string(s.bytes));
    } else {
      unverified = k;
    }
  }
  r.backward.wall_s = Seconds(phase, Clock::now());
  if (unverified >= 0) check(unverified);
}

}  // namespace

TrialResult RunAdjointTrial(const Options& o, const std::vector<Step>& plan, bool async,
                            const std::string& dir, BenchBuffer& app) {
  TrialResult r;
  r.async = async;
  r.sync_fsync = !async && o.sync_fsync;
  if (!async) {
    Result<SyncStore> store = OpenTrialStore(o, dir + "/sync", MaxBytes(plan), r);
    if (!store.ok()) return r;
    auto name = [](int64_t k) { return "step-" + std::to_string(k); };
    RunPasses(
        o, plan, app,
        [&](int64_t k, const uint8_t*, size_t n) { return store->Write(name(k), app, n); },
        [&](int64_t k, uint8_t*, size_t cap) { return store->Read(name(k), app, cap, true); }, r);
    r.sync_write_s = store->write_seconds();
    return r;
  }

  std::unique_ptr<Client> client = OpenTrialClient(o, dir + "/cairn", r);
  if (client == nullptr) return r;
  Clock::time_point t0 = Clock::now();
  Result<std::unique_ptr<History>> history = client->OpenHistory("bench");
  r.history_open_s = Seconds(t0, Clock::now());
  if (!history.ok()) {
    r.status = history.status().WithContext("OpenHistory");
    return r;
  }
  History& h = **history;
  RunPasses(
      o, plan, app, [&](int64_t k, const uint8_t* p, size_t n) { return h.Push(k, p, n); },
      [&](int64_t k, uint8_t* p, size_t cap) { return h.Pop(k, p, cap); }, r);
  r.stats = client->GetStats();
  t0 = Clock::now();
  Status hs = h.Close();
  Status cs = client->Close();
  r.close_s = Seconds(t0, Clock::now());
  if (r.status.ok() && !hs.ok()) r.status = hs.WithContext("History::Close");
  if (r.status.ok() && !cs.ok()) r.status = cs.WithContext("Client::Close");
  return r;
}

}  // namespace cairn::bench
