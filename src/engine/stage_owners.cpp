#include "engine/stage_owners.hpp"

#include <chrono>

#include "util/clock.hpp"

namespace cairn::core {

// The checksummer -----------------------------------------------------------

const uint8_t* Pipeline::StageOwners::ChecksummerOwner::ChunkData(uint32_t chunk) {
  return p_->store_.data(chunk);
}
void Pipeline::StageOwners::ChecksummerOwner::Unpin(const EntryPtr& e) { p_->Unpin(e); }
void Pipeline::StageOwners::ChecksummerOwner::Checksummed(const EntryPtr& e, uint32_t b,
                                                          uint32_t crc) {
  p_->store_.Checksummed(*e, b, crc);
  p_->flusher_.Wake();
  p_->persister_.Wake();
}
bool Pipeline::StageOwners::ChecksummerOwner::Paused() { return p_->capture_copying_; }

// The flusher and the persister ------------------------------------------------

void Pipeline::StageOwners::FlusherOwner::Unpin(const EntryPtr& e) { p_->Unpin(e); }
void Pipeline::StageOwners::FlusherOwner::Fail(const EntryPtr& e, const Status& s) {
  p_->FailEntry(e, s);
}
void Pipeline::StageOwners::FlusherOwner::Skipped() { ++p_->stats_.flushes_skipped; }
// The entry's file is committed: stats, and what the mover does next.
void Pipeline::StageOwners::FlusherOwner::Committed(const EntryPtr& e,
                                                    Flusher::TimePoint flush_start,
                                                    double io_seconds) {
  p_->store_.LocalCommitted(*e);
  if (e->kind == format::EntryKind::kCheckpoint) {
    p_->commits_.NoteLocal(e->name, e->number,
                           std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
  }
  p_->tracer_.Span("flush", "local", flush_start, std::chrono::steady_clock::now(),
                   e->layout.stored_bytes, e->name, e->number);
  p_->TraceCache();
  p_->stats_.flush_local.bytes += e->layout.stored_bytes;
  p_->stats_.flush_local.ops += 1;
  p_->stats_.flush_local.seconds += io_seconds;
  if (e->consumed()) {
    // Popped while its commit was running: the file must go.
    p_->mover_.Remove(&p_->tier_for(e->kind), e->name, e->kind, e->number);
  } else if (e->kind == format::EntryKind::kCheckpoint) {
    if (e->persist().pending && !e->persist().from_cache) {
      p_->mover_.Copy(e);  // the persister gave it up before this commit
    } else if (!e->persist().pending) {
      p_->mover_.Retain(e->name);  // persisted already, or no persistent tier
    }                              // else the persister is on it and queues retention when done
  }
  p_->cv_app_.notify_all();
}
// After every flush: a history closed meanwhile gets its directory removed.
void Pipeline::StageOwners::FlusherOwner::Flushed(const EntryPtr& e) {
  if (e->kind == format::EntryKind::kCheckpoint) p_->SettleLayering(*e);
  if (e->kind == format::EntryKind::kHistoryStep && !p_->config_.history_persistent &&
      !p_->catalog_.HasHistory(e->name)) {
    // Its history was closed while this step was in flight: the directory
    // removal skipped then can happen now.
    const std::string name = e->name;
    p_->mover_.HistoryClosed(name);
  }
  p_->prefetcher_.Wake();
}

// The prefetcher -----------------------------------------------------------------

const Catalog& Pipeline::StageOwners::PrefetcherOwner::catalog() { return p_->catalog_; }
std::optional<uint32_t> Pipeline::StageOwners::PrefetcherOwner::AcquireChunk(const Entry& e,
                                                                             uint32_t write_bytes) {
  // Evicts only clean blocks of older captures than e.
  return p_->TryAcquireChunk(write_bytes, nullptr, e.seq);
}
void Pipeline::StageOwners::PrefetcherOwner::Unpin(const EntryPtr& e) { p_->Unpin(e); }
void Pipeline::StageOwners::PrefetcherOwner::Loaded(const EntryPtr& e, Prefetcher::TimePoint t0) {
  p_->tracer_.Span("prefetch", "prefetch", t0, std::chrono::steady_clock::now(),
                   e->layout.payload_bytes, e->name, e->number);
  p_->TraceCache();
  TierStats& op = p_->stats_.prefetch;
  op.bytes += e->layout.payload_bytes;
  op.ops += 1;
  op.seconds += SecondsSince(t0);
}
// A device step may be ready for host -> device.
void Pipeline::StageOwners::PrefetcherOwner::Finished() { p_->device_mover_.Wake(); }

// The device mover ---------------------------------------------------------------

std::optional<uint32_t> Pipeline::StageOwners::DeviceMoverOwner::TryAcquireChunk(
    uint32_t write_bytes) {
  // The room held for the persister too: it may be waiting for this very
  // drain (a device block's checksum comes after it).
  return p_->TakeChunk(write_bytes);
}
void Pipeline::StageOwners::DeviceMoverOwner::Unpin(const EntryPtr& e) { p_->Unpin(e); }
void Pipeline::StageOwners::DeviceMoverOwner::Drained(const EntryPtr& e, uint32_t block,
                                                      DeviceMover::TimePoint t0,
                                                      DeviceMover::TimePoint t1, bool bounced) {
  const uint32_t length = e->layout.blocks[block].length;
  DeviceStats& device = p_->stats_.device;
  device.drain.bytes += length;
  device.drain.seconds += SecondsBetween(t0, t1);
  if (bounced) device.bounce_bytes += length;
  if (block + 1 == e->blocks().size()) device.drain.ops += 1;
  if (p_->store_.Captured(*e, block)) p_->checksummer_.Push(e, block);
  p_->tracer_.Span("drain", "device", t0, t1, length, e->name, e->number);
}
void Pipeline::StageOwners::DeviceMoverOwner::Fail(const EntryPtr& e, const Status& s) {
  p_->FailEntry(e, s);
}
void Pipeline::StageOwners::DeviceMoverOwner::Prefetched(const EntryPtr& e, uint64_t bytes,
                                                         DeviceMover::TimePoint t0) {
  const auto now = std::chrono::steady_clock::now();
  TierStats& op = p_->stats_.device.prefetch;
  op.bytes += bytes;
  op.ops += 1;
  op.seconds += SecondsBetween(t0, now);
  p_->tracer_.Span("device prefetch", "prefetch", t0, now, bytes, e->name, e->number);
}
void Pipeline::StageOwners::DeviceMoverOwner::WaitForSlot(const char* span) {
  p_->WaitAsCaptureBlocked(span, /*device=*/true);
}

// The initializer ----------------------------------------------------------------

void Pipeline::StageOwners::InitializerOwner::Touched() { p_->prefetcher_.Wake(); }

// The device cache ---------------------------------------------------------------
void Pipeline::StageOwners::DeviceCacheOwner::Mapped() {
  MutexLock l(&p_->mu_);
  p_->cv_app_.notify_all();
  p_->device_mover_.Wake();
}

}  // namespace cairn::core
