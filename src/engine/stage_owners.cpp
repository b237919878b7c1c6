#include "engine/stage_owners.hpp"

#include <chrono>

#include "util/clock.hpp"

namespace cairn::core {

// The checksummer -----------------------------------------------------------

const uint8_t* Pipeline::StageOwners::ChecksummerOwner::ChunkData(uint32_t chunk) {
  return p_->store_.data(chunk);
}
void Pipeline::StageOwners::ChecksummerOwner::Unpin(const EntryPtr& e) { p_->Unpin(e); }
void Pipeline::StageOwners::ChecksummerOwner::Checksummed() {
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
void Pipeline::StageOwners::FlusherOwner::Committed(const EntryPtr& e,
                                                    Flusher::TimePoint flush_start,
                                                    double io_seconds) {
  p_->CommitFlushed(e, flush_start, io_seconds);
}
void Pipeline::StageOwners::FlusherOwner::Flushed(const EntryPtr& e) { p_->FlushDone(e); }

void Pipeline::StageOwners::PersisterOwner::Fail(const EntryPtr& e, const Status& s) {
  p_->NotePersisted(e, s.WithContext("persistent tier"), {}, 0, nullptr);
}
void Pipeline::StageOwners::PersisterOwner::Committed(const EntryPtr& e,
                                                      Flusher::TimePoint flush_start,
                                                      double io_seconds) {
  p_->NotePersisted(e, Status::Ok(), flush_start, io_seconds, "persist");
}
void Pipeline::StageOwners::PersisterOwner::Flushed(const EntryPtr& e) { p_->PersisterDone(e); }

// The mover ----------------------------------------------------------------------

void Pipeline::StageOwners::MoverOwner::Copied(const EntryPtr& e, const Status& s,
                                               Mover::TimePoint t0, double seconds) {
  p_->NotePersisted(e, s, t0, seconds, "persist (file copy)");
  if (s.ok()) ++p_->stats_.persist_file_copies;
}
bool Pipeline::StageOwners::MoverOwner::MayRetire(const std::string& name, int64_t v, bool local) {
  return p_->MayRetire(name, v, local);
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
  if (block + 1 == e->blocks.size()) device.drain.ops += 1;
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

}  // namespace cairn::core
