// Elapsed time as seconds in a double: what Stats, the trace and the touch
// model keep. One place for the conversion from steady_clock time points
// (never the wall clock: these are durations, and must not jump). And the
// wall clock as nanoseconds since the epoch, for moments compared across
// processes (commits, records, the redundancy's protection).
#pragma once

#include <chrono>
#include <cstdint>

namespace cairn {

using SteadyTime = std::chrono::steady_clock::time_point;

inline double SecondsBetween(SteadyTime t0, SteadyTime t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

inline double SecondsSince(SteadyTime t0) { return SecondsBetween(t0, std::chrono::steady_clock::now()); }

inline int64_t RealtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cairn
