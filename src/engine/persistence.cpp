// The persistent tier, wired (docs/design.md, "Persistence"): a checkpoint
// is written to the persistent tier by the persister (a second Flusher)
// straight from the host cache, concurrently with the local flush, and its
// blocks are verified against the CRCs taken at capture before they are
// written. Its locally written blocks are held in the cache until the
// persister wrote them too, unless a capture needs the room: then the hold
// is released (BlockStore::ReleaseOldestHold), and if the persister meets an evicted
// block it gives the entry up and the mover copies the committed local file
// instead (reading it back, verified). Either way the version is committed
// at the persistent tier with fsync of file and directory.
#include <algorithm>
#include <chrono>

#include "engine/pipeline.hpp"

namespace cairn::core {

void Pipeline::BeginPersist(const EntryPtr& e) {
  e->persist_pending = true;
  if (!config_.persist_from_cache) return;  // CommitFlushed queues the file copy
  // A persistent layered version must never be visible before its base: the
  // persister writes it only when the base is committed there already, else
  // the mover copies the committed local chain, base first.
  if (e->layout.layered()) {
    EntryPtr base = catalog_.Find(e->kind, e->name, e->layout.record.base_version);
    if (!base || !base->persistent_committed) return;
  }
  e->persist_from_cache = true;
  store_.Hold(e);
  persister_.Push(e);
}

// After the persister's turn at e, whatever became of it: committed, failed,
// consumed, or given up (a block it needed was evicted).
void Pipeline::PersisterDone(const EntryPtr& e) {
  e->persist_from_cache = false;
  store_.DropHold(e);
  prefetcher_.Wake();               // its blocks are evictable now
  if (!e->persist_pending) return;  // committed, or failed (booked)
  if (e->consumed || e->failed()) {
    e->persist_pending = false;  // never to be persisted; Wait reports why
    mover_.Resume(e->name);      // copies waiting for it as their base
    cv_app_.notify_all();
    return;
  }
  // Given up: the committed local file is copied instead (now, or by
  // CommitFlushed once it is committed).
  if (e->local_committed) mover_.Copy(e);
}

// The persistent copy of e ended with s, from the cache (span "persist") or
// from the local file; span null: failed before anything was traced.
void Pipeline::NotePersisted(const EntryPtr& e, const Status& s,
                             std::chrono::steady_clock::time_point t0, double seconds,
                             const char* span) {
  e->persist_pending = false;
  mover_.Resume(e->name);  // copies of layers waiting for it as their base
  if (s.ok()) {
    e->persistent_committed = true;
    tracer_.Span(span, "persistent", t0, std::chrono::steady_clock::now(), e->layout.stored_bytes,
                 e->name, e->number);
    stats_.flush_persistent.bytes += e->layout.stored_bytes;
    stats_.flush_persistent.ops += 1;
    stats_.flush_persistent.seconds += seconds;
    if (e->local_committed) mover_.Retain(e->name);  // else CommitFlushed queues it
  } else {
    e->persistent_error = s;
    ++stats_.failed_flushes;
    if (unreported_error_.ok()) unreported_error_ = s;
  }
  cv_app_.notify_all();
}

// Retention: a version still bound for the persistent tier, or not yet
// committed locally, is kept (a later pass removes it), and so is an MPI
// job's newest possibly common version (SetGlobalCommit).
bool Pipeline::MayRetire(const std::string& name, int64_t v, bool local) {
  if (commits_.Common(name) == v) return false;
  EntryPtr e = catalog_.Find(format::EntryKind::kCheckpoint, name, v);
  if (e && (e->persist_pending || !e->local_committed)) return false;
  // The base of a layered version still in flight (captured before a newer
  // version committed) must outlive that version's commit.
  if (catalog_.IsBaseOfUncommitted(name, v)) return false;
  if (e && local) Consume(e);  // older than the newest `keep` committed ones
  return true;
}

}  // namespace cairn::core
