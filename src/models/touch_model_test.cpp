#include "models/touch_model.hpp"

#include <gtest/gtest.h>

namespace cairn::core {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr double kGBps = 1e9;

using Mode = TouchModel::Mode;

// A model fed with steady rates: captures of `size` every `interval_s`,
// lasting size / write_untouched; the touching thread touches at its rate
// for the whole interval and (concurrent) the whole capture.
TouchModel Steady(uint64_t size, double interval_s, double touch_between, double touch_during,
                  double write_touched, double write_contended, double write_untouched) {
  TouchModel m;
  const double capture_s = size / write_untouched;
  for (int i = 0; i < 8; ++i) {
    m.OnTouch(static_cast<uint64_t>(touch_between * interval_s), interval_s, /*during_capture=*/false);
    m.OnTouch(static_cast<uint64_t>(touch_during * capture_s), capture_s, /*during_capture=*/true);
    m.OnCaptureCopy(size, size / write_touched, /*into_touched=*/true, /*touching=*/false);
    m.OnCaptureCopy(size, size / write_contended, /*into_touched=*/true, /*touching=*/true);
    m.OnCaptureCopy(size, size / write_untouched, /*into_touched=*/false, /*touching=*/false);
    m.OnCaptureCopy(size, size / write_untouched, /*into_touched=*/false, /*touching=*/true);
    m.OnCapture(size, capture_s, interval_s, /*touching_allowed=*/true);
  }
  return m;
}

TEST(TouchModel, TouchesConcurrentlyUntilItHasMeasuredTheRates) {
  TouchModel m;
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kConcurrent);
  EXPECT_LT(m.PredictBlocking(Mode::kSequential, 0), 0);
  m.OnCapture(64 * kMiB, 0.05, -1, true);  // first capture: no interval yet
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kConcurrent);
}

TEST(TouchModel, TiesGoToSequentialAndLeavingItNeedsAClearGain) {
  // Touching between captures keeps up (2 GB/s x 100 ms > 64 MiB) and
  // contention is unmeasured (Wt borrows Wc): both predict S / Wc.
  TouchModel m;
  for (int i = 0; i < 8; ++i) {
    m.OnTouch(200'000'000, 0.100, false);
    m.OnCaptureCopy(64 * kMiB, 64.0 * kMiB / (4 * kGBps), /*into_touched=*/true, true);
    m.OnCaptureCopy(64 * kMiB, 64.0 * kMiB / (1.3 * kGBps), /*into_touched=*/false, true);
    m.OnCapture(64 * kMiB, 0.02, 0.100, true);
  }
  EXPECT_DOUBLE_EQ(m.PredictBlocking(Mode::kSequential, 0), m.PredictBlocking(Mode::kConcurrent, 0));
  EXPECT_EQ(m.Decide(Mode::kConcurrent), Mode::kSequential);
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kSequential);
  // The reserve does not enter the decision (no flapping as it fills).
  TouchModel n = Steady(64 * kMiB, 0.005, 1 * kGBps, 1 * kGBps, 5 * kGBps, 4.5 * kGBps, 1.3 * kGBps);
  EXPECT_EQ(n.Decide(Mode::kConcurrent), Mode::kConcurrent);
  EXPECT_EQ(n.Decide(Mode::kSequential), Mode::kConcurrent);
}

TEST(TouchModel, DecidesWithoutTheUntouchedRateWhileTouchingKeepsAhead) {
  // 4 GB/s x 50 ms between captures touches more than a 64 MiB checkpoint:
  // no capture ever lands in untouched memory, so Wu is never measured, and
  // none is needed to compare the modes.
  auto feed = [](double interval_s) {
    TouchModel m;
    const double capture_s = 64.0 * kMiB / (4 * kGBps);
    for (int i = 0; i < 8; ++i) {
      m.OnTouch(static_cast<uint64_t>(4 * kGBps * interval_s), interval_s, /*during_capture=*/false);
      m.OnTouch(static_cast<uint64_t>(2 * kGBps * capture_s), capture_s, /*during_capture=*/true);
      m.OnCaptureCopy(64 * kMiB, capture_s, /*into_touched=*/true, /*touching=*/true);
      m.OnCapture(64 * kMiB, capture_s, interval_s, /*touching_allowed=*/true);
    }
    return m;
  };
  TouchModel keeps_ahead = feed(0.050);
  EXPECT_NEAR(keeps_ahead.PredictBlocking(Mode::kSequential, 0), 64.0 * kMiB / (4 * kGBps), 1e-9);
  EXPECT_NEAR(keeps_ahead.PredictBlocking(Mode::kConcurrent, 0), 64.0 * kMiB / (4 * kGBps), 1e-9);
  EXPECT_EQ(keeps_ahead.Decide(Mode::kConcurrent), Mode::kSequential) << "a tie tries sequential";
  // Once sequential has measured undisturbed captures twice as fast, it stays.
  for (int i = 0; i < 8; ++i) {
    keeps_ahead.OnCaptureCopy(64 * kMiB, 64.0 * kMiB / (8 * kGBps), /*into_touched=*/true, /*touching=*/false);
  }
  EXPECT_EQ(keeps_ahead.Decide(Mode::kSequential), Mode::kSequential);
  EXPECT_NEAR(keeps_ahead.PredictBlocking(Mode::kSequential, 0), 64.0 * kMiB / (8 * kGBps), 1e-9);

  // 5 ms between captures: neither mode keeps ahead (20 MB between
  // captures, 34 MB more during them), and what lands untouched cannot be
  // priced without Wu: the model touches concurrently, which measures it.
  TouchModel falls_behind = feed(0.005);
  EXPECT_LT(falls_behind.PredictBlocking(Mode::kSequential, 0), 0);
  EXPECT_LT(falls_behind.PredictBlocking(Mode::kConcurrent, 0), 0);
  EXPECT_EQ(falls_behind.Decide(Mode::kSequential), Mode::kConcurrent);
}

