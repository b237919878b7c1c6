// FTI_Snapshot's schedule (docs/fti.md, "FTI_Snapshot"): which level, if any,
// is due at a given count of elapsed units. Pure, so that the rule is
// testable apart from MPI. FTI's rule: a level with interval i > 0 is due
// when the count reaches its next multiple of i; the highest due level is
// taken, and every due level moves on to its next multiple past the count.
#pragma once

#include <array>
#include <cstdint>

namespace cairn::fti {

struct Schedule {
  std::array<int64_t, 4> interval{};  // ckpt_l1..ckpt_l4 in units; 0 = off
  std::array<int64_t, 4> next{};      // next due count per level (0: not started)

  // The level (1-4) due at `count`, or 0; advances the due levels.
  int Due(int64_t count) {
    int level = 0;
    for (size_t i = 0; i < 4; ++i) {
      if (interval[i] <= 0) continue;
      if (next[i] == 0) next[i] = interval[i];
      if (count >= next[i]) {
        level = static_cast<int>(i) + 1;
        next[i] = (count / interval[i] + 1) * interval[i];
      }
    }
    return level;
  }
};

}  // namespace cairn::fti
