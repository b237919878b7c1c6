// The global commit learned in the background (docs/mpi.md, "The global
// commit in the background"). MPI-free: the reductions are the Group's.
//
// A chain of nonblocking MIN reductions runs on the Group's own channel. Each
// member contributes, when it starts a round, its newest locally committed
// version of the name it checkpointed last (and the name's digest); a round
// whose result says every member contributed the same version v of the same
// name proves v is committed on every member, and each member records
// `committed v` in its manifest. Rounds are driven only by Progress(), which
// the client calls at its Cairn calls on the thread that opened it: it tests
// the outstanding round (MPI_Test) and, once that is done, starts the next
// (MPI_Iallreduce). No thread makes MPI calls.
//
// The manifest write (temp + fsync + rename) is not done on the caller's
// thread, so that checkpoint stays non-blocking: a small recorder thread of
// this class (no MPI) writes it. The collective calls' own records go
// through Record(), serialized with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "redundancy/checkpoints.hpp"
#include "redundancy/collective.hpp"
#include "redundancy/progress_thread.hpp"
#include "util/mutex.hpp"

namespace cairn::collective {

class GlobalCommit {
 public:
  // What a member has committed locally (Checkpoints::NewestLocal).
  using Local = redundancy::Checkpoints::Commit;

  // The scheduler slice (os/sched/slice.hpp) of the threads whose wake-ups
  // the global commit's latency is made of: this recorder and the thread
  // that drives Progress (background.hpp). A reduction's step waits for
  // every member's thread to run; with 4 ranks computing on 2 cores the
  // default slice made a round take 6-23 ms, this one 1-3 ms. Their work
  // per wake-up is microseconds, so their CPU share does not change.
  static constexpr std::chrono::microseconds kSlice{100};

  // `group` and `local` (the member's checkpoints) outlive this object.
  // Starts the recorder thread. The rounds read each member's newest local
  // commit (local->NewestLocal) and tell retention (local->KeepGlobal) the
  // newest global commit and the newest version that may be common to every
  // member (a round's least newest local commit), so that a member running
  // ahead never deletes the version a restart would agree on (docs/mpi.md,
  // "Retention"). The global commit is passed once it is recorded: by a
  // collective call's record at once, and from the background only once a
  // round shows every member recorded it, so that the deletions it allows
  // do not delay any member's record on a shared disk.
  GlobalCommit(Group* group, Config config, Manifest shape, redundancy::Checkpoints* local);
  ~GlobalCommit();
  GlobalCommit(const GlobalCommit&) = delete;
  GlobalCommit& operator=(const GlobalCommit&) = delete;

  // The application checkpointed `version` of `name` (the capture was
  // accepted): later rounds are about it.
  void Checkpointed(std::string_view name, int64_t version) CAIRN_EXCLUDES(mu_);
  // Tests the outstanding round; once it is done, queues its record and
  // starts the next. Never blocks (the recorder does the I/O). A transport
  // error stops the rounds and is kept for TakeError().
  void Progress() CAIRN_EXCLUDES(mu_);
  // What Progress has left to do (progress_thread.hpp): kBusy while a
  // version committed locally is not recorded as the global commit yet,
  // kWaiting while a checkpointed one is not committed locally yet.
  redundancy::Pace Pace() CAIRN_EXCLUDES(mu_);
  // Collective when the group has nonblocking reductions (every member calls
  // it, at close; else local): completes the rounds every
  // member started (a member is at most one round behind another, so it
  // starts that one), then one blocking round of the final state records the
  // newest version every member committed, and the recorder drains. Rounds
  // stop afterwards.
  Status Finish() CAIRN_EXCLUDES(mu_);

  // A record by a collective call (client_group.cpp): the same manifest writes,
  // serialized with the recorder's.
  Status Record(const std::string& name, int64_t committed, int64_t persistent) CAIRN_EXCLUDES(mu_);
  // The state of `name` (group.hpp).
  GlobalCommitState State(const std::string& name) CAIRN_EXCLUDES(mu_);
  // The first error of a background record or round since the last call.
  Status TakeError() CAIRN_EXCLUDES(mu_);

 private:
  struct Recorded {
    int64_t version = -1;
    int64_t realtime_ns = -1;  // the write's end
    int64_t learned_ns = -1;   // the round's end (= realtime_ns for a collective call's record)
  };
  void Start() CAIRN_REQUIRES(mu_);
  // A round of `name` is done: queues its record when it proves a new
  // global commit.
  void Completed(const std::vector<int64_t>& result, const std::string& name) CAIRN_REQUIRES(mu_);
  // The newest global commit of `name` this member recorded (-1: none).
  int64_t RecordedLocked(const std::string& name) const CAIRN_REQUIRES(mu_);
  // Raises what retention keeps of `name` (either -1: unchanged).
  void KeepLocked(const std::string& name, int64_t global, int64_t common) CAIRN_REQUIRES(mu_);
  Status WriteLocked(const std::string& name, int64_t committed, int64_t persistent)
      CAIRN_REQUIRES(write_mu_);
  void RecorderLoop(std::stop_token stop);

  Group* const group_;
  const Config config_;
  const Manifest shape_;
  redundancy::Checkpoints* const local_;
  const bool rounds_on_;  // group_->nonblocking(): else Progress and Finish do no MPI

  Mutex write_mu_;  // one manifest write at a time (recorder or a collective call); before mu_
  Mutex mu_ CAIRN_ACQUIRED_AFTER(write_mu_);
  std::condition_variable_any cv_;  // queued_ gained an entry, or stop
  std::string name_ CAIRN_GUARDED_BY(mu_);  // the name rounds are about
  int64_t checkpointed_ CAIRN_GUARDED_BY(mu_) = -1;  // its newest version checkpointed
  std::unique_ptr<Group::Pending> pending_ CAIRN_GUARDED_BY(mu_);
  std::string round_name_ CAIRN_GUARDED_BY(mu_);  // name_ when pending_ started
  uint64_t started_ CAIRN_GUARDED_BY(mu_) = 0;
  uint64_t rounds_ CAIRN_GUARDED_BY(mu_) = 0;
  bool stopped_ CAIRN_GUARDED_BY(mu_) = false;  // Finish ran, or a round failed
  // name -> version to record (learned_ns: when), for the recorder
  std::map<std::string, Recorded> queued_ CAIRN_GUARDED_BY(mu_);
  bool writing_ CAIRN_GUARDED_BY(mu_) = false;                   // the recorder holds an entry
  std::map<std::string, Recorded> recorded_ CAIRN_GUARDED_BY(mu_);
  // name -> {newest global commit, newest possibly common version}: KeepLocked
  std::map<std::string, std::pair<int64_t, int64_t>> kept_ CAIRN_GUARDED_BY(mu_);
  Status error_ CAIRN_GUARDED_BY(mu_);
  std::jthread recorder_;  // last: started after everything it uses
};

}  // namespace cairn::collective
