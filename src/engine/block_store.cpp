// The host tier's state and its transitions (block_store.hpp).
#include "engine/block_store.hpp"

#include <algorithm>
#include <utility>

namespace cairn::core {

BlockStore::BlockStore(Counters counters, Tracer* tracer, std::condition_variable_any* room)
    : tier_(counters.evictions, tracer), holds_released_(counters.holds_released), room_(room) {}

void BlockStore::Adopt(HostCache&& cache) {
  cache_.emplace(std::move(cache));
  tier_.Attach(&*cache_);
}

std::optional<HostCache> BlockStore::Close() {
  host_registered_ = false;  // the caller unpins what it gets back
  holds_.clear();
  tier_.Clear();
  tier_.Attach(nullptr);
  std::optional<HostCache> cache = std::move(cache_);
  cache_.reset();
  return cache;
}

std::optional<uint32_t> BlockStore::TryAcquire(uint32_t write_bytes, bool* was_touched,
                                               uint64_t below_seq, int node) {
  return tier_.TryAcquire(
      [&](HostCache& cache) { return cache.Allocate(was_touched, write_bytes, node); }, below_seq);
}

bool BlockStore::Captured(Entry& e, uint32_t b) {
  if (e.failed() || e.consumed()) {
    tier_.MarkClean(e, b);
    return false;
  }
  dirty_ += e.layout.blocks[b].length;
  return true;
}

void BlockStore::Unplace(Entry& e, uint32_t b) {
  Free(static_cast<uint32_t>(e.blocks_[b].chunk));
  e.blocks_[b].chunk = -1;
}

void BlockStore::Loaded(Entry& e, uint32_t b, uint32_t crc) {
  BlockState& bs = e.blocks_[b];
  bs.sealed = bs.written = bs.crc_ready = true;
  bs.crc = crc;
  tier_.MarkClean(e, b);
}

void BlockStore::FromCommittedFile(Entry& e, const std::vector<uint32_t>& crcs) {
  SizeBlocks(e);
  for (uint32_t b = 0; b < e.blocks_.size(); ++b) {
    e.blocks_[b].written = e.blocks_[b].crc_ready = true;
    e.blocks_[b].crc = crcs[b];
  }
  e.capture_.done = e.local_.started = e.local_.committed = true;
}

void BlockStore::WrittenLocally(Entry& e, uint32_t b) {
  e.blocks_[b].written = true;
  dirty_ -= e.layout.blocks[b].length;
  if (!e.consumed() && !HeldForPersister(e, b)) tier_.MarkClean(e, b);
}

void BlockStore::WrittenPersistently(Entry& e, uint32_t b) {
  e.blocks_[b].persisted = true;
  // Written locally too: evictable now (a no-op if the hold was released).
  if (!e.consumed() && e.blocks_[b].written) tier_.MarkClean(e, b);
}

void BlockStore::Failed(Entry& e) {
  for (uint32_t b = 0; b < e.blocks_.size(); ++b) {
    const BlockState& bs = e.blocks_[b];
    if (bs.sealed && bs.chunk >= 0 && !bs.written) dirty_ -= e.layout.blocks[b].length;
    if (bs.sealed) tier_.MarkClean(e, b);
  }
}

void BlockStore::Release(Entry& e) {
  for (uint32_t b = 0; b < e.blocks_.size(); ++b) {
    const BlockState& bs = e.blocks_[b];
    // A failed entry's blocks stopped counting when it failed (Failed).
    if (!bs.written && bs.sealed && bs.chunk >= 0 && !e.failed())
      dirty_ -= e.layout.blocks[b].length;
    tier_.Drop(e, b);
  }
}

void BlockStore::TraceOccupancy(Tracer& tracer) const {
  if (!tracer.enabled() || !cache_) return;
  tracer.Counter("host cache", cache_->used_bytes(), dirty_);
}

void BlockStore::Hold(const EntryPtr& e) {
  e->persist_.hold = true;
  holds_.push_back(e);
}

bool BlockStore::ReleaseOldestHold() {
  if (holds_.empty()) return false;
  DropHold(EntryPtr(holds_.front()));  // a copy: DropHold erases the front
  ++*holds_released_;
  return true;
}

void BlockStore::DropHold(const EntryPtr& e) {
  if (!e->persist_.hold) return;
  e->persist_.hold = false;
  holds_.erase(std::find(holds_.begin(), holds_.end(), e));
  if (e->consumed()) return;  // its chunks went, or go at the last unpin
  for (uint32_t b = 0; b < e->blocks_.size(); ++b) {
    if (e->blocks_[b].written) tier_.MarkClean(*e, b);
  }
  room_->notify_all();
}

}  // namespace cairn::core
