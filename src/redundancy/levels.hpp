// The redundancy levels of a client opened in a group (docs/mpi.md): their
// settings (the mpi.* configuration keys: CAIRN_L2_EVERY, CAIRN_L3_EVERY,
// CAIRN_L3_GROUP, CAIRN_L4_EVERY),
// whose turn a wait is, the recoveries before a collective restore and the
// MPI stats. One owner for that state, so that client.cpp only says *when*
// (after a collective wait, before a collective restore) and Levels says
// *what*. MPI-free: the messages are the Group's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cairn/cairn.hpp"
#include "cairn/config.hpp"
#include "cairn/group.hpp"
#include "cairn/status.hpp"
#include "redundancy/checkpoints.hpp"
#include "redundancy/newest.hpp"
#include "redundancy/parity/background_encoder.hpp"
#include "redundancy/parity/xor_parity.hpp"
#include "redundancy/partner/partner.hpp"
#include "redundancy/partner/partner_transfer.hpp"
#include "redundancy/progress_thread.hpp"
#include "util/mutex.hpp"

namespace cairn::redundancy {

class Level;  // redundancy.hpp

// The levels' settings, agreed by every member, and the partner map and XOR
// sets they need.
struct Plan {
  int64_t l2_every = 0, l3_every = 0, l4_every = 0;  // 0 = off
  partner::Map partner;  // when l2_every > 0
  parity::Sets sets;     // when l3_every > 0
};

// The settings from `config` (the mpi.* keys, checked by LoadConfig and
// agreed across members by CheckConfigsAgree before this), and the partner
// map and XOR sets they need; `config` is the job's configuration (L4 needs
// a persistent directory). kConfig on every member naming what is wrong.
// Collective.
Result<Plan> AgreePlan(Group& group, const Config& config);

// Turns (a name's version) remembered until waited for. Bounded: turns that
// nobody waits for are forgotten, smallest first.
class TurnSet {
 public:
  void Add(const std::string& name, int64_t version) {
    if (set_.size() >= 64) set_.erase(set_.begin());
    set_.insert({name, version});
  }
  bool Contains(const std::string& name, int64_t version) const { return set_.contains({name, version}); }
  void Erase(const std::string& name, int64_t version) { set_.erase({name, version}); }

 private:
  std::set<std::pair<std::string, int64_t>> set_;
};

// The newest version of a name each level protects on this member.
struct Protection {
  Newest l2;  // this member's copy stored by its partner
  Newest l3;  // its set's parity stored
};

class Levels final : private parity::BackgroundEncoder::Listener {
 public:
  // `group` and `local` (the member's checkpoints, as the client sees
  // them: client_group.cpp) outlive this object; `config` is the member's
  // own (RankConfig).
  // With L2 on a group with point_to_point(), the partner copies travel in
  // the background (partner_transfer.hpp); otherwise in the wait.
  Levels(Group* group, Config config, Plan plan, Checkpoints* local,
         partner::TransferLimits limits = {});
  ~Levels();

  // The application checkpointed `version` of `name` (`ok`: the capture
  // was accepted). Every l2_every-th checkpoint of the client (over all
  // names) is an L2 turn: its version is queued for the partner, to start
  // at a later Progress once committed locally; with the parity in the
  // background (EncodeInBackground), every l3_every-th is an L3 turn,
  // queued for the encoder. Any thread; no MPI.
  void Checkpointed(const std::string& name, int64_t version, bool ok) CAIRN_EXCLUDES(turns_mu_);
  // Before the application's checkpoint of `version` of `name` is captured:
  // whether the persistent tier takes it. With L4 on, every l4_every-th
  // checkpoint of the client (over all names, failed ones too, as for L2)
  // is an L4 turn and the others stay local; with L4 off, every one (the
  // persistent tier, when configured, writes them all). Any thread; no MPI.
  bool PersistTurn(const std::string& name, int64_t version) CAIRN_EXCLUDES(turns_mu_);
  // Moves the background partner copies on (never waits for another
  // member) and says what is left to do (progress_thread.hpp). On the
  // thread that may call MPI.
  Pace Progress();
  // At close, after the last local commit: completes the background
  // copies (every member closes). Collective.
  Status Finish();

  // With Cairn's own progress threads (client_group.cpp) and L2 or L3 on:
  // L3's turns are every l3_every-th checkpoint of the client (over all
  // names, as L2's), each encoded in the background over `group` (this
  // member's duplicate of the client's group) once committed locally, and
  // no wait waits for it unless it asks for L3 (AtLevels); after a node
  // loss the older versions come back there too (RecoverOlder; docs/mpi.md,
  // "Progress"). Every member calls it, once, right after construction, or
  // none does.
  void EncodeInBackground(std::unique_ptr<Group> group);
  Protection Protected(const std::string& name) const CAIRN_EXCLUDES(stats_mu_);

  // L2 or L3 on: lost versions may come back from a level.
  bool redundant() const { return plan_.l2_every > 0 || plan_.l3_every > 0; }

  // After a collective wait for `version` at `level` (kLocal /
  // kPersistent): when its checkpoint was an L4 turn (PersistTurn), the
  // persistent copies first, then the global commit's record (hooks.record,
  // once per wait: committed, and persistent when the wait or its L4 turn
  // made it so), then the L2 / L3 levels whose turn it is (L3: every
  // l3_every-th call, every member's n-th call is its n-th wait; in the
  // background instead, the first failure of an encoding). kState
  // on every member when the version was an L2 or L4 turn on some members
  // and not on others. Collective.
  Status AfterWait(const std::string& name, int64_t version, cairn::Level level);

