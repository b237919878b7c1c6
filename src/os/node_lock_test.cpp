#include "os/node_lock.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/test_util.hpp"

namespace cairn::os {
namespace {

using namespace std::chrono_literals;

TEST(NodeLock, ExcludesOtherHoldersAndIsReleasedOnClose) {
  test::TempDir dir("node-lock");
  const std::string path = dir.path() + "/pin.lock";
  auto a = NodeLock::TryAcquire(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // flock locks belong to the open file description: a second open in the
  // same process conflicts just like another process would.
  auto b = NodeLock::TryAcquire(path);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kState);
  EXPECT_NE(b.status().message().find("held by another process"), std::string::npos);
  a->Release();
  EXPECT_TRUE(NodeLock::TryAcquire(path).ok());
}

TEST(NodeLock, WaiterGivesUpWhenAsked) {
  test::TempDir dir("node-lock");
  const std::string path = dir.path() + "/pin.lock";
  auto holder = NodeLock::TryAcquire(path);
  ASSERT_TRUE(holder.ok());
  int polls = 0;
  auto waiter = NodeLock::Acquire(path, [&] { return ++polls >= 3; }, 100us);
  ASSERT_FALSE(waiter.ok());
  EXPECT_EQ(waiter.status().code(), Code::kState);
  EXPECT_EQ(polls, 3);
}

TEST(NodeLock, UnopenablePathNamesIt) {
  auto r = NodeLock::TryAcquire("/nonexistent-dir-for-cairn/pin.lock");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIo);
  EXPECT_NE(r.status().message().find("/nonexistent-dir-for-cairn/pin.lock"), std::string::npos);
}

// Four processes take the lock 5 times each and log enter/exit with O_APPEND
// (atomic appends): no two critical sections may overlap.
TEST(NodeLock, ProcessesTakeTurns) {
  test::TempDir dir("node-lock");
  const std::string path = dir.path() + "/pin.lock";
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
TEST(NodeLock, HolderKilledBySigkillLeavesNoStaleLock) {
  test::TempDir dir("node-lock");
  const std::string path = dir.path() + "/pin.lock";
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
  const auto t0 = std::chrono::steady_clock::now();
  auto l = NodeLock::Acquire(path, [&] { return std::chrono::steady_clock::now() - t0 > 5s; });
  EXPECT_TRUE(l.ok()) << l.status().ToString();
}

TEST(NodeLock, DefaultPathIsPerUserAndNodeLocal) {
  const std::string p = DefaultPinLockPath();
  EXPECT_NE(p.find("cairn-pin-" + std::to_string(::getuid()) + ".lock"), std::string::npos);
}

}  // namespace
}  // namespace cairn::os
