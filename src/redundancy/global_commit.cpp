// The global commit learned in the background (global_commit.hpp).
#include "redundancy/global_commit.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "os/sched/slice.hpp"
#include "util/clock.hpp"

namespace cairn::collective {

namespace {

// A round's contribution: MIN over members of {v, -v, d, -d, g} gives the
// least and the largest newest committed version, and the least and largest
// name digest (equal pairs mean every member committed v of the same name),
// and the least global commit the members have recorded of it: every member
// has recorded g, so retention may now delete what g allows without its
// unlinks delaying another member's record on a shared disk.
constexpr size_t kValues = 5;

}  // namespace

GlobalCommit::GlobalCommit(Group* group, Config config, Manifest shape,
                           redundancy::Checkpoints* local)
    : group_(group),
      config_(std::move(config)),
      shape_(shape),
      local_(local),
      rounds_on_(group->nonblocking()) {
  recorder_ = std::jthread([this](std::stop_token stop) { RecorderLoop(stop); });
}

GlobalCommit::~GlobalCommit() {
  recorder_.request_stop();
  {
    MutexLock lock(&mu_);
    cv_.notify_all();
  }
  if (recorder_.joinable()) recorder_.join();
  // A round Finish did not complete (an MPI error, or no Finish): MPI cannot
  // cancel it; the Pending is leaked rather than freed under MPI's feet.
  MutexLock lock(&mu_);
  if (pending_) (void)pending_.release();
}

void GlobalCommit::Checkpointed(std::string_view name, int64_t version) {
  MutexLock lock(&mu_);
  if (name_ != name) {
    name_ = std::string(name);
    checkpointed_ = -1;
  }
  checkpointed_ = std::max(checkpointed_, version);
}

redundancy::Pace GlobalCommit::Pace() {
  if (!rounds_on_) return redundancy::Pace::kIdle;
  MutexLock lock(&mu_);
  if (stopped_ || name_.empty()) return redundancy::Pace::kIdle;
  const int64_t recorded = RecordedLocked(name_);
  if (local_->NewestLocal(name_).version > recorded) return redundancy::Pace::kBusy;
  return checkpointed_ > recorded ? redundancy::Pace::kWaiting : redundancy::Pace::kIdle;
}

void GlobalCommit::Start() {
  const Local mine = name_.empty() ? Local{} : local_->NewestLocal(name_);
  const int64_t d = name_.empty() ? 0 : Digest(name_);
  const int64_t values[kValues] = {mine.version, -mine.version, d, -d, RecordedLocked(name_)};
  auto p = group_->StartAllReduce(Group::Op::kMin, values, kValues);
  if (!p.ok()) {
    stopped_ = true;
    if (error_.ok()) error_ = p.status().WithContext("the global commit in the background");
    return;
  }
  pending_ = std::move(*p);
  round_name_ = name_;
  ++started_;
}

int64_t GlobalCommit::RecordedLocked(const std::string& name) const {
  auto it = recorded_.find(name);
  return name.empty() || it == recorded_.end() ? -1 : it->second.version;
}

void GlobalCommit::KeepLocked(const std::string& name, int64_t global, int64_t common) {
  auto& [g, c] = kept_.try_emplace(name, -1, -1).first->second;
  if (global <= g && common <= c) return;
  g = std::max(g, global);
  c = std::max(c, common);
  local_->KeepGlobal(name, g, c);
}

void GlobalCommit::Completed(const std::vector<int64_t>& r, const std::string& name) {
  ++rounds_;
  if (r.size() != kValues || name.empty()) return;
  if (r[2] != -r[3] || r[2] != Digest(name)) return;  // the members were not all at this name
  const int64_t v = r[0];
  // Every member's newest commit was at least v when it started the round:
  // v may be common to all, so retention keeps it even before it is proven.
  KeepLocked(name, r[4], v);
  if (v < 0 || v != -r[1]) return;
  if (auto it = recorded_.find(name); it != recorded_.end() && it->second.version >= v) return;
  Recorded& queued = queued_[name];
  if (queued.version < v) queued = {.version = v, .learned_ns = RealtimeNs()};
  cv_.notify_all();
}

void GlobalCommit::Progress() {
  if (!rounds_on_) return;
  MutexLock lock(&mu_);
  if (stopped_) return;
  if (pending_) {
    auto done = pending_->Test();
    if (!done.ok()) {
      stopped_ = true;
      if (error_.ok()) error_ = done.status().WithContext("the global commit in the background");
      return;
    }
    if (!*done) return;
    Completed(pending_->values(), round_name_);
    pending_.reset();
  }
  Start();
}

Status GlobalCommit::Finish() {
  if (!rounds_on_) {
    // No rounds were ever started (on any member: they share the group's
    // kind), so close needs no MPI; only the recorder's writes to finish.
    MutexLock lock(&mu_);
    stopped_ = true;
    cv_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return queued_.empty() && !writing_; });
    return std::exchange(error_, Status::Ok());
  }
  std::unique_ptr<Group::Pending> pending;
  std::string round_name;
  int64_t most = 0;
  {
    MutexLock lock(&mu_);
    pending = std::move(pending_);
    round_name = round_name_;
    most = static_cast<int64_t>(started_);
    stopped_ = true;
  }
  const int64_t mine = most;
  // Blocking steps, every member: the rounds' count, the outstanding round,
  // the one this member lags by, a last round of the final state.
  Status s = group_->AllReduce(Group::Op::kMax, &most, 1);
  auto complete = [&](std::unique_ptr<Group::Pending> p, const std::string& name) {
    Status w = p->Wait();
    if (!w.ok()) {
      (void)p.release();  // incomplete: see ~GlobalCommit
      return w;
    }
    MutexLock lock(&mu_);
    Completed(p->values(), name);
    return Status::Ok();
  };
  if (s.ok() && pending) s = complete(std::move(pending), round_name);
  if (s.ok() && mine < most) {
    MutexLock lock(&mu_);
    Start();
    pending = std::move(pending_);
    round_name = round_name_;
    if (!pending) s = error_;
  }
  if (s.ok() && pending) s = complete(std::move(pending), round_name);
  if (s.ok()) {
    std::string name;
    {
      MutexLock lock(&mu_);
      name = name_;
    }
    const Local last = name.empty() ? Local{} : local_->NewestLocal(name);
    const int64_t d = name.empty() ? 0 : Digest(name);
    int64_t recorded = -1;
    {
      MutexLock lock(&mu_);
      recorded = RecordedLocked(name);
    }
    std::vector<int64_t> values = {last.version, -last.version, d, -d, recorded};
    s = group_->AllReduce(Group::Op::kMin, values.data(), values.size());
    if (s.ok()) {
      MutexLock lock(&mu_);
      Completed(values, name);
    }
  }
  {
    MutexLock lock(&mu_);
    cv_.wait(lock, [&]() CAIRN_REQUIRES(mu_) { return queued_.empty() && !writing_; });
  }
  if (pending) (void)pending.release();  // left incomplete by an error: see ~GlobalCommit
  if (!s.ok()) return s.WithContext("completing the global commit at close");
  return TakeError();
}

