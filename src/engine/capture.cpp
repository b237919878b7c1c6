// The capture path (capture.hpp says how it goes), and the pipeline's
// capture entry points: Capture, ReserveFor, ReleaseSources.
#include "engine/capture.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "capture/memory_copy.hpp"
#include "capture/zero_copy/zero_copy_order.hpp"
#include "engine/placement.hpp"
#include "engine/source_pieces.hpp"
#include "format/naming.hpp"
#include "util/clock.hpp"

namespace cairn::core {

Status Pipeline::Capturer::CheckSources(const std::vector<CaptureSource>& sources) {
  for (const auto& s : sources) {
    if (s.spec.memory != MemoryKind::kHost && s.spec.bytes > 0) {
      if (!p_->gpu_) {
        return Status::Unsupported("region " + std::to_string(s.spec.id) +
                                   " is not host memory and the GPU tier is unavailable: " +
                                   p_->gpu_unavailable_.ToString());
      }
      CAIRN_RETURN_IF_ERROR(p_->dio_->Ensure());
    }
  }
  return Status::Ok();
}

Status Pipeline::Capturer::CheckCapturable(const Entry& e) {
  if (p_->closing_) return Status::State("client is closing");
  if (e.kind == format::EntryKind::kHistoryStep && !p_->catalog_.HasHistory(e.name)) {
    return Status::State("history '" + e.name + "' is not open");
  }
  if (p_->catalog_.Find(e.kind, e.name, e.number)) {
    return Status::Exists(
        std::string(e.kind == format::EntryKind::kCheckpoint ? "version " : "step ") +
        std::to_string(e.number) + " of '" + e.name + "' is still in the pipeline");
  }
  return Status::Ok();
}

Status Pipeline::Capturer::BeginCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0,
                                        double* interval_s) {
  CAIRN_RETURN_IF_ERROR(CheckCapturable(*e));
  p_->store_.SizeBlocks(*e);
  p_->GrowCache(uint64_t{e->blocks().size()} * p_->config_.block_bytes);
  p_->catalog_.Add(e);
  p_->flusher_.Push(e);
  if (p_->persistent_ && e->kind == format::EntryKind::kCheckpoint && !e->persist().skipped)
    BeginPersist(e);
  if (e->layout.layered()) {
    // Planned on a base whose failure came after the plan (FailLayersOn).
    EntryPtr base = p_->catalog_.Find(e->kind, e->name, e->layout.record.base_version);
    if (base && base->failed() && !base->local().committed) p_->FailLayersOn(*base);
  }
  // The compute interval that ended at t0 feeds the adaptive touch model.
  *interval_s = p_->initializer_.CaptureStarted(t0);
  return Status::Ok();
}

void Pipeline::ReserveFor(uint64_t bytes) {
  MutexLock lock(&mu_);
  GrowCache(bytes);
}

void Pipeline::GrowCache(uint64_t bytes) {
  if (!store_.has_cache() || initializer_.GrowFor(bytes) == 0) return;
  cv_app_.notify_all();  // a capture waiting for room finds the new chunks
}

void Pipeline::Capturer::BeginPersist(const EntryPtr& e) {
  p_->store_.BindPersist(*e);
  if (!p_->config_.persist_from_cache) return;  // the flusher's commit queues the file copy
  // A persistent layered version must never be visible before its base: the
  // persister writes it only when the base is committed there already, else
  // the mover copies the committed local chain, base first.
  if (e->layout.layered()) {
    EntryPtr base = p_->catalog_.Find(e->kind, e->name, e->layout.record.base_version);
    if (!base || !base->persist().committed) return;
  }
  p_->store_.QueueForPersister(*e);
  p_->store_.Hold(e);
  p_->persister_.Push(e);
}

