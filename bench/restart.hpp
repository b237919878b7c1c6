// What the restart trial (restart.cpp) and its new process
// (restart_child.cpp) share: the checkpoint name and the baseline's files.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/status.hpp"

namespace cairn::bench {

class SyncStore;

inline constexpr const char* kRestartName = "restart";

// The baseline's file of version v: "restart.v<v>".
std::string VersionFile(int64_t v);
// The baseline's Latest: the highest "restart.vN" in the store's directory.
Result<int64_t> SyncLatest(const SyncStore& store);

}  // namespace cairn::bench
