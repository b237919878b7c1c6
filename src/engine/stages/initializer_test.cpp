// The Initializer driven without a pipeline: a fake owner keeps the host cache
// it maps, a fake pinner records the pin calls, and a gate stands in for the
// touching of a slice where a test needs to act while a chunk is being
// touched. Every wait is on a condition (a 60 s guard turns a hang into a
// failure); nothing sleeps.
#include "engine/stages/initializer.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "util/log.hpp"

namespace cairn::core {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB;
constexpr auto kGuard = std::chrono::seconds(60);

// The owner's side: its mutex, its progress condition, the cache it adopts.
struct FakeOwner final : Initializer::Owner {
  Tracer tracer{"", nullptr};  // off
  Mutex mu;
  std::condition_variable_any progress;
  uint64_t evictions = 0, holds_released = 0;
  MemoryMovers movers;  // who moves memory (the tests start and end movers by hand)
  // Where the initializer puts the cache it maps.
  BlockStore store CAIRN_GUARDED_BY(mu){
      {.evictions = &evictions, .holds_released = &holds_released}, &tracer, &progress};
  // The store's cache (precondition: adopted).
  HostCache* cache() CAIRN_REQUIRES(mu) { return store.has_cache() ? &store.cache() : nullptr; }
  int touched CAIRN_GUARDED_BY(mu) = 0;  // chunks handed back by the toucher

  // touch: what touches a slice instead of the initializer (a gate), if set.
  Initializer::Owner* Interface(std::function<void(uint8_t*, uint32_t)> touch = nullptr) {
    touch_slice = std::move(touch);
    return this;
  }
  void Touched() override CAIRN_REQUIRES(mu) { ++touched; }
  bool TouchSlice(uint8_t* p, uint32_t n) override {
    if (!touch_slice) return false;
    touch_slice(p, n);
    return true;
  }
  std::function<void(uint8_t*, uint32_t)> touch_slice;

  // The cache, for Initializer::Unpin (which takes mu itself).
  const HostCache& Cache() {
    MutexLock l(&mu);
    return store.cache();
  }

  // Waits (on `progress`) until pred holds; false after the guard.
  template <typename Pred>
  bool WaitUntil(Pred pred) {
    MutexLock l(&mu);
    return progress.wait_for(l, kGuard, [&]() CAIRN_REQUIRES(mu) { return pred(); });
  }
};

// Records the pin calls and whether the cache was fully touched at each;
// optionally fails them.
class FakePinner final : public os::MemoryPinner {
 public:
  FakePinner(FakeOwner* owner, Status fail_with = Status::Ok())
      : owner_(owner), fail_with_(fail_with) {}
  const char* name() const override { return "fake"; }
  Status Pin(void* p, size_t n) override {
    bool touched = false;
    {
      MutexLock l(&owner_->mu);  // called with the owner's mutex dropped
      const HostCache* c = owner_->cache();
      touched = c && c->fully_touched() && c->base() == p && c->mapped_bytes() == n;
    }
    std::lock_guard l(mu_);
    ++pins_;
    all_touched_ = all_touched_ && touched;
    return fail_with_;
  }
  void Unpin(void*, size_t) override {
    std::lock_guard l(mu_);
    ++unpins_;
  }
  int pins() const {
    std::lock_guard l(mu_);
    return pins_;
  }
  int unpins() const {
    std::lock_guard l(mu_);
    return unpins_;
  }
  bool all_touched() const {
    std::lock_guard l(mu_);
    return all_touched_;
  }

 private:
  FakeOwner* const owner_;
  const Status fail_with_;
  mutable std::mutex mu_;
  int pins_ = 0, unpins_ = 0;
  bool all_touched_ = true;
};

// Stands in for touching a slice: counts the calls (and those made while the
// test says a capture runs), and holds the first one until Open().
class SliceGate {
 public:
  void Touch(uint8_t*, uint32_t) {
    std::unique_lock l(mu_);
    ++calls_;
    if (capturing_) ++while_capturing_;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
  }
  bool WaitForCalls(int n) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, kGuard, [&] { return calls_ >= n; });
  }
  void Open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void SetCapturing(bool on) {
    std::lock_guard l(mu_);
    capturing_ = on;
  }
  int calls() {
    std::lock_guard l(mu_);
    return calls_;
  }
  int while_capturing() {
    std::lock_guard l(mu_);
    return while_capturing_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0, while_capturing_ = 0;
  bool open_ = false, capturing_ = false;
};

