// Timing helpers shared by cairn-bench and the small measurement tools
// (cairn-track-cost, cairn-placement-cost, cairn-copy-cost): one clock, one
// median.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace cairn::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline double Since(Clock::time_point t) { return Seconds(t, Clock::now()); }

// The median (mean of the middle two for an even count); 0 for an empty vector.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

}  // namespace cairn::bench
