// What a prefetcher makes of one step of a popped history, for the walk both
// prefetchers share (Pipeline::WalkPoppedSteps: highest step first, at most
// history.prefetch_depth steps ahead of the pops). The host prefetcher
// (prefetcher.cpp) and the device mover (device_mover.hpp) each judge a step
// their own way.
#pragma once

#include <functional>

#include "core/entry.hpp"

namespace cairn::core {

// What a prefetcher makes of one step of a popped history.
enum class StepVerdict {
  kSkip,         // not for this prefetcher; look at the next lower step
  kAhead,        // loaded or being loaded: counts towards the depth
  kNextHistory,  // nothing lower in this history is due yet
  kWait,         // due, but no room now: nothing to do until space frees
  kTake,         // load this one
};
using StepJudge = std::function<StepVerdict(const Entry&)>;

}  // namespace cairn::core
