#include "engine/stages/device_mover.hpp"

#include <cstdio>
#include <string>
#include <utility>

#include "format/layout.hpp"
#include "util/log.hpp"

namespace cairn::core {

DeviceMover::DeviceMover(Mutex* mu, std::condition_variable_any* done, uint64_t* evictions,
                         Tracer* tracer, BlockStore* store, MemoryMovers* movers,
                         const Catalog* catalog, int depth, Owner* owner)
    : mu_(mu),
      done_(done),
      store_(store),
      catalog_(catalog),
      depth_(depth),
      movers_(movers),
      tracer_(tracer),
      owner_(owner),
      tier_(evictions, tracer),
      worker_(mu, done, this) {}

std::optional<DeviceMover::Job> DeviceMover::TakeJob(Worker<Job, DeviceMover>&) {
  mu_->AssertHeld();  // the Worker takes jobs with *mu held
  return Take();
}

void DeviceMover::RunJob(Job& j) {
  mu_->AssertHeld();  // the Worker runs jobs with *mu held
  j.drain ? DrainBlock(j.e, j.block) : Prefetch(j.e);
}

void DeviceMover::Attach(gpu::DeviceCache* cache, DeviceIo* io) {
  mu_->AssertHeld();
  cache_ = cache;
  io_ = io;
  tier_.Attach(cache);
}

std::optional<DeviceMover::Job> DeviceMover::Take() {
  if (auto job = worker_.PopFront()) return job;
  if (EntryPtr e = FindPrefetchTarget()) return Job{.e = e, .drain = false};
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Slots

bool DeviceMover::CacheUsable() const {
  mu_->AssertHeld();
  return cache_ && (cache_->mapped_slots() > 0 || !cache_->mapping_done());
}

std::optional<uint32_t> DeviceMover::TryAcquireSlot() {
  mu_->AssertHeld();
  return tier_.TryAcquire([](gpu::DeviceCache& cache) { return cache.Allocate(); });
}

std::optional<int32_t> DeviceMover::AcquireSlot() {
  mu_->AssertHeld();
  for (;;) {
    if (!CacheUsable()) return std::nullopt;
    if (auto s = TryAcquireSlot()) return static_cast<int32_t>(*s);
    // Waiting for the mapping thread, or for the drains.
    owner_->WaitForSlot(cache_->mapping_done() ? "blocked: device cache full"
                                               : "blocked: device cache mapping");
  }
}

void DeviceMover::DropSlot(Entry& e, uint32_t block) {
  mu_->AssertHeld();
  if (tier_.Drop(e, block)) done_->notify_all();  // a capture may take the slot
}

void DeviceMover::Push(const EntryPtr& e, uint32_t block) {
  mu_->AssertHeld();
  if (e->failed() || e->consumed()) {
    tier_.MarkClean(*e, block);
  } else {
    worker_.Push(Job{.e = e, .block = block});
  }
}

bool DeviceMover::DrainsPending() const {
  mu_->AssertHeld();
  const auto& in_hand = worker_.in_hand();
  return !worker_.queue().empty() || (in_hand && in_hand->drain);
}

void DeviceMover::Clear() {
  mu_->AssertHeld();
  tier_.Clear();
}

// ---------------------------------------------------------------------------
// Drains

bool DeviceMover::NothingToDrain(const EntryPtr& e, uint32_t block) {
  if (!e->consumed() && !e->failed() && e->blocks()[block].dsealed) return false;
  if (e->consumed()) {
    if (e->pins() == 0) DropSlot(*e, block);
  } else {
    tier_.MarkClean(*e, block);
  }
  done_->notify_all();
  return true;
}

uint32_t DeviceMover::WaitForChunk(uint32_t write_bytes) {
  for (;;) {
    if (auto c = owner_->TryAcquireChunk(write_bytes)) return *c;
    done_->wait(*mu_);
  }
}

void DeviceMover::DrainBlock(const EntryPtr& e, uint32_t block) {
  if (NothingToDrain(e, block)) return;
  const BlockState& bs = e->blocks()[block];
  const uint32_t length = e->layout.blocks[block].length;
  const uint32_t padded = static_cast<uint32_t>(format::AlignUp(length));
  // Room in the host cache first, with the entry not pinned: a pin would
  // keep the entry's own flushed blocks from being evicted, and a checkpoint
  // larger than the host cache would wait for itself. The slot cannot go
  // meanwhile: it is neither device-clean (evictable) nor released unless
  // the entry is consumed, which is checked again below.
  const uint32_t chunk = WaitForChunk(padded);
  if (NothingToDrain(e, block)) {  // it notified the waiters
    store_->Free(chunk);
    return;
  }
  store_->Place(*e, block, chunk);
  store_->Pin(*e);  // the slot and the chunk stay while we copy
  uint8_t* dst = store_->data(chunk);
  const auto* src = reinterpret_cast<const void*>(cache_->address(static_cast<uint32_t>(bs.slot)));
  const bool registered = store_->host_registered();  // else through a bounce buffer
  DeviceIo* io = io_;
  const auto t0 = std::chrono::steady_clock::now();
  auto t1 = t0;
  Status s;
  {
    const MemoryMovers::Scope moving(movers_, MemoryMovers::Kind::kBackgroundIo);
    MutexUnlock unlocked(mu_);  // the device -> host copy
    s = io->Drain(dst, src, length, padded, registered);
    t1 = std::chrono::steady_clock::now();
  }
  if (!s.ok()) return DrainFailed(e, block, s);
  store_->Sealed(*e, block);
  owner_->Drained(e, block, t0, t1, /*bounced=*/!registered);
  tier_.MarkClean(*e, block);  // the host tier has it now
  owner_->Unpin(e);
  if (tracer_ != nullptr) store_->TraceOccupancy(*tracer_);
}

void DeviceMover::DrainFailed(const EntryPtr& e, uint32_t block, const Status& s) {
  store_->Unplace(*e, block);
  owner_->Unpin(e);
  if (!e->consumed()) {
    // The copy in the device cache stays restorable while resident; the
    // version can never be flushed.
    owner_->Fail(e, s.WithContext("device -> host copy of '" + e->name + "' " +
                                  std::to_string(e->number) + " block " + std::to_string(block)));
    tier_.MarkClean(*e, block);
  }
}

// ---------------------------------------------------------------------------
// Prefetch host -> device

// The same order as the host prefetcher (highest step first, within
// history.prefetch_depth), for device/managed steps whose blocks are all in
// the host cache but not all in the device cache, when room can be made
// without evicting anything needed sooner.
EntryPtr DeviceMover::FindPrefetchTarget() {
  if (!cache_ || !cache_->mapping_done() || cache_->mapped_slots() == 0) return nullptr;
  return WalkPoppedSteps(*catalog_, depth_, [this](const Entry& e) {
    mu_->AssertHeld();  // the walk runs under *mu, which clang cannot see here
    return JudgeStep(e);
  });
}

StepVerdict DeviceMover::JudgeStep(const Entry& e) const {
  if (e.layout.regions.empty()) return StepVerdict::kSkip;
  if (e.layout.regions[0].spec.memory == MemoryKind::kHost)
    return StepVerdict::kNextHistory;  // not a device history
  if (e.fully_in_device() || e.reads().device_prefetching || !e.capture().done)
    return StepVerdict::kAhead;
  if (e.reads().device_prefetch_failed || e.failed()) return StepVerdict::kSkip;
  if (!e.fully_resident()) return StepVerdict::kNextHistory;  // the host prefetcher brings it first
  if (e.blocks().size() > cache_->mapped_slots()) return StepVerdict::kSkip;
  size_t missing = 0;
  for (uint32_t b = 0; b < e.blocks().size(); ++b) missing += e.in_device(b) ? 0 : 1;
  return tier_.HasRoomFor(e, cache_->free_mapped_count(), missing) ? StepVerdict::kTake
                                                                   : StepVerdict::kWait;
}

void DeviceMover::PlanPrefetch(const EntryPtr& e, std::vector<CopySegment>* segments,
                               std::vector<uint32_t>* filled) {
  for (uint32_t b = 0; b < e->blocks().size(); ++b) {
    if (e->in_device(b)) continue;
    auto slot = tier_.TryAcquire([](gpu::DeviceCache& d) { return d.Allocate(); }, e->seq);
    // FindPrefetchTarget counted the room under this same lock.
    if (!slot) break;
    store_->PlaceInSlot(*e, b, *slot);
    filled->push_back(b);
    segments->push_back({.dst = reinterpret_cast<void*>(cache_->address(*slot)),
                         .src = store_->data(static_cast<uint32_t>(e->blocks()[b].chunk)),
                         .bytes = e->layout.blocks[b].length});
  }
}

void DeviceMover::Prefetch(const EntryPtr& e) {
  const auto t0 = std::chrono::steady_clock::now();
  store_->DevicePrefetchStarted(*e);
  store_->Pin(*e);  // its host chunks stay while we read them
  std::vector<CopySegment> segments;
  std::vector<uint32_t> filled;
  PlanPrefetch(e, &segments, &filled);
  DeviceIo* io = io_;
  Status s;
  {
    MutexUnlock unlocked(mu_);  // host -> device copies
    s = io->BackgroundCopy(segments);
  }
  store_->DevicePrefetchEnded(*e, s.ok());
  uint64_t bytes = 0;
  for (uint32_t b : filled) {
    if (s.ok()) {
      store_->DeviceSealed(*e, b);
      tier_.MarkClean(*e, b);  // still in the host tier too
      bytes += e->layout.blocks[b].length;
    } else {
      DropSlot(*e, b);
    }
  }
  if (s.ok()) {
    owner_->Prefetched(e, bytes, t0);
  } else {
    // Pops then copy from the host cache; nothing is lost.
    util::Log(LogLevel::kError, "device prefetch of '%s' step %lld failed: %s", e->name.c_str(),
              static_cast<long long>(e->number), s.ToString().c_str());
  }
  owner_->Unpin(e);
}

}  // namespace cairn::core
