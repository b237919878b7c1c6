#include "core/zero_copy.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "os/memory.hpp"
#include "os/page_tracker.hpp"
#include "os/write_protect.hpp"

namespace cairn::core {
namespace {

const size_t kPage = os::PageSize();

// The application's writes: relaxed atomic stores (they race with the
// library's reads by design; the kernel's protection orders them, which TSan
// cannot see, so both sides are atomic for it).
void Store(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED); }
uint64_t Load(const uint8_t* p) { return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED); }

// Pages write-protected by a userfaultfd now (/proc/self/pagemap).
uint64_t ProtectedPages(const void* p, size_t n) {
  auto r = os::CountUffdProtectedPages(p, n);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ~uint64_t{0};
}

// Spins (yielding) until cond() holds: waits for an event, never for a time.
template <typename F>
void Until(F cond) {
  while (!cond()) std::this_thread::yield();
}

class ZeroCopyTest : public ::testing::Test {
 protected:
  void Make(double cow) {
    auto z = ZeroCopy::Create(cow);
    if (!z.ok()) GTEST_SKIP() << "userfaultfd write-protection unavailable: " << z.status().ToString();
    zc_ = std::move(z).value();
  }
  uint8_t* Map(size_t pages, bool populate = true) {
    void* p = ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    maps_.emplace_back(p, pages * kPage);
    auto* b = static_cast<uint8_t*>(p);
    // Half the pages populated with a pattern, the rest never touched.
    if (populate) {
      for (size_t i = 0; i < pages; i += 2) {
        for (size_t w = 0; w < kPage; w += 8) Store(b + i * kPage + w, (i << 20) | w | 1);
      }
    }
    return b;
  }
  void TearDown() override {
    zc_.reset();
    for (auto [p, n] : maps_) ::munmap(p, n);
  }
  std::unique_ptr<ZeroCopy> zc_;
  std::vector<std::pair<void*, size_t>> maps_;
};

// Writers hammer random pages while the reader reads everything in blocks:
// what is read equals memory at Begin, for COW buffers from none (every
// early write waits: RED) to ample (ORANGE). Each write stores a value never
// stored before, so a write that reached a page before its read would show.
class ZeroCopyCowTest : public ZeroCopyTest, public ::testing::WithParamInterface<double> {};

TEST_P(ZeroCopyCowTest, ConcurrentWritersNeverReachAVersion) {
  Make(GetParam());
  if (!zc_) return;
  const size_t n = 512;
  uint8_t* p = Map(n);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<uint8_t> at_begin(n * kPage);
    for (size_t o = 0; o < n * kPage; o += 8) {
      const uint64_t v = Load(p + o);
      std::memcpy(at_begin.data() + o, &v, 8);
    }
    ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, n * kPage, {}}}).ok());
    constexpr int kThreads = 3;
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        std::mt19937_64 rng(static_cast<uint64_t>(epoch * 100 + t));
        for (int i = 0; i < 2000; ++i) {
          const size_t page = rng() % n;
          const size_t word = (rng() % (kPage / 8 / kThreads)) * kThreads + static_cast<size_t>(t);
          Store(p + page * kPage + word * 8, (uint64_t{1} << 63) | (uint64_t(epoch) << 40) | (uint64_t(t) << 32) | uint64_t(i + 1));
        }
      });
    }
    // Blocks of 16 pages in a random order (pieces within a page stay in order).
    std::vector<size_t> blocks(n / 16);
    for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = b;
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937_64(static_cast<uint64_t>(epoch)));
    std::vector<uint8_t> read(n * kPage);
    for (size_t b : blocks) {
      ASSERT_TRUE(zc_->Read(p + b * 16 * kPage, read.data() + b * 16 * kPage, 16 * kPage).ok());
    }
    for (auto& w : writers) w.join();
    zc_->End();
    ASSERT_EQ(std::memcmp(read.data(), at_begin.data(), read.size()), 0) << "epoch " << epoch;
  }
  const ZeroCopyCounters c = zc_->counters();
  EXPECT_EQ(c.epochs, 3u);
  EXPECT_EQ(c.red + c.orange + c.green, 3 * n) << "each page of each epoch gets one color";
  if (GetParam() == 0) {
    EXPECT_EQ(c.orange, 0u);
  }
  EXPECT_LE(c.cow_peak_bytes, ZeroCopy::CowBytes(GetParam(), n * kPage));
}

INSTANTIATE_TEST_SUITE_P(CowSizes, ZeroCopyCowTest, ::testing::Values(0.0, 0.01, 0.05, 1.0));