// The first block of a batch may wait for space, the others take whatever is
// free or evictable right now. A block of a device or managed region goes to
// a device-cache slot when there is a device cache, else straight into a
// host chunk.
void Pipeline::Capturer::PlanBatch(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                                   const std::vector<uint64_t>& packed,
                                   const std::vector<uint32_t>& want, CaptureBatch* batch,
                                   HeldChunk* held) {
  *batch = CaptureBatch{};
  if (StreamsCapture(e->layout.stored_bytes)) batch->stores = CopyEngine::Stores::kStreaming;
  // A sequential toucher may end the slice it is in when a capture starts (a
  // few ms): that is not touching during captures.
  batch->touching_allowed = p_->initializer_.TouchingAllowed();
  for (const uint32_t b : want) {
    const bool first = batch->blocks.empty();
    const auto& blk = e->layout.blocks[b];
    const auto& region = e->layout.regions[blk.region];
    const bool gpu_source = region.spec.memory != MemoryKind::kHost;
    const auto* src = static_cast<const uint8_t*>(sources[blk.region].data);
    // The block's payload, piece by piece, from the region's memory to dst.
    auto add = [&](std::vector<CopySegment>& to, uint8_t* dst) {
      SourcePieces(e->layout, packed, b, [&](uint64_t from, uint64_t at, uint64_t n) {
        to.push_back({.dst = dst + at, .src = src + from, .bytes = n});
      });
    };
    if (gpu_source && p_->device_mover_.CacheUsable()) {
      std::optional<int32_t> slot;
      if (first) {
        slot = p_->device_mover_.AcquireSlot();
      } else if (auto sl = p_->device_mover_.TryAcquireSlot()) {
        slot = static_cast<int32_t>(*sl);
      } else {
        break;
      }
      if (slot) {
        p_->store_.PlaceInSlot(*e, b, static_cast<uint32_t>(*slot));
        add(batch->gpu,
            reinterpret_cast<uint8_t*>(p_->dcache_->address(static_cast<uint32_t>(*slot))));
        batch->blocks.push_back(b);
        batch->to_slot.push_back(true);
        continue;
      }
      // The device cache has no slot at all (mapping failed at once): this
      // block goes to the host cache.
    }
    int32_t chunk;
    bool was_touched = false;
    const uint32_t write_bytes = static_cast<uint32_t>(format::AlignUp(blk.length));
    const int node = e->block_nodes.empty() ? -1 : e->block_nodes[b];
    if (first && held->chunk >= 0) {
      chunk = std::exchange(held->chunk, -1);
      was_touched = held->touched;
    } else if (first) {
      WaitForDrainRoom(*e);
      chunk = AcquireChunk(write_bytes, &was_touched, node);
    } else if (!DrainRoomAfterTaking(*e)) {
      break;
    } else if (auto c = p_->TryAcquireChunk(write_bytes, &was_touched, UINT64_MAX, node)) {
      chunk = static_cast<int32_t>(*c);
    } else {
      break;
    }
    p_->store_.Place(*e, b, static_cast<uint32_t>(chunk));
    if (node >= 0) {
      ++(p_->store_.cache().node_of(static_cast<uint32_t>(chunk)) == node
             ? p_->stats_.numa_local_chunks
             : p_->stats_.numa_remote_chunks);
    }
    p_->initializer_.NoteCaptureChunk(was_touched, blk.length);
    uint8_t* dst = p_->store_.data(static_cast<uint32_t>(chunk));
    add(gpu_source ? batch->gpu : batch->host[was_touched ? 1 : 0], dst);
    batch->blocks.push_back(b);
    batch->to_slot.push_back(false);
    // Direct I/O writes whole 4 KiB pages: the tail is zeroed so no stale
    // bytes of an older entry reach the file. (Drained slots get theirs in
    // DeviceMover::DrainBlock.)
    if (write_bytes > blk.length)
      batch->tails.emplace_back(dst + blk.length, write_bytes - blk.length);
  }
}

Status Pipeline::Capturer::CopyBatch(CaptureBatch& batch, double copy_s[2], uint64_t copy_bytes[2],
                                     bool* touching, uint64_t* gpu_bytes, double* gpu_seconds,
                                     ZeroCopy* zc) {
  *touching = p_->initializer_.touching();
  Status copied;
  if (!batch.gpu.empty()) {
    const auto g0 = std::chrono::steady_clock::now();
    copied = p_->dio_->CaptureCopy(batch.gpu);
    *gpu_seconds += SecondsSince(g0);
    for (const auto& seg : batch.gpu) *gpu_bytes += seg.bytes;
  }
  for (int touched : {1, 0}) {
    const auto c0 = std::chrono::steady_clock::now();
    if (zc != nullptr) {  // zero-copy: host pieces as they were at the checkpoint call
      for (const auto& seg : batch.host[touched]) {
        if (copied.ok()) copied = zc->Read(seg.src, seg.dst, seg.bytes);
      }
    } else {
      CopyIn(MemoryKind::kHost, *p_->copier_, batch.host[touched], batch.stores);
    }
    copy_s[touched] = SecondsSince(c0);
    for (const auto& seg : batch.host[touched]) copy_bytes[touched] += seg.bytes;
  }
  *touching = *touching || p_->initializer_.touching();
  for (const auto& [tail, n] : batch.tails) std::memset(tail, 0, n);
  return copied;
}

