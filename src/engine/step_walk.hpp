// The walk both prefetchers share (host: prefetcher.hpp; device: the device
// mover, gpu_tier.cpp): over the steps of the histories being popped, highest
// step first, at most `depth` steps ahead of the pops (0: no limit), asking a
// judge what each step is to the prefetcher asking.
//
// No lock of its own: the caller holds the mutex that guards the catalog and
// the entries (the pipeline's), and the judge is called under it.
#pragma once

#include "engine/catalog.hpp"
#include "engine/entry.hpp"

namespace cairn::core {

// What a prefetcher makes of one step of a popped history.
enum class StepVerdict {
  kSkip,         // not for this prefetcher; look at the next lower step
  kAhead,        // loaded or being loaded: counts towards the depth
  kNextHistory,  // nothing lower in this history is due yet
  kWait,         // due, but no room now: nothing to do until space frees
  kTake,         // load this one
};

// The first step judge(const Entry&) -> StepVerdict takes, or nullptr. Steps
// consumed or no longer in the catalog are skipped without asking.
template <typename Judge>
EntryPtr WalkPoppedSteps(const Catalog& catalog, int depth, const Judge& judge) {
  for (const auto& [name, h] : catalog.histories()) {
    if (!h.popping) continue;
    int ahead = 0;
    for (auto it = h.steps.rbegin(); it != h.steps.rend(); ++it) {
      EntryPtr e = catalog.Find(format::EntryKind::kHistoryStep, name, *it);
      const StepVerdict verdict = e && !e->consumed() ? judge(*e) : StepVerdict::kSkip;
      if (verdict == StepVerdict::kTake) return e;
      if (verdict == StepVerdict::kWait) return nullptr;
      if (verdict == StepVerdict::kNextHistory) break;
      if (verdict == StepVerdict::kAhead && depth > 0 && ++ahead >= depth) break;
    }
  }
  return nullptr;
}

}  // namespace cairn::core
