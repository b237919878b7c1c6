// Fast initialization of the host cache (host_cache.init, .pin): every
// strategy gives the same data, pinning happens once, over the whole cache,
// after it is fully touched, and a failed pin leaves a working client.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "os/mem/memory.hpp"
#include "os/fs/node_lock.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr uint64_t kPatternSalt = 0xfa57'1417ull;

// Records Pin calls and checks, at the moment of each call, that every page
// of the range is resident (mincore): the proof that pinning came after
// touching. Optionally fails instead of pinning.
class RecordingPinner final : public os::MemoryPinner {
 public:
  explicit RecordingPinner(Status fail_with = Status::Ok()) : fail_with_(std::move(fail_with)) {}
  const char* name() const override { return "recording"; }

  Status Pin(void* p, size_t n) override {
    const size_t page = os::PageSize();
    std::vector<unsigned char> vec((n + page - 1) / page);
    size_t resident = 0;
    if (::mincore(p, n, vec.data()) == 0) {
      for (unsigned char v : vec) resident += v & 1;
    }
    std::lock_guard lock(mu_);
    calls_.push_back({p, n, resident == vec.size()});
    return fail_with_;
  }
  void Unpin(void* p, size_t n) override {
    std::lock_guard lock(mu_);
    unpins_.push_back({p, n, false});
  }

  struct Call {
    void* p;
    size_t n;
    bool all_resident;
  };
  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  size_t unpin_count() const {
    std::lock_guard lock(mu_);
    return unpins_.size();
  }

 private:
  const Status fail_with_;
  mutable std::mutex mu_;
  std::vector<Call> calls_, unpins_;
};

class FastInitFixture : public ScratchDirTest {
 protected:
  FastInitFixture() : ScratchDirTest("fast-init") {}

  // An 8 MiB cache of 256 KiB blocks prepared by `init`, with its own pin
  // lock (tests do not queue behind other processes). With `pinner`: pinning
  // on, through it.
  Config InitConfig(CacheInit init, RecordingPinner* pinner = nullptr) const {
    Config c = MakeConfig(8 * kMiB, 256 * kKiB);
    c.init = init;
    c.pin_lock_path = tmp_.path() + "/pin.lock";
    if (pinner != nullptr) {
      c.pin = true;
      c.pinner = pinner;
    }
    return c;
  }
};

class FastInitTest : public FastInitFixture, public ::testing::WithParamInterface<CacheInit> {};

