#include "os/fs/node_lock.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/test_util.hpp"

namespace cairn::os {
namespace {

using namespace std::chrono_literals;

// Every test gets its own lock file (and queue directory) in a temporary
// directory.
class NodeLockTest : public ::testing::Test {
 protected:
  test::TempDir dir{"node-lock"};
  const std::string path = dir.path() + "/pin.lock";
};

TEST_F(NodeLockTest, ExcludesOtherHoldersAndIsReleasedOnClose) {
  auto a = NodeLock::TryAcquire(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // Queue entries are locked with flock, which belongs to the open file
  // description: a second Acquire in the same process queues and conflicts
  // just like another process would.
  auto b = NodeLock::TryAcquire(path);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kState);
  EXPECT_NE(b.status().message().find("held by another process"), std::string::npos);
  a->Release();
  EXPECT_TRUE(NodeLock::TryAcquire(path).ok());
}

// Entries in the queue directory of `path` (live or not).
int QueuedEntries(const std::string& path) {
  DIR* d = ::opendir(NodeLockQueueDir(path).c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
  ::closedir(d);
  return n;
}

// Polls `pred` for up to 10 s.
template <typename Pred>
bool Eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Acquire, giving up after 20 s (a hang fails the test instead of CI).
Result<NodeLock> AcquireWithin20s(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  return NodeLock::Acquire(
      path, [&] { return std::chrono::steady_clock::now() - t0 > 20s; }, 100us);
}

TEST_F(NodeLockTest, ReleaseLeavesTheQueue) {
  {
    auto a = NodeLock::TryAcquire(path);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(QueuedEntries(path), 1);
    auto b = NodeLock::TryAcquire(path);  // fails and leaves no entry behind
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(QueuedEntries(path), 1);
  }
  EXPECT_EQ(QueuedEntries(path), 0);
}

// The lock file keeps the last ticket; bytes no run could have written there
// (another program's file, say) restart the count instead of wrapping it.
TEST_F(NodeLockTest, ForeignLockFileContentRestartsTheTickets) {
  std::ofstream(path) << std::string(8, '\xff');
  auto a = NodeLock::TryAcquire(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::ifstream entry(NodeLockQueueDir(path) + "/00000000000000000001");
  EXPECT_TRUE(entry.good()) << "the first ticket is 1";
  auto b = NodeLock::TryAcquire(path);
  EXPECT_FALSE(b.ok()) << "and it excludes the next";
}

// Waiters queued one after the other get the lock in that order, whatever
// their polling luck (a plain flock would serve them in any order).
TEST_F(NodeLockTest, WaitersAreServedInArrivalOrder) {
  auto holder = NodeLock::TryAcquire(path);
  ASSERT_TRUE(holder.ok());
  constexpr int kWaiters = 6;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::jthread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      auto l = AcquireWithin20s(path);
      if (!l.ok()) return;
      std::lock_guard lock(mu);
      order.push_back(i);
    });
    // The next waiter comes only once this one is queued.
    ASSERT_TRUE(Eventually([&] { return QueuedEntries(path) == i + 2; })) << "waiter " << i;
  }
  holder->Release();
  for (auto& t : waiters) t.join();
  std::vector<int> expected;
  for (int i = 0; i < kWaiters; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
  EXPECT_EQ(QueuedEntries(path), 0);
}

// A waiter killed while queued leaves its entry, unlocked: the waiter after
// it must not wait for it, and removes it.
TEST_F(NodeLockTest, WaiterKilledBySigkillDoesNotBlockTheQueue) {
  auto holder = NodeLock::TryAcquire(path);
  ASSERT_TRUE(holder.ok());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    (void)NodeLock::Acquire(path, nullptr, 200us);  // waits until killed
    ::_exit(0);
  }
  ASSERT_TRUE(Eventually([&] { return QueuedEntries(path) == 2; }));
  std::atomic<bool> got{false};
  std::jthread after([&] { got = AcquireWithin20s(path).ok(); });
  ASSERT_TRUE(Eventually([&] { return QueuedEntries(path) == 3; }));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(st));
  // The waiter behind meets the dead entry on its next poll and removes it,
  // and keeps waiting for the live holder.
  EXPECT_TRUE(Eventually([&] { return QueuedEntries(path) == 2; }))
      << "the dead waiter's entry stayed";
  EXPECT_FALSE(got);
  holder->Release();
  after.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(QueuedEntries(path), 0);
}

TEST_F(NodeLockTest, WaiterGivesUpWhenAsked) {
  auto holder = NodeLock::TryAcquire(path);
  ASSERT_TRUE(holder.ok());
  int polls = 0;
  auto waiter = NodeLock::Acquire(
      path, [&] { return ++polls >= 3; }, 100us);
  ASSERT_FALSE(waiter.ok());
  EXPECT_EQ(waiter.status().code(), Code::kState);
  EXPECT_EQ(polls, 3);
  EXPECT_EQ(QueuedEntries(path), 1) << "the waiter left the queue";
}

TEST_F(NodeLockTest, UnopenablePathNamesIt) {
  auto r = NodeLock::TryAcquire("/nonexistent-dir-for-cairn/pin.lock");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIo);
  EXPECT_NE(r.status().message().find("/nonexistent-dir-for-cairn/pin.lock"), std::string::npos);
  // A file where the queue directory should be.
  std::ofstream(NodeLockQueueDir(path)) << "x";
  r = NodeLock::TryAcquire(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIo);
  EXPECT_NE(r.status().message().find(NodeLockQueueDir(path)), std::string::npos)
      << r.status().ToString();
}

// Four processes take the lock 5 times each and log enter/exit with O_APPEND
// (atomic appends): no two critical sections may overlap.
TEST_F(NodeLockTest, ProcessesTakeTurns) {
  const std::string log = dir.path() + "/log";
  constexpr int kProcs = 4, kRounds = 5;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      FILE* f = std::fopen(log.c_str(), "a");
      if (f == nullptr) ::_exit(2);
      std::setvbuf(f, nullptr, _IONBF, 0);
      for (int r = 0; r < kRounds; ++r) {
        auto l = NodeLock::Acquire(path, nullptr, 200us);
        if (!l.ok()) ::_exit(3);
        std::fprintf(f, "+%d\n", p);
        std::this_thread::sleep_for(2ms);
        std::fprintf(f, "-%d\n", p);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  }
  std::ifstream in(log);
  std::string line, holder;
  int sections = 0;
  while (std::getline(in, line)) {
    if (line[0] == '+') {
      ASSERT_TRUE(holder.empty()) << "process " << line.substr(1) << " entered while " << holder
                                  << " held the lock";
      holder = line.substr(1);
      ++sections;
    } else {
      ASSERT_EQ(line.substr(1), holder);
      holder.clear();
    }
  }
  EXPECT_EQ(sections, kProcs * kRounds);
}

// A holder killed with SIGKILL cannot release anything itself: the kernel
// must, so the next process gets the lock at once (no stale lock, no hang).
TEST_F(NodeLockTest, HolderKilledBySigkillLeavesNoStaleLock) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto l = NodeLock::TryAcquire(path);
    char c = l.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();  // holds the lock until killed
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  EXPECT_FALSE(NodeLock::TryAcquire(path).ok()) << "the child holds it";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(st));
  auto l = AcquireWithin20s(path);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
}

TEST_F(NodeLockTest, DefaultPathIsPerUserAndNodeLocal) {
  const std::string p = DefaultPinLockPath();
  EXPECT_NE(p.find("cairn-pin-" + std::to_string(::getuid()) + ".lock"), std::string::npos);
}

}  // namespace
}  // namespace cairn::os