Config InitConfig(CacheInit init, uint64_t chunk, uint32_t chunks,
                  os::MemoryPinner* pinner = nullptr) {
  Config c;
  c.host_cache_bytes = chunk * chunks;
  c.block_bytes = chunk;
  c.init = init;
  c.huge_pages = false;
  c.pin = pinner != nullptr;
  c.pinner = pinner;
  c.pin_serialize = false;  // fast_init_test covers the node lock
  return c;
}

TEST(InitializerTest, TouchesEveryChunkThenPinsOnce) {
  FakeOwner o;
  FakePinner pinner(&o);
  Initializer init(&o.mu, &o.progress, &o.tracer,
                   InitConfig(CacheInit::kConcurrent, 256 * kKiB, 8, &pinner), &o.store, &o.movers,
                   o.Interface());
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(o.WaitUntil([&] { return init.stats().pinned_s >= 0; })) << "never pinned";
  init.Stop();
  EXPECT_EQ(pinner.pins(), 1) << "pinned once, never piecewise";
  EXPECT_TRUE(pinner.all_touched())
      << "pinned before every chunk was touched, or not the whole cache";
  {
    MutexLock l(&o.mu);
    const InitStats& st = init.stats();
    EXPECT_EQ(st.strategy, CacheInit::kConcurrent);
    EXPECT_GE(st.fully_touched_s, 0);
    EXPECT_GE(st.pinned_s, st.fully_touched_s);
    EXPECT_EQ(st.touched_bytes, o.cache()->capacity_bytes()) << "the initializer did it all";
    EXPECT_EQ(st.touch_slices, 8u);  // a 256 KiB chunk is one slice
    EXPECT_TRUE(st.pin_error.empty()) << st.pin_error;
    EXPECT_EQ(o.touched, 8);
    EXPECT_FALSE(o.store.host_registered());  // pinned, not registered with a GPU driver
    init.NoteCaptureChunk(/*was_touched=*/true, 100);
    EXPECT_EQ(init.stats().capture_pinned_bytes, 100u);
  }
  init.Unpin(o.Cache());
  init.Unpin(o.Cache());  // once only
  EXPECT_EQ(pinner.unpins(), 1);
}

// host_cache.grow: GrowFor adds chunks (a version's blocks and one more) and
// the thread, idle once the cache was touched, touches the new ones too.
TEST(InitializerTest, GrowForAddsChunksThatTheThreadTouches) {
  FakeOwner o;
  Initializer init(&o.mu, &o.progress, &o.tracer, InitConfig(CacheInit::kConcurrent, 256 * kKiB, 8),
                   &o.store, &o.movers, o.Interface());
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(o.WaitUntil([&] {
    o.mu.AssertHeld();  // WaitUntil holds it
    return o.touched == 8;
  }));
  {
    MutexLock l(&o.mu);
    EXPECT_EQ(init.GrowFor(7 * 256 * kKiB - 1), 0u) << "8 chunks hold 7 blocks and one more";
    EXPECT_EQ(init.GrowFor(4 * kMiB), 17u - 8u);
    EXPECT_EQ(o.cache()->capacity_bytes(), 17 * 256 * kKiB);
  }
  ASSERT_TRUE(o.WaitUntil([&] {
    o.mu.AssertHeld();
    return o.touched == 17;
  })) << "new chunks not touched";
  init.Stop();
  MutexLock l(&o.mu);
  EXPECT_TRUE(o.cache()->fully_touched());
  EXPECT_GE(init.stats().fully_touched_s, 0);
  EXPECT_EQ(init.stats().touched_bytes, 17 * 256 * kKiB);
}