Status GlobalCommit::WriteLocked(const std::string& name, int64_t committed, int64_t persistent) {
  Status s =
      RecordGlobal(config_.fs, config_, config_.scratch_dir, name, shape_, committed, persistent);
  if (s.ok() && persistent >= 0 && !config_.persistent_dir.empty()) {
    s = RecordGlobal(config_.fs, config_, config_.persistent_dir, name, shape_, committed,
                     persistent);
  }
  return s;
}

Status GlobalCommit::Record(const std::string& name, int64_t committed, int64_t persistent) {
  MutexLock write(&write_mu_);
  Status s = WriteLocked(name, committed, persistent);
  if (s.ok()) {
    const int64_t now = RealtimeNs();
    MutexLock lock(&mu_);
    Recorded& r = recorded_[name];
    if (committed > r.version) r = {committed, now, now};
    KeepLocked(name, committed, -1);
  }
  return s;
}

void GlobalCommit::RecorderLoop(std::stop_token stop) {
  (void)os::RequestSlice(kSlice);  // unsupported: only the wake-up is later
  for (;;) {
    std::string name;
    Recorded job;
    {
      MutexLock lock(&mu_);
      cv_.wait(lock, stop, [&]() CAIRN_REQUIRES(mu_) { return !queued_.empty(); });
      if (queued_.empty()) return;  // stop requested with nothing left
      name = queued_.begin()->first;
      job = queued_.begin()->second;
      queued_.erase(queued_.begin());
      writing_ = true;
    }
    Status s;
    {
      MutexLock write(&write_mu_);
      s = WriteLocked(name, job.version, -1);
    }
    const int64_t now = RealtimeNs();
    MutexLock lock(&mu_);
    writing_ = false;
    if (s.ok()) {
      Recorded& r = recorded_[name];
      if (job.version > r.version) r = {job.version, now, job.learned_ns};
    } else if (error_.ok()) {
      error_ = s.WithContext("the global commit in the background");
    }
    cv_.notify_all();
  }
}

GlobalCommitState GlobalCommit::State(const std::string& name) {
  const Local local = local_->NewestLocal(name);
  MutexLock lock(&mu_);
  GlobalCommitState st{.local_version = local.version, .local_commit_ns = local.realtime_ns,
                       .rounds = rounds_};
  if (auto it = recorded_.find(name); it != recorded_.end()) {
    st.global_version = it->second.version;
    st.global_record_ns = it->second.realtime_ns;
    st.global_learned_ns = it->second.learned_ns;
  }
  return st;
}

Status GlobalCommit::TakeError() {
  MutexLock lock(&mu_);
  return std::exchange(error_, Status::Ok());
}

}  // namespace cairn::collective
