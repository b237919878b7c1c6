// The eviction list of one cache tier: blocks whose data is safe elsewhere
// (written to the local file for the host cache; drained to the host tier for
// the device cache), ordered by eviction rank, i.e. (entry seq, block index):
// oldest entry first, lowest block first.
//
// Each tier has one list and one flag in BlockState that mirrors membership
// (BlockState::clean for the host cache, BlockState::dclean for the device
// cache), so that "is it listed?" needs no lookup. The list never frees
// anything itself: Take() hands the caller the block to evict.
//
// Not thread-safe: the pipeline calls it under its mutex. Entries must stay
// alive while listed (the pipeline removes an entry's blocks before it goes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "engine/entry.hpp"

namespace cairn::core {

class CleanList {
 public:
  // `listed` is the BlockState flag that mirrors membership in this list.
  explicit CleanList(bool BlockState::*listed) : listed_(listed) {}

  // Lists block `block` of e (no-op when it is listed already).
  void Add(Entry& e, uint32_t block) {
    bool& listed = e.blocks_[block].*listed_;
    if (listed) return;
    listed = true;
    blocks_.emplace(std::make_pair(e.seq, block), &e);
  }

  // Unlists it (no-op when it is not listed).
  void Remove(Entry& e, uint32_t block) {
    bool& listed = e.blocks_[block].*listed_;
    if (!listed) return;
    listed = false;
    blocks_.erase(std::make_pair(e.seq, block));
  }

  // The oldest listed block of an entry older than `below_seq` that `busy`
  // does not reject, unlisted; nullopt when there is none. busy(const Entry&)
  // says the entry's blocks may not go now (pinned, being prefetched).
  template <typename Busy>
  std::optional<std::pair<Entry*, uint32_t>> Take(uint64_t below_seq, Busy busy) {
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (it->first.first >= below_seq) return std::nullopt;
      Entry* e = it->second;
      if (busy(*e)) continue;
      const uint32_t block = it->first.second;
      blocks_.erase(it);
      e->blocks_[block].*listed_ = false;
      return std::make_pair(e, block);
    }
    return std::nullopt;
  }

  // How many listed blocks Take(e.seq, busy) could hand out for `e`, not
  // counting e's own, counted up to `enough` (the caller's need).
  template <typename Busy>
  size_t CountEvictableFor(const Entry& e, size_t enough, Busy busy) const {
    size_t n = 0;
    for (auto it = blocks_.begin(); it != blocks_.end() && n < enough; ++it) {
      if (it->first.first >= e.seq) break;
      if (it->second != &e && !busy(*it->second)) ++n;
    }
    return n;
  }

  size_t size() const { return blocks_.size(); }
  // Forgets every block without touching the flags (teardown only).
  void Clear() { blocks_.clear(); }

 private:
  bool BlockState::*listed_;
  std::map<std::pair<uint64_t, uint32_t>, Entry*> blocks_;
};

}  // namespace cairn::core
