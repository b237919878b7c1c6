// What the restart trial (restart.cpp) and its new process
// (restart_child.cpp) share: the checkpoint name and the baseline's files.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/status.hpp"

namespace cairn::bench {

class SyncStore;

inline constexpr const char* kRestartName = "restart";

struct Options;
struct VerifyStats;

// Stamps version v of trial `salt` into the host view of the application
// buffer (o.size bytes): every page for v = 0 or --change-fraction 1, else the
// pages changes.hpp chooses. Returns the bytes changed (pages x 4 KiB, a
// partial last page counted by its length).
uint64_t StampVersion(const Options& o, uint8_t* host, uint64_t salt, uint64_t v);
// Checks that `host` holds version `version` of trial `salt`: with a fraction
// < 1 each page must hold the stamps of the version that changed it last.
bool VerifyVersion(const Options& o, const uint8_t* host, uint64_t salt, int64_t version,
                   bool full, VerifyStats& stats);

// The baseline's file of version v: "restart.v<v>".
std::string VersionFile(int64_t v);
// The baseline's Latest: the highest "restart.vN" in the store's directory.
Result<int64_t> SyncLatest(const SyncStore& store);

}  // namespace cairn::bench