Status Pipeline::Capturer::RollBackCapture(const EntryPtr& e, const CaptureBatch& batch,
                                           const Status& copied) {
  // Its blocks are released and the flusher skips it; committed versions are
  // untouched.
  for (const uint32_t k : batch.blocks) {
    const BlockState& bs = e->blocks()[k];
    if (bs.chunk >= 0) p_->store_.Unplace(*e, k);
    if (bs.slot >= 0) {
      p_->dcache_->Free(static_cast<uint32_t>(bs.slot));
      p_->store_.ClearSlot(*e, k);
    }
  }
  if (e->kind == format::EntryKind::kHistoryStep) {
    p_->catalog_.DropStep(e->name, e->number);
  } else {
    p_->SettleLayering(*e);  // now: the same version may be captured again at once
  }
  p_->store_.CaptureEnded(*e);
  p_->Consume(e);
  p_->movers_.Add(MemoryMovers::Kind::kCapture, -1);
  p_->cv_app_.notify_all();
  return copied.WithContext(
      std::string(e->kind == format::EntryKind::kCheckpoint ? "checkpoint" : "push") + " of '" +
      e->name + "' " + std::to_string(e->number));
}

void Pipeline::Capturer::SealBatch(const EntryPtr& e, const CaptureBatch& batch) {
  for (size_t j = 0; j < batch.blocks.size(); ++j) {
    const uint32_t k = batch.blocks[j];
    if (batch.to_slot[j]) {
      p_->store_.DeviceSealed(*e, k);
      p_->device_mover_.Push(e, k);  // drained, or evictable at once if e failed or was consumed
      continue;
    }
    p_->store_.Sealed(*e, k);
    if (p_->store_.Captured(*e, k)) p_->checksummer_.Push(e, k);
  }
}

void Pipeline::Capturer::EndCapture(const EntryPtr& e, std::chrono::steady_clock::time_point t0,
                                    double interval_s, double blocked_before) {
  p_->store_.CaptureEnded(*e);
  double elapsed = SecondsSince(t0);
  // Bytes copied: a layered version copies only what it stores.
  p_->initializer_.CaptureEnded(e->layout.stored_bytes, elapsed, interval_s);
  p_->stats_.capture.bytes += e->layout.stored_bytes;
  p_->stats_.capture.ops += 1;
  // Copy time only: back-pressure waits (host chunks or device slots) are
  // reported as capture_blocked_s and device.capture_blocked_s.
  p_->stats_.capture.seconds += std::max(0.0, elapsed - (CaptureBlockedSeconds() - blocked_before));
  p_->tracer_.Span(e->kind == format::EntryKind::kCheckpoint ? "checkpoint" : "push", "app", t0,
                   std::chrono::steady_clock::now(), e->layout.stored_bytes, e->name, e->number);
  p_->TraceCache();
  p_->cv_app_.notify_all();
  p_->flusher_.Wake();
}

Status Pipeline::Capture(format::EntryKind kind, const std::string& name, int64_t number,
                         const std::vector<CaptureSource>& sources,
                         std::shared_ptr<const format::Placement> placement, bool persist) {
  return Capturer(this).Capture(kind, name, number, sources, std::move(placement), persist);
}

