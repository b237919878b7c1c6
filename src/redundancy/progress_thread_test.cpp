// The progress thread's pacing, kicks and stop (progress_thread.hpp).
#include "redundancy/progress_thread.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace cairn::redundancy {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;

// Counts the passes and lets the test wait for the n-th; the pass returns
// what the test sets.
class Passes final : public ProgressThread::Pass {
 public:
  Pace Run() override {
    std::lock_guard lock(mu_);
    ++count_;
    cv_.notify_all();
    return count_ <= busy_for_ ? Pace::kBusy : Pace::kIdle;
  }
  // Waits (a minute at most, a failure then) until `n` passes ran.
  bool WaitFor(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::minutes(1), [&] { return count_ >= n; });
  }
  int count() {
    std::lock_guard lock(mu_);
    return count_;
  }
  int busy_for_ = 0;  // the first passes that report kBusy

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

// Idle for an hour: only the first pass and the kicks run one.
TEST(ProgressThreadTest, AKickRunsAPassAndStopEndsThem) {
  Passes passes;
  ProgressThread thread(&passes, {.busy = hours(1), .waiting = hours(1), .idle = hours(1)});
  ASSERT_TRUE(passes.WaitFor(1));
  thread.Kick();
  ASSERT_TRUE(passes.WaitFor(2));
  thread.Kick();
  ASSERT_TRUE(passes.WaitFor(3));
  thread.Stop();
  const int after_stop = passes.count();
  EXPECT_EQ(thread.passes(), static_cast<uint64_t>(after_stop));
  thread.Kick();
  thread.Stop();  // idempotent
  EXPECT_EQ(passes.count(), after_stop);
}

// A busy pass is followed by the next after the busy period, without a
// kick; once idle, nothing runs for the idle period (an hour here).
TEST(ProgressThreadTest, BusyPassesFollowEachOtherUntilIdle) {
  Passes passes;
  passes.busy_for_ = 5;
  ProgressThread thread(&passes, {.busy = microseconds(0), .waiting = hours(1), .idle = hours(1)});
  ASSERT_TRUE(passes.WaitFor(6));  // 5 busy ones, then the idle one
  thread.Stop();
  EXPECT_EQ(passes.count(), 6);
}

// The destructor stops the thread (no pass touches a gone object).
TEST(ProgressThreadTest, DestroyedWhileIdle) {
  Passes passes;
  {
    ProgressThread thread(&passes, {.busy = hours(1), .waiting = hours(1), .idle = hours(1)});
    ASSERT_TRUE(passes.WaitFor(1));
  }
  EXPECT_EQ(passes.count(), 1);
}

}  // namespace
}  // namespace cairn::redundancy
