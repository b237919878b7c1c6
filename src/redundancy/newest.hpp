// The newest version of a checkpoint name that a redundancy level protects
// on this member, and when it became so: what GlobalCommitState reports as
// l2/l3_version and _protected_ns (cairn/group.hpp).
#pragma once

#include <cstdint>

namespace cairn::redundancy {

struct Newest {
  int64_t version = -1;  // -1: none yet
  int64_t ns = -1;       // CLOCK_REALTIME ns since the epoch (util/clock.hpp)
  // Versions protected out of order (an older one acknowledged last) leave
  // the newest and its time as they are.
  void Raise(int64_t v, int64_t at_ns) {
    if (v > version) {
      version = v;
      ns = at_ns;
    }
  }
};

}  // namespace cairn::redundancy
