// The persistent tier, wired (docs/design.md, "Persistence"): what follows
// the persister's and the mover's jobs (their Owners, stage_owners.hpp). A checkpoint
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

#include "engine/stage_owners.hpp"

namespace cairn::core {

// The persistent copy of e ended with s, from the cache (span "persist") or
// from the local file; span null: failed before anything was traced.
void Pipeline::StageOwners::NotePersisted(Pipeline* p, const EntryPtr& e, const Status& s,
                                          std::chrono::steady_clock::time_point t0, double seconds,
                                          const char* span) {
  p->store_.PersistEnded(*e, s);
  p->mover_.Resume(e->name);  // copies of layers waiting for it as their base
  if (s.ok()) {
    p->tracer_.Span(span, "persistent", t0, std::chrono::steady_clock::now(),
                    e->layout.stored_bytes, e->name, e->number);
    p->stats_.flush_persistent.bytes += e->layout.stored_bytes;
    p->stats_.flush_persistent.ops += 1;
    p->stats_.flush_persistent.seconds += seconds;
    if (e->local().committed) p->mover_.Retain(e->name);  // else the flusher's commit queues it
  } else {
    ++p->stats_.failed_flushes;
    if (p->unreported_error_.ok()) p->unreported_error_ = s;
  }
  p->cv_app_.notify_all();
}

void Pipeline::StageOwners::PersisterOwner::Fail(const EntryPtr& e, const Status& s) {
  NotePersisted(p_, e, s.WithContext("persistent tier"), {}, 0, nullptr);
}
void Pipeline::StageOwners::PersisterOwner::Committed(const EntryPtr& e,
                                                      Flusher::TimePoint flush_start,
                                                      double io_seconds) {
  NotePersisted(p_, e, Status::Ok(), flush_start, io_seconds, "persist");
}
// After the persister's turn at e, whatever became of it: committed, failed,
// consumed, or given up (a block it needed was evicted).
void Pipeline::StageOwners::PersisterOwner::Flushed(const EntryPtr& e) {
  p_->store_.PersisterDone(*e);
  p_->store_.DropHold(e);
  p_->prefetcher_.Wake();           // its blocks are evictable now
  if (!e->persist().pending) return;  // committed, or failed (booked)
  if (e->consumed() || e->failed()) {
    p_->store_.PersistDropped(*e);  // never to be persisted; Wait reports why
    p_->mover_.Resume(e->name);  // copies waiting for it as their base
    p_->cv_app_.notify_all();
    return;
  }
  // Given up: the committed local file is copied instead (now, or by
  // FlusherOwner::Committed once it is committed).
  if (e->local().committed) p_->mover_.Copy(e);
}

void Pipeline::StageOwners::MoverOwner::Copied(const EntryPtr& e, const Status& s,
                                               Mover::TimePoint t0, double seconds) {
  NotePersisted(p_, e, s, t0, seconds, "persist (file copy)");
  if (s.ok()) ++p_->stats_.persist_file_copies;
}
// Retention: a version still bound for the persistent tier, or not yet
// committed locally, is kept (a later pass removes it), and so is an MPI
// job's newest possibly common version (SetGlobalCommit).
bool Pipeline::StageOwners::MoverOwner::MayRetire(const std::string& name, int64_t v, bool local) {
  if (p_->commits_.Common(name) == v) return false;
  EntryPtr e = p_->catalog_.Find(format::EntryKind::kCheckpoint, name, v);
  if (e && (e->persist().pending || !e->local().committed)) return false;
  // The base of a layered version still in flight (captured before a newer
  // version committed) must outlive that version's commit.
  if (p_->catalog_.IsBaseOfUncommitted(name, v)) return false;
  if (e && local) p_->Consume(e);  // older than the newest `keep` committed ones
  return true;
}

}  // namespace cairn::core
