// The mover: the pipeline's file chores, on one thread, in the order they
// are queued:
//   Copy     copies a committed checkpoint from the local to the persistent
//            tier, verifying every block on the way (a damaged local file is
//            never propagated), then applies retention to its name; only for
//            versions the persister could not write from the host cache. A
//            layered version's chain goes base first: a persistent layered
//            version is never visible before its base (bases already there,
//            same content id, are not copied again; a base the owner is still
//            persisting delays the copy until Resume)
//   Retain   keeps the newest keep_versions committed versions of a name in
//            each tier (and, in an MPI job, the newest keep_versions up to its
//            global commit), and every version their chains (in that tier)
//            read, removing older ones its owner lets go
//   Remove   deletes one entry's file (consumed history steps, versions
//            consumed while their commit ran)
//   RemoveAll
//            deletes every committed version of a name in a tier (the
//            application's DeleteLocal), after the copies queued before it
//   HistoryClosed
//            asks the owner to remove a closed history's directory, after
//            the step deletions queued before it
//
// It owns its Worker (queue, thread) and nothing else. It reads the owner's
// catalog (which versions are still being persisted, the base of a version
// in the pipeline) and commit record (an MPI job's global commit); what a
// copy's result means and whether a version may go are its owner's (the
// pipeline's), reached through the narrow Owner interface below, so a test
// drives it over a temp dir.
//
// Locking: it shares its owner's mutex (*mu), which guards the queue, the
// catalog, the commit record and the entries' fields. Every chore runs with
// *mu dropped (file I/O), taking it for each look-up; the Owner's methods
// are called with it held (RemoveNameDir too: see there).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cairn/status.hpp"
#include "engine/catalog.hpp"
#include "engine/commit_record.hpp"
#include "engine/entry.hpp"
#include "engine/worker.hpp"
#include "tiers/file_tier.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class Mover {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // What it needs of its owner (the pipeline: stage_owners.hpp); each is
  // called with *mu held.
  class Owner {
   public:
    // The copy of e to the persistent tier ended with s (its context names
    // the version), started at t0 and took `seconds`.
    virtual void Copied(const EntryPtr& e, const Status& s, TimePoint t0, double seconds) = 0;
    // Retention: whether committed version v of checkpoint `name` may leave
    // the local (local = true) or persistent tier now. The owner says no for
    // a version it still needs, and forgets a local one it lets go.
    virtual bool MayRetire(const std::string& name, int64_t v, bool local) = 0;
    // The history `name` was closed and the deletions of its steps queued
    // before are done: its directory may go if nothing uses it any more.
    // The one chore run with *mu held: the owner's check and the rmdir must
    // not be separated by a flush creating a file there.
    virtual void RemoveNameDir(const std::string& name) = 0;

   protected:
    ~Owner() = default;
  };
  // The owner's state it reads (under *mu).
  struct Views {
    // The entries: a layered version whose base is still on its way to the
    // persistent tier (Entry::persist_pending) waits for it (Copy copies no
    // base twice at once); a version's base is read from its entry, so
    // retention reads no file the owner wrote itself.
    const Catalog* catalog = nullptr;
    // Null, or an MPI job's commits: retention also keeps the newest `keep`
    // versions up to a name's global commit.
    const CommitRecord* commits = nullptr;
  };

  // persistent: null without a persistent tier (Copy is then a
  // precondition violation). block_bytes: the largest block to copy.
  // keep: versions retention keeps per name and tier.
  Mover(Mutex* mu, std::condition_variable_any* done, const tiers::FileTier* local,
        const tiers::FileTier* persistent, uint32_t block_bytes, size_t keep, Views views,
        Owner* owner);

  // Starts the thread (`name`: its name in the tracer's timeline).
  void Start(const char* name = nullptr, Tracer* tracer = nullptr) { worker_.Start(name, tracer); }
  void RequestStop() { worker_.RequestStop(); }
  void Stop() { worker_.Stop(); }  // joins
  void Wake() { worker_.Wake(); }

  // Precondition (all below): *mu held.
  void Copy(const EntryPtr& e);
  // The persistent copy of a version of `name` ended (either way): copies
  // delayed for their base are queued again.
  void Resume(const std::string& name);
  void Retain(const std::string& name);
  void Remove(const tiers::FileTier* tier, const std::string& name, format::EntryKind kind,
              int64_t number);
  void RemoveAll(const tiers::FileTier* tier, const std::string& name, format::EntryKind kind);
  void HistoryClosed(const std::string& name);
  bool Idle() const { return worker_.Idle(); }

 private:
  // A queued chore (the list above); the fields its kind reads.
  struct Task {
    enum class Kind { kCopy, kRetain, kRemove, kRemoveAll, kHistoryClosed };
    Kind kind = Kind::kRetain;
    EntryPtr e;                                                     // kCopy
    std::string name;                                               // the others
    const tiers::FileTier* tier = nullptr;                          // kRemove, kRemoveAll
    format::EntryKind entry_kind = format::EntryKind::kCheckpoint;  // kRemove, kRemoveAll
    int64_t number = 0;                                             // kRemove
  };
  friend class Worker<Task, Mover>;
  // The Worker's (worker.hpp), with *mu held: does the task, with *mu
  // dropped except for kHistoryClosed.
  void RunJob(Task& t);

  // Copies e's committed local file and books the result.
  void CopyEntry(const EntryPtr& e) CAIRN_EXCLUDES(*mu_);
  // Copies e's local chain, bases first; *delayed: a base is being persisted
  // by the owner, e waits in delayed_ (nothing copied for it).
  Status CopyChain(const EntryPtr& e, bool* delayed) CAIRN_EXCLUDES(*mu_);
  void ApplyRetention(const std::string& name) CAIRN_EXCLUDES(*mu_);
  // Adds v and the versions its chain in `tier` reads (as far as they are
  // known or their headers open: a broken chain keeps what is left of it).
  void AddChain(const tiers::FileTier& tier, const std::string& name, int64_t v,
                std::set<int64_t>* needed) CAIRN_EXCLUDES(*mu_);

  Mutex* const mu_;
  const tiers::FileTier* const local_;
  const tiers::FileTier* const persistent_;
  const uint32_t block_bytes_;
  const size_t keep_;
  const Catalog* const catalog_ CAIRN_PT_GUARDED_BY(*mu_);
  const CommitRecord* const commits_ CAIRN_PT_GUARDED_BY(*mu_);
  Owner* const owner_;
  std::vector<EntryPtr> delayed_ CAIRN_GUARDED_BY(*mu_);  // copies waiting for a base
  Worker<Task, Mover> worker_;  // last: its thread is joined before the rest goes
};

}  // namespace cairn::core