TEST_F(ZeroCopyTest, CowBufferSizeHasAFloorAndACap) {
  EXPECT_EQ(ZeroCopy::CowBytes(0, 1 << 30), 0u);
  EXPECT_EQ(ZeroCopy::CowBytes(0.05, 100 * kPage), ZeroCopy::kMinCowPages * kPage);
  EXPECT_EQ(ZeroCopy::CowBytes(0.05, uint64_t{1} << 40), ZeroCopy::kMaxCowBytes);
  EXPECT_EQ(ZeroCopy::CowBytes(0.5, 1000 * kPage), 500 * kPage);
}

// An early write with a free slot is copied and released without any read:
// the writer finishes first, and the read still returns the old bytes.
TEST_F(ZeroCopyTest, OrangeWriteIsCopiedAndReleased) {
  Make(1.0);
  if (!zc_) return;
  uint8_t* p = Map(8);
  const uint64_t before = Load(p + 2 * kPage);
  ASSERT_NE(before, 0u) << "a populated page: its copy must differ from a fresh slot";
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, 8 * kPage, {}}}).ok());
  std::thread([&] { Store(p + 2 * kPage, 0xabcdef); }).join();  // returns: nothing read yet
  EXPECT_EQ(zc_->counters().orange, 1u);
  EXPECT_EQ(zc_->counters().cow_peak_bytes, kPage);
  uint64_t got = 0;
  ASSERT_TRUE(zc_->Read(p + 2 * kPage, &got, 8).ok());  // first piece of the page
  EXPECT_EQ(got, before);
  std::vector<uint8_t> rest(kPage - 8);
  ASSERT_TRUE(zc_->Read(p + 2 * kPage + 8, rest.data(), rest.size()).ok());
  EXPECT_EQ(Load(p + 2 * kPage), 0xabcdefu);
  zc_->End();
}

struct Gate {
  std::atomic<int> faults{0};
  std::atomic<bool> open{true};
  static void Hook(void* arg) {
    auto* g = static_cast<Gate*>(arg);
    g->faults.fetch_add(1);
    while (!g->open.load()) std::this_thread::yield();
  }
};

// No slot: the writer stays blocked until its page is read, then goes on;
// the read returns the bytes at Begin.
TEST_F(ZeroCopyTest, RedWriteWaitsForTheRead) {
  Make(0);
  if (!zc_) return;
  uint8_t* p = Map(8);
  const uint64_t before = Load(p + 5 * kPage);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, 8 * kPage, {}}}).ok());
  std::atomic<bool> done{false};
  std::thread w([&] {
    Store(p + 5 * kPage, 77);
    done = true;
  });
  Until([&] { return zc_->counters().red == 1; });
  EXPECT_FALSE(done.load()) << "a RED writer must wait for the page's read";
  std::vector<uint8_t> page(kPage);
  ASSERT_TRUE(zc_->Read(p + 5 * kPage, page.data(), kPage).ok());
  w.join();
  EXPECT_TRUE(done.load());
  uint64_t got;
  std::memcpy(&got, page.data(), 8);
  EXPECT_EQ(got, before);
  EXPECT_EQ(Load(p + 5 * kPage), 77u);
  zc_->End();
}

// The COW buffer full: the next early write goes RED even after slots are
// given back (it waits for its own page), and everything read is exact.
TEST_F(ZeroCopyTest, FullCowBufferTurnsWritesRed) {
  Make(1e-9);  // the floor: kMinCowPages slots
  if (!zc_) return;
  const size_t n = ZeroCopy::kMinCowPages + 4;
  uint8_t* p = Map(n);
  std::vector<uint8_t> at_begin(p, p + n * kPage);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, n * kPage, {}}}).ok());
  for (size_t i = 0; i < ZeroCopy::kMinCowPages; ++i) {
    std::thread([&] { Store(p + i * kPage, 1000 + i); }).join();
  }
  EXPECT_EQ(zc_->counters().orange, ZeroCopy::kMinCowPages);
  std::thread w([&] { Store(p + (n - 1) * kPage, 5); });
  Until([&] { return zc_->counters().red == 1; });
  std::vector<uint8_t> read(n * kPage);
  ASSERT_TRUE(zc_->Read(p, read.data(), n * kPage).ok());
  w.join();
  zc_->End();
  EXPECT_EQ(std::memcmp(read.data(), at_begin.data(), read.size()), 0);
  EXPECT_EQ(zc_->counters().cow_peak_bytes, ZeroCopy::kMinCowPages * kPage);
}

