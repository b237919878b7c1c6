// The results of a run -> the JSON document (docs/bench.md lists every field)
// and the human-readable table.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "driver/bench.hpp"
#include "common/json.hpp"
#include "driver/track_loop.hpp"

namespace cairn::bench {

struct RunResults {
  Options options;
  std::vector<Step> plan;
  std::string dir;
  Limits limits;
  std::vector<TrialResult> async_trials;  // measured trials only (no warm-up)
  std::vector<TrialResult> sync_trials;   // the baseline with --sync-fsync (the fair default)
  std::vector<TrialResult> sync_other_trials;  // ... with the other value (--sync-other)
  bool async_failed = false;              // a call failed or data was wrong,
  bool sync_failed = false;               // warm-up included
  bool sync_other_failed = false;
  std::optional<TrackLoopResult> track_loop;  // restart --track-loop on
  std::vector<std::string> errors;        // failures and wrong data, for the report
};

// The whole document: workload, params, limits, one object per mode (medians
// over the trials plus "trials": the per-trial objects), ratios, and copies of
// the async figures at the top level.
Json BuildDocument(const RunResults& run);

// Limits, one row per mode, the ratios (stdout).
void PrintTable(std::FILE* out, const Json& doc);

// Writes doc to `path` (via a temporary file renamed into place).
Status WriteJsonFile(const std::string& path, const Json& doc);

}  // namespace cairn::bench