TEST(InitializerTest, GrowForLeavesAPinnedOrUngrowableCacheAlone) {
  for (const bool pin : {true, false}) {
    FakeOwner o;
    FakePinner pinner(&o);
    Config c = InitConfig(CacheInit::kConcurrent, 256 * kKiB, 8, pin ? &pinner : nullptr);
    c.host_cache_grow = pin;  // pinned with growth on; unpinned with it off
    Initializer init(&o.mu, &o.progress, &o.tracer, c, &o.store, &o.movers, o.Interface());
    ASSERT_TRUE(init.Prepare().ok());
    MutexLock l(&o.mu);
    EXPECT_EQ(init.GrowFor(64 * kMiB), 0u) << (pin ? "pinned" : "growth off");
    EXPECT_EQ(o.cache()->chunk_count(), 8u);
  }
}

// The fixed sequential strategy stops at the end of the slice during which a
// capture started, touches nothing while it runs, and resumes where it
// stopped once it ended.
TEST(InitializerTest, SequentialTouchingPausesWhileACaptureRunsAndResumes) {
  FakeOwner o;
  SliceGate gate;
  Initializer init(&o.mu, &o.progress, &o.tracer, InitConfig(CacheInit::kSequential, 4 * kMiB, 3),
                   &o.store, &o.movers,
                   o.Interface([&](uint8_t* p, uint32_t n) { gate.Touch(p, n); }));
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(gate.WaitForCalls(1));  // inside the first 2 MiB slice of chunk 0
  double interval_s = 0;
  {
    MutexLock l(&o.mu);  // dropped by the toucher while it touches
    interval_s = init.CaptureStarted(std::chrono::steady_clock::now());
  }
  EXPECT_LT(interval_s, 0) << "the first capture has no interval before it";
  gate.SetCapturing(true);
  gate.Open();
  ASSERT_TRUE(o.WaitUntil([&] {
    o.mu.AssertHeld();  // WaitUntil holds it
    return o.touched >= 1;
  }));
  {
    MutexLock l(&o.mu);
    EXPECT_EQ(init.stats().touch_slices, 1u) << "did not yield at the end of the slice";
    EXPECT_EQ(init.stats().touched_bytes, 2 * kMiB);
    EXPECT_EQ(o.cache()->touch_progress(0), 2 * kMiB);
    EXPECT_FALSE(o.cache()->fully_touched());
    EXPECT_FALSE(init.TouchingAllowed());
  }
  gate.SetCapturing(false);
  {
    MutexLock l(&o.mu);
    init.CaptureEnded(kMiB, 0.001, interval_s);
  }
  ASSERT_TRUE(o.WaitUntil([&] { return init.stats().fully_touched_s >= 0; }));
  init.Stop();
  EXPECT_EQ(gate.while_capturing(), 0) << "touched while a capture ran";
  MutexLock l(&o.mu);
  EXPECT_EQ(init.stats().touch_slices, 6u) << "chunk 0 resumed at 2 MiB, then 2 x 2 chunks";
  EXPECT_EQ(init.stats().touched_bytes, o.cache()->capacity_bytes());
  EXPECT_GE(init.CaptureStarted(std::chrono::steady_clock::now()), 0)
      << "an interval since the last end";
}

// A restore from files (the application waits on it, reading into its own
// memory) pauses touching under the adaptive strategy too, whose model
// starts out concurrent and would not yield to a capture; touching resumes
// where it stopped when the read ends.
TEST(InitializerTest, AdaptiveTouchingPausesWhileARestoreReadsFromFiles) {
  FakeOwner o;
  SliceGate gate;
  Initializer init(&o.mu, &o.progress, &o.tracer, InitConfig(CacheInit::kAdaptive, 4 * kMiB, 3),
                   &o.store, &o.movers,
                   o.Interface([&](uint8_t* p, uint32_t n) { gate.Touch(p, n); }));
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(gate.WaitForCalls(1));  // inside the first 2 MiB slice of chunk 0
  o.movers.Add(MemoryMovers::Kind::kRestore, +1);
  gate.SetCapturing(true);  // "a mover runs": here the restore
  gate.Open();
  ASSERT_TRUE(o.WaitUntil([&] {
    o.mu.AssertHeld();  // WaitUntil holds it
    return o.touched >= 1;
  }));
  {
    MutexLock l(&o.mu);
    EXPECT_EQ(init.stats().touch_slices, 1u)
        << "did not yield to the restore at the end of the slice";
    EXPECT_EQ(o.cache()->touch_progress(0), 2 * kMiB);
  }
  gate.SetCapturing(false);
  o.movers.Add(MemoryMovers::Kind::kRestore, -1);
  ASSERT_TRUE(o.WaitUntil([&] { return init.stats().fully_touched_s >= 0; }));
  init.Stop();
  EXPECT_EQ(gate.while_capturing(), 0) << "touched while the restore read";
  MutexLock l(&o.mu);
  EXPECT_EQ(init.stats().touch_slices, 6u) << "chunk 0 resumed at 2 MiB, then 2 x 2 chunks";
}

