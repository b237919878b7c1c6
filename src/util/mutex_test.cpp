#include "util/mutex.hpp"

#include <condition_variable>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn {
namespace {

struct Counter {
  Mutex mu;
  int value CAIRN_GUARDED_BY(mu) = 0;
  bool ready CAIRN_GUARDED_BY(mu) = false;
};

TEST(MutexTest, MutexLockSerializes) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 20000; ++i) {
        MutexLock l(&c.mu);
        c.value = c.value + 1;  // a non-atomic read-modify-write
      }
    });
  }
  for (auto& th : threads) th.join();
  MutexLock l(&c.mu);
  EXPECT_EQ(c.value, 80000);
}

TEST(MutexTest, TryLockFailsWhileHeldElsewhere) {
  Mutex mu;
  mu.Lock();
  bool got = true;
  std::thread([&] {
    got = false;
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_FALSE(got);
  mu.Unlock();
  std::thread([&] {
    got = false;
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_TRUE(got);
}

TEST(MutexTest, WorksWithConditionVariableAny) {
  Counter c;
  std::condition_variable_any cv;
  std::thread producer([&] {
    MutexLock l(&c.mu);
    c.value = 42;
    c.ready = true;
    cv.notify_all();
  });
  {
    MutexLock l(&c.mu);
    cv.wait(l, [&]() CAIRN_NO_THREAD_SAFETY_ANALYSIS { return c.ready; });
    EXPECT_EQ(c.value, 42);
  }
  producer.join();
}

TEST(MutexTest, NativeWorksWithStdConditionVariable) {
  Mutex mu;
  std::condition_variable cv;
  bool flag = false;
  std::thread t([&] {
    std::lock_guard<std::mutex> g(mu.native());
    flag = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> l(mu.native());
  cv.wait(l, [&] { return flag; });
  EXPECT_TRUE(flag);
  l.unlock();
  t.join();
}

TEST(MutexTest, MutexLockRelocks) {
  Counter c;
  MutexLock l(&c.mu);
  c.value = 1;
  l.Unlock();
  // Another thread can take the mutex while this guard has dropped it.
  std::thread([&c] {
    MutexLock other(&c.mu);
    c.value = 2;
  }).join();
  l.Lock();
  EXPECT_EQ(c.value, 2);
}

TEST(MutexTest, MutexLockDestroyedWhileUnlockedDoesNotUnlockTwice) {
  Mutex mu;
  {
    MutexLock l(&mu);
    l.Unlock();
  }
  // Free, and not corrupted by a second unlock.
  if (mu.TryLock()) {
    mu.Unlock();
  } else {
    ADD_FAILURE() << "the mutex is still held after its guard went away";
  }
}

void BumpUnlocked(Counter& c, int* seen) CAIRN_REQUIRES(c.mu) {
  c.value = 1;
  {
    MutexUnlock unlocked(&c.mu);
    std::thread([&c, seen] {
      MutexLock other(&c.mu);
      *seen = c.value;
      c.value = 2;
    }).join();
  }
  c.value += 1;  // held again
}

TEST(MutexTest, MutexUnlockReleasesForItsScope) {
  Counter c;
  int seen = 0;
  {
    MutexLock l(&c.mu);
    BumpUnlocked(c, &seen);
    EXPECT_EQ(c.value, 3);
  }
  EXPECT_EQ(seen, 1);
}

#ifndef NDEBUG
// Debug builds check AssertHeld at run time: held by this thread, through a
// MutexLock, across a condition wait and after a relock.
TEST(MutexTest, AssertHeldChecksTheOwnerInDebugBuilds) {
  Mutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  {
    MutexLock l(&mu);
    mu.AssertHeld();
    std::thread t([&] {
      MutexLock other(&mu);
      ready = true;
      cv.notify_all();
    });
    cv.wait(l, [&] { return ready; });
    mu.AssertHeld();  // re-acquired by the wait
    l.Unlock();
    l.Lock();
    mu.AssertHeld();
    l.Unlock();
    t.join();
  }
  EXPECT_DEATH(mu.AssertHeld(), "does not hold");  // released
}
#endif

}  // namespace
}  // namespace cairn
