// Many application threads using one client at once: checkpoints of several
// names, a history pushed and popped, stats readers. Run under TSan in CI; here
// it checks that every version and step comes back exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

class ConcurrencyTest : public test::ScratchDirTest {
 protected:
  ConcurrencyTest() : ScratchDirTest("concurrency") {}
};

TEST_F(ConcurrencyTest, CheckpointsHistoryAndStatsFromManyThreads) {
  // A small cache: back-pressure and eviction happen.
  Config c = MakeConfig(/*cache=*/2 << 20, /*block=*/64 << 10);
  c.keep_versions = 3;
  auto client = Client::Open(c);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Client& cl = **client;

  // Checkpoint() snapshots every protected region, so a writer changes its
  // region and checkpoints under one application mutex (as an application
  // would: it does not write memory while asking Cairn to copy it). Waits,
  // Latest, the history and the stats readers run concurrently with that.
  constexpr int kWriters = 3;
  constexpr int kVersions = 6;
  std::atomic<int> failures{0};
  std::vector<std::vector<uint8_t>> regions(kWriters);
  for (int t = 0; t < kWriters; ++t) {
    regions[t].resize(300 * 1024 + t * 1000);
    ASSERT_TRUE(cl.Protect(t, regions[t].data(), regions[t].size()).ok());
  }
  std::mutex app_mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      const std::string name = "w" + std::to_string(t);
      for (int v = 0; v < kVersions; ++v) {
        std::lock_guard lock(app_mu);
        auto p = Pattern(regions[t].size(), t * 1000 + v);
        std::copy(p.begin(), p.end(), regions[t].begin());
        if (!cl.Checkpoint(name, v).ok()) ++failures;
      }
      if (!cl.Wait(name, kVersions - 1, Level::kLocal).ok()) ++failures;
      if (!cl.Latest(name).ok()) ++failures;
    });
  }
  threads.emplace_back([&] {
    auto h = cl.OpenHistory("adj");
    if (!h.ok()) {
      ++failures;
      return;
    }
    constexpr int kSteps = 24;
    for (int s = 0; s < kSteps; ++s) {
      auto d = Pattern(50 * 1024 + s * 333, 5000 + s);
      if (!(*h)->Push(s, d.data(), d.size()).ok()) ++failures;
    }
    for (int s = kSteps - 1; s >= 0; --s) {
      auto want = Pattern(50 * 1024 + s * 333, 5000 + s);
      std::vector<uint8_t> got(want.size());
      auto n = (*h)->Pop(s, got.data(), got.size());
      if (!n.ok() || *n != want.size() || got != want) ++failures;
    }
  });
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      Stats s = cl.GetStats();
      if (s.cache_used_bytes > s.cache_capacity_bytes) ++failures;
      std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);

  // Each writer's newest version holds that writer's last pattern in its region.
  for (int t = 0; t < kWriters; ++t) {
    auto latest = cl.Latest("w" + std::to_string(t));
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    EXPECT_EQ(*latest, kVersions - 1);
  }
  for (auto& r : regions) std::fill(r.begin(), r.end(), 0);
  ASSERT_TRUE(cl.Restore("w1", kVersions - 1).ok());
  EXPECT_EQ(regions[1], Pattern(regions[1].size(), 1000 + kVersions - 1));
  Stats s = cl.GetStats();
  EXPECT_EQ(s.failed_flushes, 0u);
  ASSERT_TRUE(cl.Close().ok());
  EXPECT_EQ(cl.GetStats().cache_dirty_bytes, 0u);
}

}  // namespace
}  // namespace cairn