// Blocks are copied in batches (PlanBatch under mu_, CopyBatch without it: in
// parallel on the CopyEngine, device and managed sources through the capture
// stream) and then sealed at once (SealBatch).
Status Pipeline::Capturer::Capture(format::EntryKind kind, const std::string& name, int64_t number,
                                   const std::vector<CaptureSource>& sources,
                                   std::shared_ptr<const format::Placement> placement,
                                   bool persist) {
  CAIRN_RETURN_IF_ERROR(format::ValidateName(name));
  if (number < 0)
    return Status::InvalidArgument("version/step must be >= 0, got " + std::to_string(number));
  CAIRN_RETURN_IF_ERROR(CheckSources(sources));
  MutexLock capture_lock(&p_->capture_mu_);
  p_->zero_copy_.Join();  // a checkpoint waits for the previous zero-copy epoch's read
  const auto t0 = std::chrono::steady_clock::now();
  double interval_s = -1;
  double blocked_before = 0;
  EntryPtr e = std::make_shared<Entry>();
  e->kind = kind;
  e->name = name;
  e->number = number;
  e->placement = std::move(placement);  // placement
  MutexLock lock(&p_->mu_);
  if (p_->persistent_ && kind == format::EntryKind::kCheckpoint && !persist) {
    p_->store_.SkipPersist(*e);
  }
  CAIRN_RETURN_IF_ERROR(CheckCapturable(*e));
  const bool numa_chunks = p_->store_.has_cache() && p_->store_.cache().nodes().partitioned();
  // What the version stores (change detection reads the sources: without
  // mu_). Nothing else captures meanwhile (capture_mu_).
  lock.Unlock();
  const bool checkpoint = kind == format::EntryKind::kCheckpoint;
  if (checkpoint) {
    e->layout = p_->layering_->Plan(name, number, sources).layout;
  } else {
    e->layout =
        format::Layout::Make(SpecsOf(sources), static_cast<uint32_t>(p_->config_.block_bytes));
  }
  if (numa_chunks) e->block_nodes = SourceNodes(*e, sources);
  lock.Lock();
  if (Status s = BeginCapture(e, t0, &interval_s); !s.ok()) {
    if (checkpoint) p_->layering_->Dropped(name, number);
    return s;
  }
  // zero-copy (zero_copy_capture.hpp): protected now, copied by a reader thread.
  if (checkpoint && p_->config_.capture == CaptureMode::kZeroCopy &&
      StartZeroCopy(e, sources, t0, interval_s)) {
    return Status::Ok();
  }
  blocked_before = CaptureBlockedSeconds();
  p_->SetCaptureCopying(true);  // the application waits for this copy: it goes first
  const Status copied = CaptureBlocks(e, sources, nullptr);
  p_->SetCaptureCopying(false);
  CAIRN_RETURN_IF_ERROR(copied);
  EndCapture(e, t0, interval_s, blocked_before);
  return Status::Ok();
}

bool Pipeline::Capturer::StartZeroCopy(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                                       std::chrono::steady_clock::time_point t0,
                                       double interval_s) {
  if (!p_->zero_copy_.Begin(e->layout, sources, e->name, e->number, t0)) return false;
  p_->zero_copy_.Read(
      e->layout, sources,
      [p = p_, e, t0, interval_s](ZeroCopy* zc, const std::vector<CaptureSource>& pieces) {
        // A Capturer of its own: this one ends with the capture call.
        Capturer(p).ReadZeroCopy(e, pieces, zc, t0, interval_s);
      });
  return true;
}

// The epoch's reader: the copy capture's batch loop, each host piece read
// through the epoch (ZeroCopy::Read).
void Pipeline::Capturer::ReadZeroCopy(const EntryPtr& e, const std::vector<CaptureSource>& sources,
                                      ZeroCopy* zc, std::chrono::steady_clock::time_point t0,
                                      double interval_s) {
  p_->tracer_.NameThread("cairn zero-copy reader (app memory -> cache)");
  MutexLock lock(&p_->mu_);
  const double blocked_before = CaptureBlockedSeconds();
  const Status s = CaptureBlocks(e, sources, zc);
  p_->zero_copy_.EndEpoch();
  if (s.ok()) {
    EndCapture(e, t0, interval_s, blocked_before);
  } else if (p_->unreported_error_.ok()) {
    p_->unreported_error_ =
        s;  // no caller waits for the capture: the next wait or close reports it
  }
  p_->zero_copy_.EndRead();
}

void Pipeline::ReleaseSources() {
  {
    MutexLock capture_lock(&capture_mu_);
    zero_copy_.Join();  // its huge-page pass touches the memory too
  }
  zero_copy_.WaitIdle();
}

