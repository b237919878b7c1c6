// The prefetcher: once a history is being popped, it reads the highest steps
// that are no longer in the cache back into it, ahead of the pops. It only
// takes free chunks or evicts clean blocks ranked below the step it loads
// (older captures), so it never pushes out a step that will be popped sooner.
#include <chrono>

#include "core/pipeline.hpp"
#include "format/file_reader.hpp"
#include "util/clock.hpp"

namespace cairn::core {

// The next step worth loading, or nullptr.
EntryPtr Pipeline::FindPrefetchTarget() {
  const auto kind = format::EntryKind::kHistoryStep;
  const int depth = config_.prefetch_depth;
  for (auto& [name, h] : histories_) {
    if (!h.popping) continue;
    int ahead = 0;
    for (auto it = h.steps.rbegin(); it != h.steps.rend(); ++it) {
      EntryPtr e = Find(kind, name, *it);
      if (!e || e->consumed) continue;
      // Being loaded already (by us or by a pop reading its file), or not yet
      // captured: counts towards the depth, needs no read.
      if (e->fully_cached() || e->prefetching || e->pop_reading || !e->capture_done) {
        if (depth > 0 && ++ahead >= depth) break;
        continue;
      }
      if (e->prefetch_failed || e->failed()) continue;
      if (!e->local_committed) break;  // still being written: the pop will wait for it
      if (e->blocks.size() > cache_->chunk_count()) continue;  // larger than the cache
      // Enough room without evicting anything needed sooner (this entry's own
      // resident blocks included)?
      const size_t missing = e->blocks.size() - e->resident_blocks;
      size_t room = cache_->free_count();
      if (room < missing) room += clean_.CountEvictableFor(*e, missing - room, HostBusy);
      if (room < missing) return nullptr;  // wait for pops to free space
      return e;
    }
  }
  return nullptr;
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
    auto chunk = cache_->Allocate(nullptr, write_bytes);
    while (!chunk && EvictOne(e->seq)) chunk = cache_->Allocate(nullptr, write_bytes);
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
      MarkClean(*e, b);
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
