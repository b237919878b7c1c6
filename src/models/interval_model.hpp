// The optimal checkpoint interval (docs/design.md, "When to checkpoint";
// CCGrid'20 section III-B/IV-C, after Dongarra, Herault and Robert).
//
// With C the application's blocking cost of one checkpoint, R the cost of
// restoring it, D = 0 (the downtime: soft failures, as the paper sets it)
// and M the mean time between failures, the expected waste of checkpointing
// every T seconds of work is (the paper's Eq. 2)
//
//   W(T) = 1 - (1 - C/T) (1 - (R + T/2) / M)
//
// and its exact minimizer is (Eq. 1, Young's formula with the restart
// correction; d W / d T = 0 gives T^2 = 2 C (M - R))
//
//   T_opt = sqrt(2 C (M - R)).
//
// Young's sqrt(2 C M) ignores R; Daly's higher-order formula differs from
// it by a factor 1 + sqrt(C / 2M) / 3 + ..., under 1% whenever C < M / 600
// (6 s for a one-hour MTBF), and it does not minimize the waste we report.
// Below C (a checkpoint cannot be taken more often than it lasts) the
// interval is clamped to C; with M <= R no interval helps (a failure is
// expected before a restore completes): T = C and the waste is 1.
//
// IntervalModel keeps, per checkpoint name, what those need: the blocking
// cost of the recent checkpoints (the checkpoint call plus the waits on
// that version: what the application did not compute meanwhile), the
// restore cost, and when the last checkpoint ended. C is the median of the
// last kWindow costs, not a mean or an EWMA: a single outlier (the first
// capture faulting in the host cache's pages, one that waited for cache
// space) moves a mean or an EWMA for many checkpoints, the median not at
// all, while a lasting change of cost wins the median within kWindow / 2 + 1
// checkpoints. R is the last measured restore of the name; without one it
// is estimated as the bytes of the last checkpoint over the read bandwidth
// of the client's last restore of any name, or over kDefaultReadBytesPerS.
//
// Pure: time comes in as arguments (tests inject it). Not thread-safe: the
// Client calls it under its own mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "util/clock.hpp"

namespace cairn::core {

// T_opt = max(C, sqrt(2 C (M - R))), M - R taken as 0 when negative.
double OptimalInterval(double checkpoint_s, double restore_s, double mtbf_s);

// W(T) = 1 - (1 - C/T)(1 - (R + T/2)/M), clamped to [0, 1] (outside the
// model's range, T < C or R + T/2 > M, the waste is total).
double ExpectedWaste(double checkpoint_s, double restore_s, double mtbf_s, double interval_s);

// What CheckpointDue decided, for the caller and the stats.
struct IntervalDecision {
  bool due = true;
  bool measured = false;    // false: no checkpoint of the name yet (due)
  double interval_s = 0;    // T_opt
  double waste = 0;         // W(T_opt)
  double checkpoint_s = 0;  // C used
  double restore_s = 0;     // R used
  bool restore_measured = false;  // R measured (else estimated)
};

class IntervalModel {
 public:
  static constexpr size_t kWindow = 5;
  // Restore read bandwidth assumed before any restore is measured: 1 GB/s,
  // below a node-local NVMe SSD (2-7 GB/s) and above the per-process share
  // of a parallel file system at scale. It only shifts M - R.
  static constexpr double kDefaultReadBytesPerS = 1e9;

  // A checkpoint of `version` of `name` of `bytes` that blocked the caller
  // `blocking_s` and returned at `end`.
  void OnCheckpoint(const std::string& name, int64_t version, uint64_t bytes, double blocking_s,
                    SteadyTime end);
  // A wait on `version` of `name` that blocked `blocking_s` and returned at
  // `end`: added to that version's cost while it is in the window (the
  // application waited for the checkpoint), ignored otherwise; a wait on the
  // newest version also moves the interval's start to `end`.
  void OnWait(const std::string& name, int64_t version, double blocking_s, SteadyTime end);
  // A restore of `name` of `bytes` that took `seconds`.
  void OnRestore(const std::string& name, uint64_t bytes, double seconds);

  // Whether a checkpoint of `name` is due at `now` for an MTBF of `mtbf_s`
  // (> 0): no checkpoint measured yet, or at least T_opt since the last one
  // ended.
  IntervalDecision Due(const std::string& name, double mtbf_s, SteadyTime now) const;

 private:
  struct Sample {
    int64_t version;
    double cost_s;
  };
  struct PerName {
    std::deque<Sample> window;  // newest last, at most kWindow
    uint64_t bytes = 0;         // of the last checkpoint
    SteadyTime end{};           // when the last checkpoint returned
    double restore_s = -1;      // measured, < 0 = none
  };
  double MedianCost(const PerName& p) const;

  std::map<std::string, PerName> names_;
  double read_bytes_per_s_ = 0;  // of the last restore with bytes, 0 = none
};

}  // namespace cairn::core
