// The cost of page tracking on the application's compute loop
// (restart --track-loop; "the same loop timed with and without
// tracking").
//
// The loop of one interval: the application writes the pages a version
// changes (--change-fraction, --change-pattern: StampVersion), then computes
// for a fixed amount of work (read sweeps over its buffer) calibrated once,
// untracked, to last --track-loop-ms (default --interval-ms). Between intervals (untimed) it
// the tracked side checkpoints and waits for the version to be local, so no
// flush competes with the timed loop. "Tracked" runs it under a client with
// the run's --changes (pages|auto: first writes fault into the tracker),
// "untracked" under a client with --track-loop-baseline (default hash: no
// tracker; track_loop.cpp says why), same buffer, same pages, same work. --repeat pairs, alternating which side goes first.
#pragma once

#include <string>
#include <vector>

#include "driver/bench.hpp"
#include "cairn/status.hpp"

namespace cairn::bench {

class BenchBuffer;

struct TrackLoopResult {
  Status status;
  uint64_t work_slices = 0;  // 64 KiB read slices per interval (calibrated)
  double calibrated_s = 0;   // their untracked time at calibration
  std::vector<double> untracked_s, tracked_s;  // every timed interval, all trials
  std::vector<double> untracked_write_s, tracked_write_s;  // ... of which the writes
  uint64_t changed_pages = 0;                  // written per interval (median)
  std::string tracker;                         // Stats::changes.tracker of the tracked side
  uint64_t tracking_faults = 0;                // ... and its trapped first writes
  uint64_t fallbacks = 0;
};

// Runs 2 x o.repeat trials of o.track_loop_intervals intervals each in
// dir/track-loop, on `app` (host memory of o.size bytes).
TrackLoopResult RunTrackLoop(const Options& o, const std::string& dir, BenchBuffer& app);

}  // namespace cairn::bench
