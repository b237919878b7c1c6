#include "models/interval_model.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace cairn::core {
namespace {

using std::chrono::duration_cast;
using std::chrono::nanoseconds;

// A fixed origin plus seconds: the injected clock (no sleeps, no real time).
SteadyTime At(double seconds) {
  return SteadyTime{} + std::chrono::hours(1) + duration_cast<nanoseconds>(std::chrono::duration<double>(seconds));
}

TEST(IntervalFormulaTest, OptimalIntervalIsYoungWithTheRestartCorrection) {
  EXPECT_DOUBLE_EQ(OptimalInterval(10, 0, 3600), std::sqrt(2.0 * 10 * 3600));  // Young
  EXPECT_DOUBLE_EQ(OptimalInterval(10, 600, 3600), std::sqrt(2.0 * 10 * 3000));  // sqrt(2 C (M - R))
  // Never below C; with M <= R no interval helps: T = C.
  EXPECT_DOUBLE_EQ(OptimalInterval(10, 0, 4), 10);
  EXPECT_DOUBLE_EQ(OptimalInterval(10, 3600, 3600), 10);
  EXPECT_DOUBLE_EQ(OptimalInterval(10, 7200, 3600), 10);
}

TEST(IntervalFormulaTest, ExpectedWasteIsThePapersEquationTwo) {
  // 1 - (1 - 10/300)(1 - (60 + 150)/3600)
  EXPECT_NEAR(ExpectedWaste(10, 60, 3600, 300), 1 - (290.0 / 300) * (1 - 210.0 / 3600), 1e-12);
  EXPECT_DOUBLE_EQ(ExpectedWaste(10, 0, 3600, 10), 1);     // T = C: no work
  EXPECT_DOUBLE_EQ(ExpectedWaste(10, 3600, 3600, 20), 1);  // R >= M
  EXPECT_DOUBLE_EQ(ExpectedWaste(10, 0, 3600, 1e6), 1);    // T/2 > M
  EXPECT_DOUBLE_EQ(ExpectedWaste(0, 36, 3600, 0), 0.01);   // free checkpoints: R/M
}

// T_opt is the exact minimizer of the waste it reports, also with a restore
// cost that Young's sqrt(2 C M) would get wrong by 30%.
TEST(IntervalFormulaTest, OptimalIntervalMinimizesTheExpectedWaste) {
  for (double r : {0.0, 100.0, 1800.0}) {
    for (double c : {0.01, 1.0, 30.0}) {
      const double m = 3600;
      const double t = OptimalInterval(c, r, m);
      const double w = ExpectedWaste(c, r, m, t);
      for (double f : {0.9, 0.99, 1.01, 1.1}) {
        EXPECT_LT(w, ExpectedWaste(c, r, m, t * f)) << "C=" << c << " R=" << r << " T*" << f;
      }
    }
  }
}

TEST(IntervalModelTest, DueBeforeAnyCheckpoint) {
  IntervalModel m;
  IntervalDecision d = m.Due("x", 3600, At(0));
  EXPECT_TRUE(d.due);
  EXPECT_FALSE(d.measured);
  EXPECT_EQ(d.interval_s, 0);
}

TEST(IntervalModelTest, DueOnceTheIntervalHasPassedSinceTheLastCheckpointEnded) {
  IntervalModel m;
  m.OnCheckpoint("x", 1, 0, 0.5, At(100));  // C = 0.5, R = 0: T = sqrt(2 * 0.5 * 3600) = 60
  IntervalDecision d = m.Due("x", 3600, At(159));
  EXPECT_TRUE(d.measured);
  EXPECT_FALSE(d.due);
  EXPECT_DOUBLE_EQ(d.interval_s, 60);
  EXPECT_DOUBLE_EQ(d.checkpoint_s, 0.5);
  EXPECT_NEAR(d.waste, ExpectedWaste(0.5, 0, 3600, 60), 1e-15);
  EXPECT_TRUE(m.Due("x", 3600, At(160)).due);
  // Another name is measured on its own.
  EXPECT_FALSE(m.Due("y", 3600, At(101)).measured);
  // A shorter MTBF: T = sqrt(2 * 0.5 * 900) = 30.
  EXPECT_TRUE(m.Due("x", 900, At(130)).due);
  EXPECT_FALSE(m.Due("x", 900, At(129)).due);
}

// The median of the last kWindow costs: one outlier does not move it (a
// mean would be 20.8), a lasting change wins it within three checkpoints,
// and the oldest costs leave the window.
TEST(IntervalModelTest, CostIsTheMedianOfTheRecentCheckpoints) {
  IntervalModel m;
  int64_t v = 0;
  auto checkpoint = [&](double cost) {
    m.OnCheckpoint("x", v, 0, cost, At(static_cast<double>(v)));
    ++v;
  };
  auto cost = [&] { return m.Due("x", 3600, At(100)).checkpoint_s; };
  for (double c : {1, 1, 100, 1, 1}) checkpoint(c);
  EXPECT_DOUBLE_EQ(cost(), 1);
  checkpoint(50);
  EXPECT_DOUBLE_EQ(cost(), 1);  // 1 100 1 1 50
  checkpoint(50);
  EXPECT_DOUBLE_EQ(cost(), 50);  // 100 1 1 50 50
  for (int i = 0; i < 3; ++i) checkpoint(2);
  EXPECT_DOUBLE_EQ(cost(), 2);  // 50 50 2 2 2: the 1s and the 100 are gone
  // Two samples: their mean.
  m.OnCheckpoint("y", 0, 0, 1, At(0));
  m.OnCheckpoint("y", 1, 0, 3, At(0));
  EXPECT_DOUBLE_EQ(m.Due("y", 3600, At(0)).checkpoint_s, 2);
}

TEST(IntervalModelTest, CheckpointingAVersionAgainReplacesItsSample) {
  IntervalModel m;
  m.OnCheckpoint("x", 7, 0, 100, At(0));
  m.OnCheckpoint("x", 7, 0, 2, At(1));
  EXPECT_DOUBLE_EQ(m.Due("x", 3600, At(1)).checkpoint_s, 2);
}

// Waiting for a version is part of its blocking cost, and the interval
// starts when the application stops waiting for the newest version.
TEST(IntervalModelTest, WaitsAddToTheirVersionsCost) {
  IntervalModel m;
  m.OnCheckpoint("x", 1, 0, 0.25, At(0));
  m.OnWait("x", 1, 0.25, At(10));  // C = 0.5: T = 60
  IntervalDecision d = m.Due("x", 3600, At(69));
  EXPECT_DOUBLE_EQ(d.checkpoint_s, 0.5);
  EXPECT_FALSE(d.due);
  EXPECT_TRUE(m.Due("x", 3600, At(70)).due);
  // A wait on a version not in the window, or of an unknown name: ignored.
  m.OnWait("x", 99, 1000, At(500));
  m.OnWait("z", 1, 1000, At(500));
  EXPECT_DOUBLE_EQ(m.Due("x", 3600, At(70)).checkpoint_s, 0.5);
  EXPECT_TRUE(m.Due("x", 3600, At(70)).due);
  EXPECT_FALSE(m.Due("z", 3600, At(70)).measured);
}

// R: measured when the name was restored; else the last checkpoint's bytes
// over the last restore's read bandwidth, or over the default one.
TEST(IntervalModelTest, RestoreCostMeasuredOrEstimated) {
  IntervalModel m;
  m.OnCheckpoint("x", 1, 3'000'000'000, 1, At(0));
  IntervalDecision d = m.Due("x", 3600, At(0));
  EXPECT_FALSE(d.restore_measured);
  EXPECT_DOUBLE_EQ(d.restore_s, 3'000'000'000 / IntervalModel::kDefaultReadBytesPerS);
  EXPECT_DOUBLE_EQ(d.interval_s, std::sqrt(2.0 * 1 * (3600 - d.restore_s)));
  m.OnRestore("other", 1'000'000'000, 0.1);  // 10 GB/s
  d = m.Due("x", 3600, At(0));
  EXPECT_FALSE(d.restore_measured);
  EXPECT_DOUBLE_EQ(d.restore_s, 0.3);
  m.OnRestore("x", 3'000'000'000, 1800);  // measured: M - R = 1800
  d = m.Due("x", 3600, At(0));
  EXPECT_TRUE(d.restore_measured);
  EXPECT_DOUBLE_EQ(d.restore_s, 1800);
  EXPECT_DOUBLE_EQ(d.interval_s, std::sqrt(2.0 * 1 * 1800));
  EXPECT_FALSE(d.due);
  // A name restored but not checkpointed yet is due, and says its R.
  m.OnRestore("fresh", 10, 2);
  d = m.Due("fresh", 3600, At(0));
  EXPECT_TRUE(d.due);
  EXPECT_DOUBLE_EQ(d.restore_s, 2);
}

}  // namespace
}  // namespace cairn::core