TEST(TouchModel, PredictsFromWhatTouchingDeliveredPerCycleNotFromTheSliceRate) {
  // Slices touch at 16 GB/s, which over a 5 ms interval would be 80 MB, more
  // than a checkpoint; but the thread delivers only 8 MiB between captures
  // (it waits, claims chunks, competes): sequential cannot keep ahead, and
  // concurrent, which adds 60 MiB during each capture, can.
  TouchModel m;
  const double capture_s = 64.0 * kMiB / (4 * kGBps);
  for (int i = 0; i < 8; ++i) {
    m.OnTouch(8 * kMiB, 8.0 * kMiB / (16 * kGBps), /*during_capture=*/false);
    m.OnTouch(60 * kMiB, 60.0 * kMiB / (16 * kGBps), /*during_capture=*/true);
    m.OnCaptureCopy(64 * kMiB, capture_s, /*into_touched=*/true, /*touching=*/true);
    m.OnCaptureCopy(64 * kMiB, 64.0 * kMiB / (1 * kGBps), /*into_touched=*/false, /*touching=*/false);
    m.OnCaptureCopy(64 * kMiB, 64.0 * kMiB / (1 * kGBps), /*into_touched=*/false, /*touching=*/true);
    m.OnCapture(64 * kMiB, capture_s, 0.005, /*touching_allowed=*/true);
  }
  const double seq = m.PredictBlocking(Mode::kSequential, 0);
  EXPECT_NEAR(seq, 8.0 * kMiB / (4 * kGBps) + 56.0 * kMiB / (1 * kGBps), 1e-6);
  EXPECT_NEAR(m.PredictBlocking(Mode::kConcurrent, 0), 64.0 * kMiB / (4 * kGBps), 1e-6);
  EXPECT_EQ(m.Decide(Mode::kConcurrent), Mode::kConcurrent);
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kConcurrent);

  // Cycles in sequential mode (touching_allowed false) tell nothing of what
  // touching during captures delivers: Yd keeps its value.
  for (int i = 0; i < 8; ++i) {
    m.OnTouch(2 * kMiB, 2.0 * kMiB / (16 * kGBps), /*during_capture=*/true);  // a slice overlapping a start
    m.OnCapture(64 * kMiB, capture_s, 0.005, /*touching_allowed=*/false);
  }
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kConcurrent);
}

// Captures of 64 MiB every 10 ms where faulting is the bottleneck (4 KiB
// pages, fresh VM memory): touching delivers 14 MB between captures alone
// and 16 MB more during each capture, but a capture into untouched memory
// runs at 1.45 GB/s alone and 0.7 GB/s while the toucher faults too.
constexpr double kFaultCycleInterval = 0.010;
constexpr uint64_t kFaultYieldBetween = 14'000'000, kFaultYieldDuring = 16'000'000;
constexpr double kFaultTouched = 10 * kGBps, kFaultAlone = 1.45 * kGBps, kFaultContended = 0.7 * kGBps;

void FeedFaultBoundCycle(TouchModel& m, bool concurrent) {
  const uint64_t s = 64 * kMiB;
  const uint64_t x = kFaultYieldBetween + (concurrent ? kFaultYieldDuring : 0);
  const double w_untouched = concurrent ? kFaultContended : kFaultAlone;
  const double capture_s = x / kFaultTouched + (s - x) / w_untouched;
  m.OnTouch(kFaultYieldBetween, kFaultCycleInterval, /*during_capture=*/false);
  if (concurrent) m.OnTouch(kFaultYieldDuring, capture_s, /*during_capture=*/true);
  m.OnCaptureCopy(x, x / kFaultTouched, /*into_touched=*/true, concurrent);
  m.OnCaptureCopy(s - x, (s - x) / w_untouched, /*into_touched=*/false, concurrent);
  m.OnCapture(s, capture_s, kFaultCycleInterval, concurrent);
}