// A write that faults while the reader holds the page (forced with the
// handler's hook) waits for the read, never sees a torn page.
TEST_F(ZeroCopyTest, WriteDuringTheReadOfItsPageWaits) {
  Make(1.0);
  if (!zc_) return;
  Gate gate;
  gate.open = false;
  zc_->set_fault_hook_for_test(&Gate::Hook, &gate);
  uint8_t* p = Map(4);
  const uint64_t before = Load(p + 2 * kPage);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, 4 * kPage, {}}}).ok());
  std::thread w([&] { Store(p + 2 * kPage, 9); });
  Until([&] { return gate.faults.load() == 1; });
  // The handler is inside the hook, the writer blocked: read the page now.
  std::vector<uint8_t> page(kPage);
  ASSERT_TRUE(zc_->Read(p + 2 * kPage, page.data(), kPage).ok());
  gate.open = true;  // the handler finds the page read and releases the writer
  w.join();
  uint64_t got;
  std::memcpy(&got, page.data(), 8);
  EXPECT_EQ(got, before);
  EXPECT_EQ(zc_->counters().orange, 0u);
  zc_->End();
}

// Only the extents a version stores are protected; the rest stays writable.
TEST_F(ZeroCopyTest, ProtectsOnlyTheExtentsStored) {
  Make(0);
  if (!zc_) return;
  uint8_t* p = Map(16);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, 16 * kPage, {Extent{4 * kPage, 2 * kPage}}}}).ok());
  auto count = os::CountUffdProtectedPages(p, 16 * kPage);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 2u);
  std::thread([&] { Store(p, 1); }).join();  // not stored: no wait
  EXPECT_EQ(zc_->counters().faults, 0u);
  std::vector<uint8_t> buf(2 * kPage);
  EXPECT_FALSE(zc_->Read(p, buf.data(), kPage).ok()) << "page 0 is not part of the version";
  ASSERT_TRUE(zc_->Read(p + 4 * kPage, buf.data(), 2 * kPage).ok());
  EXPECT_FALSE(zc_->Read(p + 4 * kPage, buf.data(), kPage).ok()) << "read twice";
  zc_->End();
}

// Protection goes as pages are read, the rest at End and at destruction;
// writes afterwards do not fault.
TEST_F(ZeroCopyTest, NoProtectionLeftAfterReadEndAndDestruction) {
  Make(0.05);
  if (!zc_) return;
  const size_t n = 32;
  uint8_t* p = Map(n, /*populate=*/false);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, n * kPage, {}}}).ok());
  EXPECT_EQ(ProtectedPages(p, n * kPage), n);
  std::vector<uint8_t> buf(8 * kPage);
  ASSERT_TRUE(zc_->Read(p, buf.data(), 8 * kPage).ok());
  EXPECT_EQ(ProtectedPages(p, n * kPage), n - 8) << "read pages are released at once";
  zc_->End();
  EXPECT_EQ(ProtectedPages(p, n * kPage), 0u);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, n * kPage, {}}}).ok());
  EXPECT_EQ(zc_->Begin({ZeroCopyRange{p, n * kPage, {}}}).code(), Code::kState) << "one epoch at a time";
  const uint64_t faults = zc_->counters().faults;
  zc_.reset();  // an epoch in progress: the destructor ends it
  EXPECT_EQ(ProtectedPages(p, n * kPage), 0u);
  for (size_t i = 0; i < n; ++i) Store(p + i * kPage, i);  // would hang if still protected
  EXPECT_EQ(faults, 0u);
}

// Memory another userfaultfd owns (the pages tracker) cannot be protected:
// Begin says so and leaves nothing protected by this engine.
TEST_F(ZeroCopyTest, MemoryTrackedElsewhereIsRefused) {
  Make(0.05);
  if (!zc_) return;
  auto tracker = os::PageTracker::CreateExactly(os::TrackMode::kUffdAsync);
  if (!tracker.ok()) GTEST_SKIP() << tracker.status().ToString();
  uint8_t* a = Map(4);
  uint8_t* b = Map(4);
  ASSERT_TRUE((*tracker)->Track(b, 4 * kPage).ok());
  const Status s = zc_->Begin({ZeroCopyRange{a, 4 * kPage, {}}, ZeroCopyRange{b, 4 * kPage, {}}});
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find("another userfaultfd"), std::string::npos) << s.ToString();
  EXPECT_FALSE(zc_->in_epoch());
  EXPECT_EQ(ProtectedPages(a, 4 * kPage), 0u);
  ASSERT_TRUE((*tracker)->Untrack(b).ok());
}

}  // namespace
}  // namespace cairn::core