// The fixed concurrent strategy is the user's choice to touch alongside
// everything: a restore does not pause it.
TEST(InitializerTest, ConcurrentTouchingGoesOnDuringARestore) {
  FakeOwner o;
  SliceGate gate;
  Initializer init(&o.mu, &o.progress, &o.tracer, InitConfig(CacheInit::kConcurrent, 4 * kMiB, 2),
                   &o.store, &o.movers,
                   o.Interface([&](uint8_t* p, uint32_t n) { gate.Touch(p, n); }));
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(gate.WaitForCalls(1));
  o.movers.Add(MemoryMovers::Kind::kRestore, +1);
  gate.SetCapturing(true);
  gate.Open();
  ASSERT_TRUE(o.WaitUntil([&] { return init.stats().fully_touched_s >= 0; }))
      << "paused for the restore";
  o.movers.Add(MemoryMovers::Kind::kRestore, -1);
  init.Stop();
  EXPECT_EQ(gate.while_capturing(), 3) << "the 3 slices after the first run during the restore";
}

// A failed pin is reported once, in the stats, not retried, and not undone.
TEST(InitializerTest, PinFailureIsReportedOnceAndNotRetried) {
  std::vector<std::pair<LogLevel, std::string>> logged;
  Mutex log_mu;
  util::SetLog([&](LogLevel level, std::string_view m) {
    MutexLock l(&log_mu);
    logged.emplace_back(level, std::string(m));
  });
  struct DefaultLogAtExit {
    ~DefaultLogAtExit() { util::SetLog(nullptr); }
  } restore_log;  // also when an assertion below ends the test
  FakeOwner o;
  FakePinner pinner(&o, Status::NoMemory("RLIMIT_MEMLOCK is 64 KiB"));
  Initializer init(&o.mu, &o.progress, &o.tracer,
                   InitConfig(CacheInit::kMemset, 256 * kKiB, 4, &pinner), &o.store, &o.movers,
                   o.Interface());
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(o.WaitUntil([&] { return !init.stats().pin_error.empty(); }));
  {
    MutexLock l(&o.mu);
    EXPECT_NE(init.stats().pin_error.find("RLIMIT_MEMLOCK"), std::string::npos)
        << init.stats().pin_error;
    EXPECT_LT(init.stats().pinned_s, 0);
    init.NoteCaptureChunk(/*was_touched=*/true, 100);
    EXPECT_EQ(init.stats().capture_pinned_bytes, 0u);
    EXPECT_EQ(init.stats().capture_touched_bytes, 100u);
  }
  init.Stop();
  EXPECT_EQ(pinner.pins(), 1) << "tried once, not again";
  init.Unpin(o.Cache());
  EXPECT_EQ(pinner.unpins(), 0) << "nothing to unpin";
  MutexLock l(&log_mu);
  ASSERT_EQ(logged.size(), 1u) << "said once, through the log function";
  EXPECT_EQ(logged[0].first, LogLevel::kWarn);
  EXPECT_NE(logged[0].second.find("host cache left unpinned"), std::string::npos)
      << logged[0].second;
  EXPECT_NE(logged[0].second.find("RLIMIT_MEMLOCK"), std::string::npos) << logged[0].second;
}

