// L3 parity encoded off the application's thread (docs/mpi.md, "Progress"):
// with Cairn's own progress threads, the checkpoint of an L3 turn queues
// the version here; a thread of this object's encodes the queued
// versions in order (parity::Encode, streamed window by window) over a group
// of its own (Group::Duplicate), so that its collective exchanges never meet
// the application's collective calls on the client's group. Every member
// queues the same versions in the same order (every l3_every-th
// checkpoint of the client, as every member makes the same checkpoints),
// so the members' encoders run the same collective encodings.
// Back-pressure: while the member's application is inside a capture or a
// restore (Checkpoints::ApplicationBusy), the encoding pauses before its
// next window (the set's other members wait for it at that window's
// exchange), and an older version's recovery (QueueOlder) before its next
// exchange, unless a Drain waits for it: the application asked for it.
// MPI-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "engine/worker.hpp"
#include "redundancy/checkpoints.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/partner/partner.hpp"
#include "util/mutex.hpp"

namespace cairn::parity {

class BackgroundEncoder final : private Pauser {
 public:
  // One encoding's outcome, agreed by the set's members.
  struct Done {
    std::string name;
    int64_t version = -1;
    Status status;
    uint64_t bytes = 0;   // the parity file's
    double seconds = 0;   // the encoding's, agreement included
    int64_t end_ns = -1;  // realtime, when it was stored
    // The set skipped the version (Encode returned 0): retention removed it
    // before its turn, a newer version is there. Not an error.
    bool superseded = false;
  };
  // Who is told of each encoding (the levels: stats, the protected version).
  class Listener {
   public:
    // On the encoder's thread, after each encoding, either way.
    virtual void EncodingEnded(const Done& d) = 0;

   protected:
    ~Listener() = default;
  };
  // `group`: this member's duplicate of the client's group (every member
  // makes one); `sets`: L3's (none: L3 is off, nothing is encoded and older
  // versions come back from L2 alone); `partner`: L2's map (none: L2 is
  // off); `config` the member's own; `local`: the member's checkpoints (an
  // encoding waits until its version is committed locally). `local` and
  // `listener` (may be null) outlive this object.
  BackgroundEncoder(std::unique_ptr<Group> group, std::optional<Sets> sets,
                    std::optional<partner::Map> partner, Config config,
                    redundancy::Checkpoints* local, Listener* listener);
  // Runs what is queued, then stops. Without a Drain on every member
  // before, an encoding may wait for members that will not come: the
  // owner drains at close.
  ~BackgroundEncoder();
  BackgroundEncoder(const BackgroundEncoder&) = delete;
  BackgroundEncoder& operator=(const BackgroundEncoder&) = delete;

  // Queues `version` of `name`: encoded once committed locally (a version
  // that never is, fails its encoding on every member). Any thread.
  void Queue(const std::string& name, int64_t version) CAIRN_EXCLUDES(mu_);
  // After a node loss (docs/mpi.md, "Parity (L3)", step 6): queues the
  // recovery of up to `count` versions of `name` older than `version`, one
  // after the other, newest first: each is the newest version below the
  // last one that every member has, its partner holds or its set rebuilds
  // (redundancy::Recover with the partner level, without its re-sends, and
  // the parity level, over this encoder's group), so a lost member gets its
  // older files back and its own parity of them encoded again. Every member queues the same, at the
  // same point among its encodings. What fails is logged and ends that recovery, on every member;
  // it is not an encoding error. Any thread.
  void QueueOlder(const std::string& name, int64_t version, int count) CAIRN_EXCLUDES(mu_);
  // Blocks until every queued encoding ended (needs every member's encoder
  // to run them: every member drains at the same collective call). Returns
  // TakeError().
  Status Drain() CAIRN_EXCLUDES(mu_);
  // The first failed encoding since the last call (Ok: none).
  Status TakeError() CAIRN_EXCLUDES(mu_);

 private:
  struct Job {
    std::string name;
    int64_t version;
    int older = 0;  // > 0: QueueOlder's recovery, not an encoding
  };
  friend class core::Worker<Job, BackgroundEncoder>;
  void RunJob(Job& job);  // the Worker's, with mu_ held
  // An encoding's outcome (RunJob, without mu_).
  Done EncodeJob(const Job& job);
  // QueueOlder's recovery (RunJob, without mu_).
  void RecoverOlder(const Job& job);
  // Before each window of an encoding (Pauser): returns once the
  // application is not capturing or restoring, or a Drain began.
  void Pause() override;

  const std::unique_ptr<Group> group_;
  const std::optional<Sets> sets_;
  const std::optional<partner::Map> partner_;
  const Config config_;
  redundancy::Checkpoints* const local_;
  Listener* const listener_;
  Mutex mu_;
  std::condition_variable_any progress_;  // after every job
  std::atomic<int> draining_{0};          // Drains waiting: no Pause
  Status error_ CAIRN_GUARDED_BY(mu_);
  core::Worker<Job, BackgroundEncoder> worker_;  // last: joined before the rest goes
};

}  // namespace cairn::parity
