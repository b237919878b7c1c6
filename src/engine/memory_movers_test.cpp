// MemoryMovers: the counts by kind, the scope, and the wake-up when a kind
// goes idle (what the initializer's touch waits on).
#include "engine/memory_movers.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "util/mutex.hpp"

namespace cairn::core {
namespace {

using Kind = MemoryMovers::Kind;

TEST(MemoryMoversTest, CountsEachKindApart) {
  MemoryMovers m;
  m.Add(Kind::kCapture, +1);
  m.Add(Kind::kBackgroundIo, +1);
  m.Add(Kind::kBackgroundIo, +1);
  EXPECT_EQ(m.now(Kind::kCapture), 1);
  EXPECT_EQ(m.now(Kind::kRestore), 0);
  EXPECT_EQ(m.now(Kind::kBackgroundIo), 2);
  {
    const MemoryMovers::Scope restore(&m, Kind::kRestore);
    EXPECT_EQ(m.now(Kind::kRestore), 1);
  }
  EXPECT_EQ(m.now(Kind::kRestore), 0);
}

TEST(MemoryMoversTest, TheLastMoverOfAKindWakesTheWaiters) {
  MemoryMovers m;
  Mutex mu;
  m.Add(Kind::kCapture, +1);
  m.Add(Kind::kCapture, +1);
  std::thread ender([&] {
    // Under the waiter's mutex, as the pipeline's movers are when the
    // initializer must not miss the wake-up (it also re-checks every few ms).
    MutexLock l(&mu);
    m.Add(Kind::kCapture, -1);
    m.Add(Kind::kCapture, -1);  // idle: notifies
  });
  {
    MutexLock l(&mu);
    m.changed().wait(l, [&] { return m.now(Kind::kCapture) == 0; });
  }
  ender.join();
  EXPECT_EQ(m.now(Kind::kCapture), 0);
}

}  // namespace
}  // namespace cairn::core
