// How many host-cache chunks the learned order's zero-copy reader keeps as
// spares for RED pages (Pipeline::Capturer::HoldRoom; docs/design.md "Room for RED
// pages"), learned from epoch to epoch.
//
// Why learned: a spare lets a RED page's block be read at once, but every
// chunk kept is one the flush does not have. A pattern whose first writes
// follow the learned order (`reversed`) has few RED pages, and spares only
// slow its flush; one with many stray first writes (`irregular`) runs out
// of spares, and a RED page that finds none waits for the flush to free a
// chunk (0.4-3 ms: most of the RED wait there). So the count starts at a
// quarter of the chunks, grows by one whenever a RED page finds no spare
// (up to half), and gives one back after an epoch in which none did (down
// to one).
//
// Thread safety: none (the pipeline's, under its mutex).
#pragma once

#include <algorithm>
#include <cstddef>

namespace cairn::core {

class SpareCount {
 public:
  // No spares at all in a cache of fewer chunks (the rest must keep the
  // flush going).
  static constexpr size_t kMinChunks = 4;

  // The spares to keep in a cache of `chunks` chunks.
  size_t Keep(size_t chunks) const {
    if (chunks < kMinChunks) return 0;
    return std::clamp<size_t>(target_ == 0 ? chunks / 4 : target_, 1, chunks / 2);
  }
  // A RED page found no spare.
  void Short(size_t chunks) {
    if (chunks < kMinChunks) return;
    target_ = std::min(Keep(chunks) + 1, chunks / 2);
    short_ = true;
  }
  // An epoch ended: one back if no RED page found the spares short.
  void EndEpoch(size_t chunks) {
    if (!short_ && chunks >= kMinChunks) target_ = std::max<size_t>(Keep(chunks), 2) - 1;
    short_ = false;
  }

 private:
  size_t target_ = 0;  // 0: not learned yet (a quarter)
  bool short_ = false;
};

}  // namespace cairn::core
