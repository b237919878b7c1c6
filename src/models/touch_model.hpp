// The adaptive touch strategy's performance model (docs/design.md, "Fast
// initialization"; HiPC'22 section IV-B).
//
// Background touching and the application's captures compete for memory
// bandwidth and, on small nodes, for cores. The application is blocked only
// while it captures, so the adaptive strategy chooses, before every chunk it
// touches, between
//   concurrent  touch during captures too: more memory is touched before the
//               next capture, but the captures running meanwhile are slower;
//   sequential  pause while a capture runs: captures are undisturbed, but
//               only the compute interval between them is used for touching.
// (Flushes and prefetches are background work: slowing them costs the
// application nothing until the cache fills up, so the adaptive strategy
// touches alongside them. The fixed `sequential` strategy of the paper pauses
// for them too.)
//
// The model measures online and predicts the next capture's blocking time:
//   S       bytes per capture (moving average)
//   Yb      bytes touched between two captures (per compute interval)
//   Yd      bytes touched during a capture, when touching runs then
//   R       touched bytes free ahead of the allocation cursor (reserve)
//   Wt, Wc  capture rates into touched memory, alone / with touching running
//   Wu, Wv  capture rates into untouched memory, alone / with touching running
//
//   x_seq  = R + Yb                  touched bytes ready for the next capture
//   x_conc = R + Yb + Yd
//   B_seq  = min(x_seq, S) / Wt + max(0, S - x_seq) / Wu
//   B_conc = min(x_conc, S) / Wc + max(0, S - x_conc) / Wv
//
// Wu and Wv differ most where faulting pages is the bottleneck (4 KiB pages,
// fresh VM memory): there a capture and the touching thread faulting at the
// same time each ran at half speed or less, so touching during captures
// delivered little and slowed them a lot. A model with one untouched rate,
// measured while touching, priced sequential with concurrent's contention
// and kept touching concurrently at 1.6-2x the blocking of pausing.
//
// Yb and Yd are what the touching thread actually delivered per cycle, not a
// touch rate times the interval: the thread loses time waking up, claiming
// chunks and competing with flushes, and a first version that predicted
// Ti * I from the rate of single slices (Ti, Tc: touch rates outside /
// during captures) believed sequential touching kept ahead at 5 ms when it
// delivered half of that, flapped ~20 times and blocked 4x longer than
// concurrent. Ti * I and Tc * C (C: capture duration, I: interval) remain
// the fallback until a cycle has been seen.
//
// Decide() compares the steady state (R = 0): whether touching only between
// captures produces a checkpoint's worth of touched memory per cycle, and if
// not, whether touching during captures too is worth slowing them. Ignoring
// the reserve keeps the choice from flapping as the reserve fills and drains
// (a first version that preferred sequential whenever R >= S switched ~100
// times in a 64-checkpoint run and blocked 25% longer than concurrent). Ties
// go to sequential (no contention); leaving sequential needs a 5% gain.
// Until it has the rates it needs it touches concurrently, which measures
// them. Wu and Wv are needed only when touching falls behind (x < S): a run
// whose touching keeps ahead never measures them, and an earlier version
// that waited for them never left concurrent in such runs. A rate measured in
// one mode only is borrowed by the other, and the mode that needs the
// borrowed untouched rate is tried for one capture, which measures it (a
// borrowed Wu is Wv, too pessimistic to ever choose sequential), for at most
// kUntouchedTries captures (a try that touches ahead of its captures
// measures nothing). Likewise Wt is first measured in sequential mode; until
// then it borrows Wc, a tie, which tries sequential.
//
// Not thread-safe: the Pipeline calls it under its mutex.
#pragma once

#include <cstdint>

namespace cairn::core {

class TouchModel {
 public:
  enum class Mode { kConcurrent, kSequential };

  // A touched slice: `bytes` in `seconds`; `during_capture` when a capture
  // ran during (part of) it.
  void OnTouch(uint64_t bytes, double seconds, bool during_capture);
  // Copies of a capture entirely into touched (or untouched) chunks, and
  // whether touching ran concurrently. (The pipeline copies a batch's blocks
  // into touched and into untouched chunks apart: with touching behind,
  // nearly every batch has both.)
  void OnCaptureCopy(uint64_t bytes, double seconds, bool into_touched, bool touching);
  // A whole capture: its size and duration, the compute interval before it
  // (< 0: the first capture, no interval), and whether touching was allowed
  // to run during it (concurrent mode). Ends a cycle: the bytes touched since
  // the previous capture become samples of Yb and (if concurrent) Yd.
  void OnCapture(uint64_t bytes, double seconds, double interval_s, bool touching_allowed);

  // The mode for the next chunk, given the mode in use (for hysteresis).
  Mode Decide(Mode current) const;

  // Predicted blocking of the next capture in seconds, or < 0 when the rates
  // are not known yet. Exposed for tests and the trace.
  double PredictBlocking(Mode mode, uint64_t reserve_bytes) const;

 private:
  // Touched bytes ready for the next capture in `mode` (x above), or < 0 when
  // not known yet.
  double TouchedAhead(Mode mode, uint64_t reserve_bytes) const;
  // Whether the prediction for `mode` needs its untouched rate and that rate
  // was only measured in the other mode.
  bool BorrowsUntouchedRate(Mode mode) const;

  // Exponentially weighted moving average; unset until the first sample.
  struct Ewma {
    double value = 0;
    bool set = false;
    void Add(double x, double weight = 0.25) {
      value = set ? value + weight * (x - value) : x;
      set = true;
    }
  };
  static int Index(Mode mode) { return mode == Mode::kConcurrent ? 1 : 0; }
  // A rate of `mode`, or, not measured yet, its counterpart of the other mode.
  static const Ewma& OwnOrOther(const Ewma (&rates)[2], Mode mode) {
    const int i = Index(mode);
    return rates[i].set ? rates[i] : rates[1 - i];
  }
  Ewma touch_between_, touch_during_;                     // bytes/s
  // Capture rates in bytes/s, indexed by Index(mode): [0] alone (sequential
  // mode), [1] while touching runs (concurrent mode).
  Ewma write_touched_[2];                                 // Wt, Wc
  Ewma write_untouched_[2];                               // Wu, Wv
  Ewma size_, duration_, interval_;                       // bytes, s, s
  Ewma yield_between_, yield_during_;                     // bytes per cycle
  double cycle_between_ = 0, cycle_during_ = 0;           // this cycle so far
  // Captures made in each mode (Index) while that mode's untouched rate was
  // unmeasured (BorrowsUntouchedRate).
  int untouched_tries_[2] = {0, 0};
  static constexpr int kUntouchedTries = 4;
};

const char* ModeName(TouchModel::Mode mode);

}  // namespace cairn::core