// Checkpoints and history steps come back byte for byte, whatever the
// strategy, including through eviction (the data is larger than the cache).
TEST_P(FastInitTest, EveryStrategyRestoresTheSameData) {
  RecordingPinner pinner;
  Config c = InitConfig(GetParam(), &pinner);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);

  std::vector<uint8_t> a(3 * kMiB + 123), b(700 * kKiB);
  ASSERT_OK(client->Protect(1, a.data(), a.size()));
  ASSERT_OK(client->Protect(2, b.data(), b.size()));
  for (int64_t v = 0; v < 4; ++v) {
    FillSplitMix(a.data(), a.size(), v, kPatternSalt);
    FillSplitMix(b.data(), b.size(), v + 100, kPatternSalt);
    ASSERT_OK(client->Checkpoint("ck", v));
  }
  auto history = client->OpenHistory("h");
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  constexpr int kSteps = 12;  // 12 x 1 MiB through an 8 MiB cache
  for (int64_t s = 0; s < kSteps; ++s) {
    auto step = SplitMixPattern(kMiB + s, s, kPatternSalt + 1);
    ASSERT_OK((*history)->Push(s, step.data(), step.size()));
  }
  for (int64_t s = kSteps - 1; s >= 0; --s) {
    std::vector<uint8_t> got(kMiB + kSteps);
    auto n = (*history)->Pop(s, got.data(), got.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    got.resize(*n);
    ASSERT_EQ(got, SplitMixPattern(kMiB + s, s, kPatternSalt + 1)) << "step " << s;
  }
  ASSERT_OK((*history)->Close());

  for (int64_t v : {3, 2}) {  // keep_versions = 2
    ASSERT_OK(client->Wait("ck", v, Level::kLocal));
    std::memset(a.data(), 0, a.size());
    std::memset(b.data(), 0, b.size());
    ASSERT_OK(client->Restore("ck", v));
    EXPECT_EQ(a, SplitMixPattern(a.size(), v, kPatternSalt)) << "version " << v;
    EXPECT_EQ(b, SplitMixPattern(b.size(), v + 100, kPatternSalt)) << "version " << v;
  }

  // Every chunk was written by now (the steps covered the cache), so every
  // strategy, lazy included, ends fully touched and pinned.
  ASSERT_TRUE(PollUntil([&] { return client->GetStats().init.pinned_s >= 0; }))
      << "never pinned";
  const Stats st = client->GetStats();
  EXPECT_EQ(st.init.strategy, GetParam());
  EXPECT_GE(st.init.fully_touched_s, 0);
  EXPECT_GE(st.init.pinned_s, st.init.fully_touched_s);
  EXPECT_TRUE(st.init.pin_error.empty()) << st.init.pin_error;
  EXPECT_EQ(st.init.capture_untouched_bytes + st.init.capture_touched_bytes + st.init.capture_pinned_bytes,
            st.capture.bytes);
  const auto calls = pinner.calls();
  ASSERT_EQ(calls.size(), 1u) << "pinned once, never piecewise";
  EXPECT_GE(calls[0].n, st.cache_capacity_bytes) << "the whole cache in one call";
  EXPECT_TRUE(calls[0].all_resident) << "pinned before every page was touched";
  ASSERT_OK(client->Close());
  EXPECT_EQ(pinner.unpin_count(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Strategies, FastInitTest,
                         ::testing::Values(CacheInit::kEager, CacheInit::kMemset, CacheInit::kLazy,
                                           CacheInit::kConcurrent, CacheInit::kSequential,
                                           CacheInit::kAdaptive),
                         [](const auto& param_info) { return std::string(CacheInitName(param_info.param)); });

class FastInitBehaviour : public FastInitFixture {};

TEST_F(FastInitBehaviour, BackgroundStrategiesTouchTheWholeCacheWithoutCaptures) {
  for (CacheInit init : {CacheInit::kMemset, CacheInit::kConcurrent, CacheInit::kSequential,
                         CacheInit::kAdaptive}) {
    SCOPED_TRACE(CacheInitName(init));
    auto client = OpenClient(InitConfig(init));
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(PollUntil([&] { return client->GetStats().init.fully_touched_s >= 0; }));
    const Stats st = client->GetStats();
    EXPECT_EQ(st.init.touched_bytes, st.cache_capacity_bytes) << "the initializer did it all";
    EXPECT_LT(st.init.pinned_s, 0) << "pin is off by default";
  }
}

TEST_F(FastInitBehaviour, LazyTouchesNothingAndEagerEverythingAtOpen) {
  auto lazy = OpenClient(InitConfig(CacheInit::kLazy));
  ASSERT_NE(lazy, nullptr);
  // Not synchronisation: lazy starts nothing to wait for. The pause only
  // gives a wrongly started toucher the chance to show (it cannot make a
  // correct client fail).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Stats st = lazy->GetStats();
  EXPECT_EQ(st.init.touched_bytes, 0u);
  EXPECT_LT(st.init.fully_touched_s, 0);
  std::vector<uint8_t> a(kMiB, 7);
  ASSERT_OK(lazy->Protect(0, a.data(), a.size()));
  ASSERT_OK(lazy->Checkpoint("x", 0));
  st = lazy->GetStats();
  EXPECT_EQ(st.init.capture_untouched_bytes, a.size()) << "lazy captures into fresh memory";

  auto eager = OpenClient(InitConfig(CacheInit::kEager));
  ASSERT_NE(eager, nullptr);
  st = eager->GetStats();
  EXPECT_GE(st.init.fully_touched_s, 0) << "populated at open";
  EXPECT_EQ(st.init.touched_bytes, 0u) << "no background touching";
  ASSERT_OK(eager->Protect(0, a.data(), a.size()));
  ASSERT_OK(eager->Checkpoint("x", 0));
  EXPECT_EQ(eager->GetStats().init.capture_touched_bytes, a.size());
}

TEST_F(FastInitBehaviour, CapturesAfterPinningLandInPinnedMemory) {
  RecordingPinner pinner;
  Config c = InitConfig(CacheInit::kEager, &pinner);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  EXPECT_GE(client->GetStats().init.pinned_s, 0) << "eager pins at open";
  std::vector<uint8_t> a(kMiB, 1);
  ASSERT_OK(client->Protect(0, a.data(), a.size()));
  ASSERT_OK(client->Checkpoint("x", 0));
  EXPECT_EQ(client->GetStats().init.capture_pinned_bytes, a.size());
}

// A pin failure (RLIMIT_MEMLOCK, a driver error) is reported once, in the
// stats, and the client keeps checkpointing into unpinned memory.
TEST_F(FastInitBehaviour, PinFailureFallsBackToUnpinned) {
  for (CacheInit init : {CacheInit::kEager, CacheInit::kConcurrent}) {
    SCOPED_TRACE(CacheInitName(init));
    RecordingPinner pinner(Status::NoMemory("mlock of 8 MiB failed: RLIMIT_MEMLOCK is 64 KiB"));
    Config c = InitConfig(init, &pinner);
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(PollUntil([&] { return !client->GetStats().init.pin_error.empty(); }));
    std::vector<uint8_t> a(2 * kMiB);
    FillSplitMix(a.data(), a.size(), 1, kPatternSalt);
    ASSERT_OK(client->Protect(0, a.data(), a.size()));
    ASSERT_OK(client->Checkpoint("x", 0));
    ASSERT_OK(client->Wait("x", 0, Level::kLocal));
    std::memset(a.data(), 0, a.size());
    ASSERT_OK(client->Restore("x", 0));
    EXPECT_EQ(a, SplitMixPattern(a.size(), 1, kPatternSalt));
    const Stats st = client->GetStats();
    EXPECT_LT(st.init.pinned_s, 0);
    EXPECT_NE(st.init.pin_error.find("RLIMIT_MEMLOCK"), std::string::npos) << st.init.pin_error;
    EXPECT_EQ(st.init.capture_pinned_bytes, 0u);
    EXPECT_EQ(pinner.calls().size(), 1u) << "tried once, not again and again";
    ASSERT_OK(client->Close());
    EXPECT_EQ(pinner.unpin_count(), 0u) << "nothing to unpin";
  }
}

// Entries in the node lock's queue (os/fs/node_lock.hpp): the holder's, then
// one per waiter.
size_t QueuedOnNodeLock(const std::string& lock_path) {
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it(os::NodeLockQueueDir(lock_path), ec), end;
       !ec && it != end; it.increment(ec)) {
    ++n;
  }
  return n;
}

// With pin_serialize, a client waits for the node lock held by another
// process (here: another descriptor) and pins as soon as it is released.
// Gated, not timed: the lock is released once the client's initializer is
// queued behind the holder, and its wait covers at least the time from then
// to the release.
TEST_F(FastInitBehaviour, PinWaitsForTheNodeLock) {
  RecordingPinner pinner;
  Config c = InitConfig(CacheInit::kConcurrent, &pinner);
  auto holder = os::NodeLock::TryAcquire(c.pin_lock_path);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(PollUntil([&] { return client->GetStats().init.fully_touched_s >= 0; }));
  ASSERT_TRUE(PollUntil([&] { return QueuedOnNodeLock(c.pin_lock_path) == 2; }))
      << "the initializer did not queue for the node lock";
  const auto queued = std::chrono::steady_clock::now();
  EXPECT_TRUE(pinner.calls().empty()) << "pinned while another process held the node lock";
  const auto released = std::chrono::steady_clock::now();
  holder->Release();
  ASSERT_TRUE(PollUntil([&] { return client->GetStats().init.pinned_s >= 0; }));
  EXPECT_GE(client->GetStats().init.pin_wait_s,
            std::chrono::duration<double>(released - queued).count());
  EXPECT_GT(client->GetStats().init.pin_wait_s, 0);
  EXPECT_EQ(pinner.calls().size(), 1u);
}

// Close does not hang while the initializer waits for the node lock.
TEST_F(FastInitBehaviour, CloseDoesNotWaitForTheNodeLock) {
  RecordingPinner pinner;
  Config c = InitConfig(CacheInit::kConcurrent, &pinner);
  auto holder = os::NodeLock::TryAcquire(c.pin_lock_path);
  ASSERT_TRUE(holder.ok());
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(PollUntil([&] { return client->GetStats().init.fully_touched_s >= 0; }));
  ASSERT_OK(client->Close());
  EXPECT_TRUE(pinner.calls().empty());
  EXPECT_TRUE(client->GetStats().init.pin_error.empty()) << "giving up at close is no failure";
}

}  // namespace
}  // namespace cairn
