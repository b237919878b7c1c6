// Elapsed time as seconds in a double: what Stats, the trace and the touch
// model keep. One place for the conversion from steady_clock time points
// (never the wall clock: these are durations, and must not jump).
#pragma once

#include <chrono>

namespace cairn {

using SteadyTime = std::chrono::steady_clock::time_point;

inline double SecondsBetween(SteadyTime t0, SteadyTime t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

inline double SecondsSince(SteadyTime t0) { return SecondsBetween(t0, std::chrono::steady_clock::now()); }

}  // namespace cairn