  // WaitAtLevels (cairn/group.hpp): kConfig when a level asked was not set
  // up at open (its mpi.l*_every is 0). The same on every member.
  Status CheckAsked(const WaitLevels& asked, const std::string& label) const;
  // After that wait: records the global commit (persistent too when asked),
  // then exactly the levels asked, whatever the turn counters say (an L2
  // copy of a version that was no turn is queued now). Not counted as a
  // wait. Collective.
  Status AtLevels(const std::string& name, int64_t version, const WaitLevels& asked);

  // Before a collective latest / restore (redundancy::Recover): members that
  // lack the newest version <= bound every member has (or distrust their
  // copy of it) get it back from L2 or L3. Logs which level served this
  // member. Collective; a no-op without L2 and L3.
  Status Recover(const std::string& name, int64_t bound, int64_t distrust);

  // After a collective restore of `version`: counts which level served this
  // member (a recovery just before, its local file, or its persistent one).
  void CountRestore(const std::string& name, int64_t version);

  MpiStats stats() const CAIRN_EXCLUDES(stats_mu_);

 private:
  void Count(uint64_t MpiStats::*field, uint64_t n = 1) CAIRN_EXCLUDES(stats_mu_);
  bool L2Turn(const std::string& name, int64_t version) CAIRN_EXCLUDES(turns_mu_);
  bool L4Turn(const std::string& name, int64_t version) CAIRN_EXCLUDES(turns_mu_);
  // kState on every member unless `turn` (of level 2 or 4, `what` it
  // makes) is the same on all: a member that waits for a copy its partners
  // do not make would wait forever.
  Status AgreeTurn(bool turn, int level, const std::string& what, const std::string& label);
  Status CompleteL2(const std::string& name, int64_t version);
  // After a recovery of `version`: the older versions whose partner copies
  // a lost node took (partner.Older) are queued for the background
  // transfers; without them, a log line says they come back at their next
  // L2 turns. Not collective.
  void ResendOlder(const std::string& name, const Level& partner, int64_t version,
                   const std::vector<int64_t>& intact);
  // After a recovery of `version` (`served`: this member got it back from
  // a level): when some member did and L2 or L3 is on, the older kept
  // versions are recovered in the background (BackgroundEncoder::
  // QueueOlder, with the partner and the parity levels): the lost members'
  // files, and their own parity of them, come back. Collective.
  Status RecoverOlder(const std::string& name, int64_t version, bool served);
  // A partner copy made in a wait (without transfers_): stats and protection.
  void Replicated(const std::string& name, int64_t version) CAIRN_EXCLUDES(stats_mu_);
  // The parity (L3) of the version, agreed, timed and counted.
  Status EncodeL3(const std::string& name, int64_t version, const std::string& label) CAIRN_EXCLUDES(stats_mu_);
  // The background encoder's report (BackgroundEncoder::Listener).
  void EncodingEnded(const parity::BackgroundEncoder::Done& d) override;
  // An encoding ended (inline or in the background): stats and protection.
  void Encoded(const std::string& name, int64_t version, uint64_t bytes, double seconds,
               int64_t end_ns) CAIRN_EXCLUDES(stats_mu_);
  // The background encoder's failures, agreed (every member calls it at
  // the same collective call); Ok without one.
  Status BackgroundError(bool drain);

  Group* const group_;
  const Config config_;
  const Plan plan_;
  Checkpoints* const local_;
  // Collective calls are made by one thread at a time (docs/mpi.md), so the
  // turn counter and the recoveries need no lock; stats may be read from
  // any thread (Client::GetStats).
  int64_t waits_ = 0;
  // The checkpoints counted for L2's and L4's turns; L2's turns not waited
  // for yet (without background transfers), L4's.
  Mutex turns_mu_;
  int64_t checkpoints_ CAIRN_GUARDED_BY(turns_mu_) = 0;
  int64_t persist_checkpoints_ CAIRN_GUARDED_BY(turns_mu_) = 0;
  int64_t l3_checkpoints_ CAIRN_GUARDED_BY(turns_mu_) = 0;  // with encoder_: L3's turns
  TurnSet turns_ CAIRN_GUARDED_BY(turns_mu_);
  TurnSet l4_turns_ CAIRN_GUARDED_BY(turns_mu_);
  std::unique_ptr<partner::Transfers> transfers_;  // L2 in the background
  // With Cairn's progress threads: L3 in the background, and the older
  // versions' recoveries after a node loss (L2 or L3).
  std::unique_ptr<parity::BackgroundEncoder> encoder_;
  // The level that last brought a version of a name back (2 or 3), for the
  // stats of the restore that follows.
  std::map<std::string, std::pair<int64_t, int>> recovered_;
  mutable Mutex stats_mu_;
  MpiStats stats_ CAIRN_GUARDED_BY(stats_mu_);
  std::map<std::string, Protection> protected_
      CAIRN_GUARDED_BY(stats_mu_);  // L2 without transfers_, L3
};

}  // namespace cairn::redundancy