// The node of each block's first source byte, from the entry's placement
// record, or (recording off, or a history step) sampled now the same way
// (core::RecordRegion: one page per 2 MiB). Best effort: a failed query
// leaves the region without preference.
std::vector<int32_t> Pipeline::Capturer::SourceNodes(const Entry& e,
                                                     const std::vector<CaptureSource>& sources) {
  std::vector<format::RegionPlacement> sampled(e.layout.regions.size());
  std::vector<const format::RegionPlacement*> where(e.layout.regions.size(), nullptr);
  for (size_t r = 0; r < e.layout.regions.size(); ++r) {
    const auto& spec = e.layout.regions[r].spec;
    if (spec.memory != MemoryKind::kHost) continue;
    where[r] = e.placement ? e.placement->region(spec.id) : nullptr;
    if (where[r] != nullptr) continue;
    auto rec =
        RecordRegion(*p_->numa_, spec.id, sources[r].data, spec.bytes, format::kPlacementGranule);
    if (rec.ok()) {
      sampled[r] = std::move(rec).value();
      where[r] = &sampled[r];
    }
  }
  const std::vector<uint64_t> packed = PackedStarts(e.layout);
  std::vector<int32_t> nodes(e.layout.blocks.size(), -1);
  for (uint32_t b = 0; b < nodes.size(); ++b) {
    const format::RegionPlacement* p = where[e.layout.blocks[b].region];
    if (p == nullptr) continue;
    bool first = true;
    SourcePieces(e.layout, packed, b, [&](uint64_t from, uint64_t, uint64_t) {
      if (first) nodes[b] = NodeAt(*p, from);
      first = false;
    });
  }
  return nodes;
}

Status Pipeline::Capturer::CaptureBlocks(const EntryPtr& e,
                                         const std::vector<CaptureSource>& sources, ZeroCopy* zc) {
  const std::vector<uint64_t> packed = PackedStarts(e->layout);
  uint64_t gpu_bytes = 0;
  double gpu_seconds = 0;
  constexpr uint32_t kMaxBatch = 16;
  const auto nblocks = static_cast<uint32_t>(e->blocks().size());
  std::unique_ptr<ZeroCopyOrder> order;
  if (zc != nullptr) {
    order = std::make_unique<ZeroCopyOrder>(e->layout, sources, packed, zc,
                                            p_->config_.zero_copy_order == "learned");
    if (order->address_fallback()) ++p_->stats_.zero_copy.address_epochs;
  }
  CaptureBatch batch;
  std::vector<uint32_t> want;
  std::vector<HeldChunk> spares;  // zero-copy: kept for RED pages (HoldRoom)
  for (uint32_t b = 0;;) {
    want.clear();
    HeldChunk held;
    if (order) {
      // One block at a time, chosen once there is room for it (HoldRoom): a
      // page that goes RED while the reader waits is the next block read.
      if (!order->Done()) held = HoldRoom(*e, *order, &spares);
      if (const std::optional<uint32_t> k = order->Next()) want.push_back(*k);
    } else {
      for (uint32_t k = b; k < nblocks && k - b < kMaxBatch; ++k) want.push_back(k);
    }
    if (!want.empty()) PlanBatch(e, sources, packed, want, &batch, &held);
    if (held.chunk >= 0)
      spares.push_back(held);  // not used (no host block came first): kept or freed below
    if (want.empty()) {
      FreeHeld(&spares);
      if (zc != nullptr) p_->zero_copy_.spares().EndEpoch(p_->store_.chunk_count());
      break;
    }
    b += static_cast<uint32_t>(batch.blocks.size());
    double copy_s[2] = {0, 0};  // into untouched, into touched
    uint64_t copy_bytes[2] = {0, 0};
    bool touching = false;
    p_->mu_.Unlock();
    const Status copied =
        CopyBatch(batch, copy_s, copy_bytes, &touching, &gpu_bytes, &gpu_seconds, zc);
    p_->mu_.Lock();
    if (!copied.ok()) {
      FreeHeld(&spares);
      return RollBackCapture(e, batch, copied);
    }
    if (batch.gpu.empty()) {  // device copies overlap: no host rate
      for (int touched : {1, 0}) {
        p_->initializer_.NoteCaptureCopy(copy_bytes[touched], copy_s[touched], touched == 1,
                                         touching && batch.touching_allowed);
      }
    }
    SealBatch(e, batch);
  }
  if (gpu_bytes > 0) {
    p_->stats_.device.capture.bytes += gpu_bytes;
    p_->stats_.device.capture.ops += 1;
    p_->stats_.device.capture.seconds += gpu_seconds;
  }
  return Status::Ok();
}

}  // namespace cairn::core