// Eager: the application waits for Prepare, which populates and pins; the
// thread has nothing left to do.
TEST(InitializerTest, EagerPopulatesAndPinsInPrepare) {
  FakeOwner o;
  FakePinner pinner(&o);
  Initializer init(&o.mu, &o.progress, &o.tracer,
                   InitConfig(CacheInit::kEager, 256 * kKiB, 4, &pinner), &o.store, &o.movers,
                   o.Interface());
  ASSERT_TRUE(init.Prepare().ok());
  EXPECT_EQ(pinner.pins(), 1) << "pinned before Prepare returned";
  EXPECT_TRUE(pinner.all_touched());
  {
    MutexLock l(&o.mu);
    EXPECT_TRUE(o.cache()->fully_touched());
    EXPECT_GE(init.stats().fully_touched_s, 0);
    EXPECT_GE(init.stats().pinned_s, 0);
    EXPECT_GT(init.stats().open_s, 0);
    init.NoteCaptureChunk(/*was_touched=*/true, 100);
    EXPECT_EQ(init.stats().capture_pinned_bytes, 100u);
  }
  init.Start(nullptr);
  init.Stop();
  MutexLock l(&o.mu);
  EXPECT_EQ(init.stats().touched_bytes, 0u) << "no background touching";
  EXPECT_EQ(o.touched, 0);
  EXPECT_EQ(pinner.pins(), 1);
}

// Stop while a chunk is being touched: the thread ends at the end of the
// slice, leaves the chunk partly touched and does not pin.
TEST(InitializerTest, StopDuringTouchingEndsAtTheSliceAndDoesNotPin) {
  FakeOwner o;
  FakePinner pinner(&o);
  SliceGate gate;
  Initializer init(&o.mu, &o.progress, &o.tracer,
                   InitConfig(CacheInit::kConcurrent, 4 * kMiB, 2, &pinner), &o.store, &o.movers,
                   o.Interface([&](uint8_t* p, uint32_t n) { gate.Touch(p, n); }));
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  ASSERT_TRUE(gate.WaitForCalls(1));
  init.RequestStop();
  gate.Open();
  init.Stop();  // joins
  EXPECT_EQ(gate.calls(), 1);
  EXPECT_EQ(pinner.pins(), 0);
  MutexLock l(&o.mu);
  EXPECT_EQ(o.cache()->touch_progress(0), 2 * kMiB) << "the touched slice is kept";
  EXPECT_LT(init.stats().fully_touched_s, 0);
  EXPECT_TRUE(init.stats().pin_error.empty()) << "stopping is no failure";
}

// Lazy touches nothing ahead of the writers; once every chunk was written
// (here: its first page), it finishes the chunks and pins.
TEST(InitializerTest, LazyFinishesWrittenChunksThenPins) {
  FakeOwner o;
  FakePinner pinner(&o);
  Initializer init(&o.mu, &o.progress, &o.tracer,
                   InitConfig(CacheInit::kLazy, 256 * kKiB, 4, &pinner), &o.store, &o.movers,
                   o.Interface());
  ASSERT_TRUE(init.Prepare().ok());
  init.Start(nullptr);
  const uint32_t page = static_cast<uint32_t>(os::PageSize());
  {
    MutexLock l(&o.mu);
    std::vector<uint32_t> taken;
    while (auto c = o.cache()->Allocate(nullptr, page)) taken.push_back(*c);
    ASSERT_EQ(taken.size(), 4u);
    init.NoteTouchProgress();
    for (uint32_t c : taken) o.cache()->Free(c);
  }
  o.movers.Add(MemoryMovers::Kind::kCapture, +1);  // a capture ends: the thread looks again
  o.movers.Add(MemoryMovers::Kind::kCapture, -1);
  ASSERT_TRUE(o.WaitUntil([&] { return init.stats().pinned_s >= 0; }));
  init.Stop();
  EXPECT_EQ(pinner.pins(), 1);
  EXPECT_TRUE(pinner.all_touched());
  MutexLock l(&o.mu);
  EXPECT_EQ(init.stats().touched_bytes, 4 * (256 * kKiB - page)) << "only what the writers left";
}

}  // namespace
}  // namespace cairn::core
