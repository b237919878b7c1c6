#include "engine/worker.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "os/fs/fs.hpp"
#include "testing/test_util.hpp"

namespace cairn::core {
namespace {

// The owner's side: a mutex, a "progress" condition and what the jobs did.
struct Owner {
  Mutex mu;
  std::condition_variable_any done;
  std::vector<int> ran CAIRN_GUARDED_BY(mu);
  bool release CAIRN_GUARDED_BY(mu) = false;  // a gate the jobs may wait on
  bool started CAIRN_GUARDED_BY(mu) = false;
  int next CAIRN_GUARDED_BY(mu) = 0;  // a polling stage's source
  int limit CAIRN_GUARDED_BY(mu) = 0;
};

// Stages made of a test's lambdas (the library's stages are classes). The
// Worker calls RunJob and TakeJob with o.mu held; each lambda asserts it, as
// the library's stages do.
template <typename Run>
struct QueueStage {  // no TakeJob: the Worker takes the queue's front
  void RunJob(int& j) { run(j); }
  Run run;
};
template <typename Run>
QueueStage<Run> Queue(Run run) {
  return {std::move(run)};
}
template <typename Take, typename Run>
struct PollingStage {
  std::optional<int> TakeJob(Worker<int, PollingStage>&) { return take(); }
  void RunJob(int& j) { run(j); }
  Take take;
  Run run;
};
template <typename Take, typename Run>
PollingStage<Take, Run> Polling(Take take, Run run) {
  return {std::move(take), std::move(run)};
}

TEST(WorkerTest, RunsQueuedJobsInOrderAndGoesIdle) {
  Owner o;
  auto stage = Queue([&o](int& j) {
    o.mu.AssertHeld(); o.ran.push_back(j); });
  Worker<int, decltype(stage)> w(&o.mu, &o.done, &stage);
  w.Start(nullptr);
  MutexLock l(&o.mu);
  for (int j = 1; j <= 5; ++j) w.Push(j);
  o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return w.Idle(); });
  EXPECT_EQ(o.ran, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(WorkerTest, JobInHandIsVisibleWhileItRunsWithTheLockDropped) {
  Owner o;
  auto stage = Queue([&o](int& j) {
    o.mu.AssertHeld();
    o.started = true;
    o.done.notify_all();
    {
      MutexUnlock unlocked(&o.mu);  // as a stage does for I/O
    }
    o.done.wait(o.mu, [&]() CAIRN_REQUIRES(o.mu) { return o.release; });
    o.ran.push_back(j);
  });
  Worker<int, decltype(stage)> w(&o.mu, &o.done, &stage);
  w.Start(nullptr);
  MutexLock l(&o.mu);
  w.Push(7);
  o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return o.started; });
  ASSERT_TRUE(w.in_hand().has_value());
  EXPECT_EQ(*w.in_hand(), 7);
  EXPECT_FALSE(w.Idle());
  EXPECT_TRUE(w.queue().empty());
  o.release = true;
  o.done.notify_all();
  o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return w.Idle(); });
  EXPECT_EQ(o.ran, std::vector<int>{7});
  EXPECT_FALSE(w.in_hand().has_value());
}

TEST(WorkerTest, TakeFindsWorkWithoutAQueue) {
  // A polling stage (the prefetcher): TakeJob looks at the owner's state.
  Owner o;
  auto stage = Polling(
      [&o]() -> std::optional<int> {
        o.mu.AssertHeld();
        if (o.next >= o.limit) return std::nullopt;
        return o.next++;
      },
      [&o](int& j) {
        o.mu.AssertHeld();
        o.ran.push_back(j);
      });
  Worker<int, decltype(stage)> w(&o.mu, &o.done, &stage);
  w.Start(nullptr);
  MutexLock l(&o.mu);
  o.limit = 3;
  w.Wake();  // the state TakeJob reads changed
  o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return o.ran.size() == 3; });
  EXPECT_EQ(o.ran, (std::vector<int>{0, 1, 2}));
}

TEST(WorkerTest, StopRunsWhatIsQueuedThenJoins) {
  Owner o;
  auto stage = Queue([&o](int& j) {
    o.mu.AssertHeld();
    o.done.wait(o.mu, [&]() CAIRN_REQUIRES(o.mu) { return o.release; });
    o.ran.push_back(j);
  });
  Worker<int, decltype(stage)> w(&o.mu, &o.done, &stage);
  w.Start(nullptr);
  {
    MutexLock l(&o.mu);
    for (int j = 0; j < 4; ++j) w.Push(j);
  }
  w.RequestStop();
  {
    MutexLock l(&o.mu);
    o.release = true;
    o.done.notify_all();
  }
  w.Stop();  // joins
  MutexLock l(&o.mu);
  EXPECT_EQ(o.ran, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(w.Idle());
}

// The `tid` of the trace event that starts with `head`, or -1.
int TidOf(const std::string& trace, const std::string& head) {
  const size_t at = trace.find(head);
  if (at == std::string::npos) return -1;
  const size_t tid = trace.find("\"tid\":", at);
  return tid == std::string::npos ? -1 : std::stoi(trace.substr(tid + 6));
}

TEST(WorkerTest, StartNamesTheWorkerThreadInTheTrace) {
  Owner o;
  test::TempDir dir("worker-trace");
  const std::string path = dir.path() + "/t.json";
  Tracer tracer(path, os::FileSystem::Default());
  auto stage = Queue([&](int&) { tracer.Instant("job", "test", 0); });
  Worker<int, decltype(stage)> w(&o.mu, &o.done, &stage);
  w.Start("the worker", &tracer);
  {
    MutexLock l(&o.mu);
    w.Push(1);
    o.done.wait(l, [&]() CAIRN_REQUIRES(o.mu) { return w.Idle(); });
  }
  w.Stop();
  tracer.Instant("main", "test", 0);
  ASSERT_TRUE(tracer.Write().ok());
  std::ifstream in(path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int named = TidOf(trace, "{\"ph\":\"M\",\"name\":\"thread_name\"");
  ASSERT_GE(named, 0) << trace;
  EXPECT_NE(trace.find("\"args\":{\"name\":\"the worker\"}"), std::string::npos) << trace;
  EXPECT_EQ(TidOf(trace, "{\"ph\":\"i\",\"name\":\"job\""), named) << trace;  // the job's thread
  EXPECT_NE(TidOf(trace, "{\"ph\":\"i\",\"name\":\"main\""), named) << trace;
}

TEST(WorkerTest, StopWithoutStartIsHarmless) {
  Owner o;
  auto stage = Queue([](int&) {});
  Worker<int, decltype(stage)> w(&o.mu, &o.done, &stage);
  w.Stop();
  MutexLock l(&o.mu);
  EXPECT_TRUE(w.Idle());
}

}  // namespace
}  // namespace cairn::core