TEST(TouchModel, PricesUntouchedCapturesWithAndWithoutTouchingApart) {
  TouchModel m;
  for (int i = 0; i < 8; ++i) FeedFaultBoundCycle(m, /*concurrent=*/true);
  // Only the contended untouched rate is known: sequential borrows it, which
  // makes it look worse than it is, so it is tried.
  const double s = 64.0 * kMiB;
  const double x_conc = kFaultYieldBetween + kFaultYieldDuring;
  EXPECT_NEAR(m.PredictBlocking(Mode::kSequential, 0),
              kFaultYieldBetween / kFaultTouched + (s - kFaultYieldBetween) / kFaultContended, 1e-6);
  EXPECT_GT(m.PredictBlocking(Mode::kSequential, 0), m.PredictBlocking(Mode::kConcurrent, 0));
  EXPECT_EQ(m.Decide(Mode::kConcurrent), Mode::kSequential) << "the borrowed rate is tried";

  FeedFaultBoundCycle(m, /*concurrent=*/false);
  const double seq = kFaultYieldBetween / kFaultTouched + (s - kFaultYieldBetween) / kFaultAlone;
  const double conc = x_conc / kFaultTouched + (s - x_conc) / kFaultContended;
  EXPECT_NEAR(m.PredictBlocking(Mode::kSequential, 0), seq, 1e-6);
  EXPECT_NEAR(m.PredictBlocking(Mode::kConcurrent, 0), conc, 1e-6);
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kSequential);
  EXPECT_EQ(m.Decide(Mode::kConcurrent), Mode::kSequential);
}

TEST(TouchModel, TriesABorrowedUntouchedRateOnlyAFewCaptures) {
  TouchModel m;
  for (int i = 0; i < 8; ++i) FeedFaultBoundCycle(m, /*concurrent=*/true);
  ASSERT_EQ(m.Decide(Mode::kConcurrent), Mode::kSequential);
  // Sequential captures whose batches never measure the alone rate (here:
  // none reported at all): after a few, the predictions decide again.
  for (int i = 0; i < 8; ++i) {
    m.OnTouch(kFaultYieldBetween, kFaultCycleInterval, /*during_capture=*/false);
    m.OnCapture(64 * kMiB, 0.05, kFaultCycleInterval, /*touching_allowed=*/false);
  }
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kConcurrent);
}

TEST(TouchModel, ShortIntervalsAndCheapContentionMeanConcurrent) {
  // 5 ms between captures touches little; touching during the 50 ms capture
  // adds much more and costs captures into touched memory only 10%.
  TouchModel m = Steady(64 * kMiB, 0.005, 1 * kGBps, 1 * kGBps, 5 * kGBps, 4.5 * kGBps, 1.3 * kGBps);
  EXPECT_EQ(m.Decide(Mode::kSequential), Mode::kConcurrent);
  EXPECT_GT(m.PredictBlocking(Mode::kSequential, 0), m.PredictBlocking(Mode::kConcurrent, 0));
}

TEST(TouchModel, LongIntervalsAndCostlyContentionMeanSequential) {
  // 100 ms between captures touches a whole 64 MiB checkpoint at 2 GB/s;
  // touching during captures would halve their speed for nothing.
  TouchModel m = Steady(64 * kMiB, 0.100, 2 * kGBps, 1 * kGBps, 5 * kGBps, 2.5 * kGBps, 1.3 * kGBps);
  EXPECT_EQ(m.Decide(Mode::kConcurrent), Mode::kSequential);
  const double seq = m.PredictBlocking(Mode::kSequential, 0);
  EXPECT_NEAR(seq, 64.0 * kMiB / (5 * kGBps), 1e-6) << "all of it lands in touched memory";
}

TEST(TouchModel, PredictionFollowsTheFormula) {
  // S = 64 MiB, I = 10 ms, C = S / Wu; R = 4 MiB.
  const double s = 64.0 * kMiB, r = 4.0 * kMiB;
  TouchModel m = Steady(64 * kMiB, 0.010, 2 * kGBps, 0.5 * kGBps, 5 * kGBps, 4 * kGBps, 1.25 * kGBps);
  const double c = s / (1.25 * kGBps);
  const double x_seq = r + 2 * kGBps * 0.010;
  const double x_conc = x_seq + 0.5 * kGBps * c;
  ASSERT_LT(x_conc, s) << "keep both below S, where the formula has no clamp";
  const uint64_t reserve = 4 * kMiB;
  EXPECT_NEAR(m.PredictBlocking(Mode::kSequential, reserve),
              x_seq / (5 * kGBps) + (s - x_seq) / (1.25 * kGBps), 1e-6);
  EXPECT_NEAR(m.PredictBlocking(Mode::kConcurrent, reserve),
              x_conc / (4 * kGBps) + (s - x_conc) / (1.25 * kGBps), 1e-6);
}

}  // namespace
}  // namespace cairn::core
