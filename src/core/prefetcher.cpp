// The prefetcher: once a history is being popped, it reads the highest steps
// that are no longer in the cache back into it, ahead of the pops. It only
// takes free chunks or evicts clean blocks ranked below the step it loads
// (older captures), so it never pushes out a step that will be popped sooner.
#include <chrono>

#include "core/pipeline.hpp"
#include "format/file_reader.hpp"
#include "util/clock.hpp"

namespace cairn::core {

// Both prefetchers (host: this file; device: gpu_tier.cpp) walk the steps
// of the histories being popped the same way: highest step first, at most
// history.prefetch_depth steps ahead of the pops; `judge` says what a step is
// to the prefetcher asking.
EntryPtr Pipeline::WalkPoppedSteps(const StepJudge& judge) {
  const int depth = config_.prefetch_depth;
  for (auto& [name, h] : catalog_.histories()) {
    if (!h.popping) continue;
    int ahead = 0;
    for (auto it = h.steps.rbegin(); it != h.steps.rend(); ++it) {
      EntryPtr e = catalog_.Find(format::EntryKind::kHistoryStep, name, *it);
      const StepVerdict verdict = e && !e->consumed ? judge(*e) : StepVerdict::kSkip;
      if (verdict == StepVerdict::kTake) return e;
      if (verdict == StepVerdict::kWait) return nullptr;
      if (verdict == StepVerdict::kNextHistory) break;
      if (verdict == StepVerdict::kAhead && depth > 0 && ++ahead >= depth) break;
    }
  }
  return nullptr;
}

// The next step worth loading into the host cache, or nullptr.
EntryPtr Pipeline::FindPrefetchTarget() {
  return WalkPoppedSteps([this](const Entry& e) CAIRN_REQUIRES(mu_) {
    // Being loaded already (by us or by a pop reading its file), or not yet
    // captured: counts towards the depth, needs no read.
    if (e.fully_cached() || e.prefetching || e.pop_reading || !e.capture_done) return StepVerdict::kAhead;
    if (e.prefetch_failed || e.failed()) return StepVerdict::kSkip;
    // Still being written: the pop will wait for it.
    if (!e.local_committed) return StepVerdict::kNextHistory;
    if (e.blocks.size() > cache_->chunk_count()) return StepVerdict::kSkip;  // larger than the cache
    // Enough room without evicting anything needed sooner (this entry's own
    // resident blocks included)? Else wait for pops to free space.
    const size_t missing = e.blocks.size() - e.resident_blocks;
    return host_tier_.HasRoomFor(e, cache_->free_count(), missing) ? StepVerdict::kTake : StepVerdict::kWait;
  });
}

// Loads one step found by FindPrefetchTarget. Drops mu_ for the file read.
void Pipeline::PrefetchStep(const EntryPtr& e) {
  auto t0 = std::chrono::steady_clock::now();
  e->prefetching = true;
  // Pinned while the lock is dropped (entry.hpp): a pop that is reading
  // this step from its file may consume it meanwhile, and must leave the
  // chunks we are filling to our Unpin (it released them under us, and the
  // failed read then freed chunk -1).
  ++e->pins;
  // Only blocks without a chunk are read; resident ones stay (prefetching
  // keeps them from being evicted meanwhile).
  std::vector<uint8_t*> dst(e->blocks.size(), nullptr);
  for (uint32_t b = 0; b < e->blocks.size(); ++b) {
    if (e->blocks[b].chunk >= 0 && e->blocks[b].sealed) continue;
    const uint32_t write_bytes = e->layout.blocks[b].length;
    auto chunk = host_tier_.TryAcquire([&](HostCache& c) { return c.Allocate(nullptr, write_bytes); }, e->seq);
    // FindPrefetchTarget counted the room under this same lock.
    e->blocks[b].chunk = static_cast<int32_t>(*chunk);
    dst[b] = cache_->data(*chunk);
  }
  NoteTouchProgress();
  UseBandwidth(+1, /*capture=*/false);
  mu_.Unlock();  // the file read
  Status s;
  auto reader = format::FileReader::Open(fs_, history_.EntryPath(e->name, e->kind, e->number));
  s = reader.status();
  for (uint32_t b = 0; s.ok() && b < e->blocks.size(); ++b) {
    if (dst[b]) s = (*reader)->ReadBlock(b, dst[b], /*verify=*/true);
  }
  mu_.Lock();
  UseBandwidth(-1, /*capture=*/false);
  e->prefetching = false;
  if (s.ok()) {
    for (uint32_t b = 0; b < e->blocks.size(); ++b) {
      BlockState& bs = e->blocks[b];
      if (!dst[b]) continue;
      bs.sealed = bs.written = bs.crc_ready = true;
      bs.crc = (*reader)->block_crc(b);
      host_tier_.MarkClean(*e, b);
    }
    e->resident_blocks = static_cast<uint32_t>(e->blocks.size());
    tracer_.Span("prefetch", "prefetch", t0, std::chrono::steady_clock::now(), e->layout.payload_bytes,
                 e->name, e->number);
    TraceCache();
    stats_.prefetch.bytes += e->layout.payload_bytes;
    stats_.prefetch.ops += 1;
    stats_.prefetch.seconds += SecondsSince(t0);
  } else {
    // The pop reads the file itself and reports the damage.
    e->prefetch_failed = true;
    for (uint32_t b = 0; b < e->blocks.size(); ++b) {
      if (!dst[b]) continue;
      cache_->Free(static_cast<uint32_t>(e->blocks[b].chunk));
      e->blocks[b].chunk = -1;
    }
  }
  Unpin(e);  // releases the chunks if the step was consumed meanwhile
  cv_app_.notify_all();
  device_mover_.Wake();  // a device step may be ready for host -> device
}

}  // namespace cairn::core
