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
//   Run      any other chore (the pipeline's history-directory removal)
//
// It owns its Worker (queue, thread) and nothing else; the entries and what a
// copy's result means belong to its owner (the pipeline), reached through the
// narrow Owner interface below, so a test drives it over a temp dir.
//
// Locking: it shares its owner's mutex (*mu), which guards the queue and the
// entries' fields. Every chore runs with *mu dropped (file I/O); the Owner's
// callbacks are called with it held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <set>
#include <vector>

#include "cairn/status.hpp"
#include "engine/entry.hpp"
#include "engine/worker.hpp"
#include "tiers/file_tier.hpp"
#include "util/mutex.hpp"
#include "util/thread_annotations.hpp"

namespace cairn::core {

class Mover {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // What it needs of its owner; each is called with *mu held.
  struct Owner {
    // The copy of e to the persistent tier ended with s (its context names
    // the version), started at t0 and took `seconds`.
    std::function<void(const EntryPtr& e, const Status& s, TimePoint t0, double seconds)> copied;
    // Retention: whether committed version v of checkpoint `name` may leave
    // the local (local = true) or persistent tier now. The owner says no for
    // a version it still needs, and forgets a local one it lets go.
    std::function<bool(const std::string& name, int64_t v, bool local)> may_retire;
    // Whether version v of checkpoint `name` is on its way to the persistent
    // tier by other means (the persister, or a copy queued earlier): a
    // layered version built on it waits (Copy copies no base twice at once).
    std::function<bool(const std::string& name, int64_t v)> persisting;
    // The newest version of checkpoint `name` committed on every rank of an
    // MPI job (-1: none, or not in a job): retention also keeps the newest
    // `keep` versions up to it.
    std::function<int64_t(const std::string& name)> global_of;
    // The base of version v of checkpoint `name` if the owner knows it (-1:
    // a full version), so retention reads no file the owner wrote itself;
    // nullopt: retention reads the file's header and tables.
    std::function<std::optional<int64_t>(const std::string& name, int64_t v)> base_of;
  };

  // persistent: null without a persistent tier (Copy is then a
  // precondition violation). block_bytes: the largest block to copy.
  // keep: versions retention keeps per name and tier.
  Mover(Mutex* mu, std::condition_variable_any* done, const tiers::FileTier* local,
        const tiers::FileTier* persistent, uint32_t block_bytes, size_t keep, Owner owner);

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
  void Remove(const tiers::FileTier* tier, const std::string& name, format::EntryKind kind, int64_t number);
  void Run(std::function<void()> chore);  // runs with *mu dropped
  bool Idle() const { return worker_.Idle(); }

 private:
  using Chore = std::function<void()>;

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
  const Owner owner_;
  std::vector<EntryPtr> delayed_ CAIRN_GUARDED_BY(*mu_);  // copies waiting for a base
  Worker<Chore> worker_;  // last: its thread is joined before the rest goes
};

}  // namespace cairn::core
