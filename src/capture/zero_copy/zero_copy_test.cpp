#include "capture/zero_copy/zero_copy.hpp"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "os/mem/memory.hpp"
#include "os/protect/page_tracker.hpp"
#include "os/protect/segv_handler.hpp"
#include "os/protect/write_protect.hpp"

namespace cairn::core {
namespace {

const size_t kPage = os::PageSize();

// The application's writes: relaxed atomic stores (they race with the
// library's reads by design; the kernel's protection orders them, which TSan
// cannot see, so both sides are atomic for it).
void Store(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED); }
uint64_t Load(const uint8_t* p) { return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED); }

// Pages write-protected by `m` now (/proc/self/pagemap or /proc/self/maps).
uint64_t ProtectedPages(os::WpMechanism m, const void* p, size_t n) {
  auto r = os::CountProtectedPages(m, p, n);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ~uint64_t{0};
}

WriteProtectMode ModeOf(os::WpMechanism m) {
  return m == os::WpMechanism::kMprotect ? WriteProtectMode::kMprotect : WriteProtectMode::kUserfaultfd;
}
std::string MechanismName(const ::testing::TestParamInfo<os::WpMechanism>& p) {
  return p.param == os::WpMechanism::kMprotect ? "Mprotect" : "Userfaultfd";
}

// Spins (yielding) until cond() holds: waits for an event, never for a time.
template <typename F>
void Until(F cond) {
  while (!cond()) std::this_thread::yield();
}

// Every test runs with each write-protection mechanism (mechanism()).
class ZeroCopyFixture : public ::testing::Test {
 protected:
  virtual os::WpMechanism mechanism() const = 0;
  void Make(double cow) {
    auto z = ZeroCopy::Create(cow, ModeOf(mechanism()));
    if (!z.ok()) GTEST_SKIP() << os::WpMechanismName(mechanism()) << " unavailable: " << z.status().ToString();
    zc_ = std::move(z).value();
    EXPECT_EQ(zc_->mechanism(), mechanism());
  }
  uint64_t ProtectedPages(const void* p, size_t n) { return cairn::core::ProtectedPages(mechanism(), p, n); }
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

class ZeroCopyTest : public ZeroCopyFixture, public ::testing::WithParamInterface<os::WpMechanism> {
 protected:
  os::WpMechanism mechanism() const override { return GetParam(); }
};

// Writers hammer random pages while the reader reads everything in blocks:
// what is read equals memory at Begin, for COW buffers from none (every
// early write waits: RED) to ample (ORANGE). Each write stores a value never
// stored before, so a write that reached a page before its read would show.
class ZeroCopyCowTest : public ZeroCopyFixture,
                        public ::testing::WithParamInterface<std::tuple<os::WpMechanism, double>> {
 protected:
  os::WpMechanism mechanism() const override { return std::get<0>(GetParam()); }
  double cow() const { return std::get<1>(GetParam()); }
};

TEST_P(ZeroCopyCowTest, ConcurrentWritersNeverReachAVersion) {
  Make(cow());
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
  if (cow() == 0) {
    EXPECT_EQ(c.orange, 0u);
  }
  EXPECT_LE(c.cow_peak_bytes, ZeroCopy::CowBytes(cow(), n * kPage));
}

INSTANTIATE_TEST_SUITE_P(CowSizes, ZeroCopyCowTest,
                         ::testing::Combine(::testing::Values(os::WpMechanism::kUserfaultfd, os::WpMechanism::kMprotect),
                                            ::testing::Values(0.0, 0.01, 0.05, 1.0)),
                         [](const auto& p) {
                           const double c = std::get<1>(p.param);
                           return std::string(std::get<0>(p.param) == os::WpMechanism::kMprotect ? "Mprotect"
                                                                                               : "Userfaultfd") +
                                  "Cow" + (c == 0 ? "0" : c == 0.01 ? "1pc" : c == 0.05 ? "5pc" : "100pc");
                         });

TEST(ZeroCopyCowBytesTest, CowBufferSizeHasAFloorAndACap) {
  EXPECT_EQ(ZeroCopy::CowBytes(0, 1 << 30), 0u);
  EXPECT_EQ(ZeroCopy::CowBytes(0.05, 100 * kPage), ZeroCopy::kMinCowPages * kPage);
  EXPECT_EQ(ZeroCopy::CowBytes(0.05, uint64_t{1} << 40), ZeroCopy::kMaxCowBytes);
  EXPECT_EQ(ZeroCopy::CowBytes(0.5, 1000 * kPage), 500 * kPage);
}

// An early write with a free slot is copied and released without any read:
// the writer finishes first, and the read still returns the old bytes.
TEST_P(ZeroCopyTest, OrangeWriteIsCopiedAndReleased) {
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
TEST_P(ZeroCopyTest, RedWriteWaitsForTheRead) {
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
  // Reads of other pages release them (mprotect: and wake every sleeper):
  // the writer sleeps again, it does not spin (at most one fault per wake).
  std::vector<uint8_t> page(kPage);
  for (size_t other = 0; other < 3; ++other) ASSERT_TRUE(zc_->Read(p + other * kPage, page.data(), kPage).ok());
  EXPECT_FALSE(done.load());
  EXPECT_LE(zc_->counters().faults, 1u + 3u) << "a waiting writer spins";
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
TEST_P(ZeroCopyTest, FullCowBufferTurnsWritesRed) {
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
TEST_P(ZeroCopyTest, WriteDuringTheReadOfItsPageWaits) {
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
TEST_P(ZeroCopyTest, ProtectsOnlyTheExtentsStored) {
  Make(0);
  if (!zc_) return;
  uint8_t* p = Map(16);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{p, 16 * kPage, {Extent{4 * kPage, 2 * kPage}}}}).ok());
  EXPECT_EQ(ProtectedPages(p, 16 * kPage), 2u);
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
TEST_P(ZeroCopyTest, NoProtectionLeftAfterReadEndAndDestruction) {
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

// Memory the page tracker protects with the same mechanism (another
// userfaultfd, or the mprotect tracker's claim) cannot be protected: Begin
// says so and leaves nothing protected by this engine.
TEST_P(ZeroCopyTest, MemoryTrackedElsewhereIsRefused) {
  Make(0.05);
  if (!zc_) return;
  const bool mp = mechanism() == os::WpMechanism::kMprotect;
  auto tracker = os::PageTracker::CreateExactly(mp ? os::TrackMode::kMprotect : os::TrackMode::kUffdAsync);
  if (!tracker.ok()) GTEST_SKIP() << tracker.status().ToString();
  uint8_t* a = Map(4);
  uint8_t* b = Map(4);
  ASSERT_TRUE((*tracker)->Track(b, 4 * kPage).ok());
  const Status s = zc_->Begin({ZeroCopyRange{a, 4 * kPage, {}}, ZeroCopyRange{b, 4 * kPage, {}}});
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find(mp ? "overlaps one already protected" : "another userfaultfd"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(zc_->in_epoch());
  EXPECT_EQ(ProtectedPages(a, 4 * kPage), 0u);
  ASSERT_TRUE((*tracker)->Untrack(b).ok());
}

// ---------------------------------------------------------------------------
// mprotect + SIGSEGV only

// Mappings of /proc/self/maps that overlap [p, p + n).
int MappingsOver(const void* p, size_t n) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return -1;
  const auto lo = reinterpret_cast<uintptr_t>(p);
  int count = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line, "%lx-%lx", &a, &b) == 2 && a < lo + n && lo < b) ++count;
  }
  std::fclose(f);
  return count;
}

// ORANGE pages are unprotected one by one (the mapping splits); once the
// epoch is read and ended the range is one writable mapping again.
TEST(ZeroCopyMprotectTest, MappingMergesBackAfterTheEpoch) {
  auto z = ZeroCopy::Create(1.0, WriteProtectMode::kMprotect);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  const size_t n = 64;
  void* m = ::mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* p = static_cast<uint8_t*>(m);
  for (size_t i = 0; i < n; ++i) Store(p + i * kPage, i + 1);
  ASSERT_EQ(MappingsOver(p, n * kPage), 1);
  ASSERT_TRUE((*z)->Begin({ZeroCopyRange{p, n * kPage, {}}}).ok());
  for (size_t i = 1; i < n; i += 4) Store(p + i * kPage, 1000 + i);  // ORANGE, one page each
  EXPECT_GT(MappingsOver(p, n * kPage), 8) << "single pages made writable split the mapping";
  EXPECT_EQ(ProtectedPages(os::WpMechanism::kMprotect, p, n * kPage), n - n / 4);
  std::vector<uint8_t> read(n * kPage);
  ASSERT_TRUE((*z)->Read(p, read.data(), read.size()).ok());
  for (size_t i = 0; i < n; ++i) {
    uint64_t v;
    std::memcpy(&v, read.data() + i * kPage, 8);
    ASSERT_EQ(v, i + 1) << "page " << i;
  }
  (*z)->End();
  EXPECT_EQ(ProtectedPages(os::WpMechanism::kMprotect, p, n * kPage), 0u);
  EXPECT_EQ(MappingsOver(p, n * kPage), 1);
  EXPECT_EQ((*z)->counters().orange, n / 4);
  z->reset();
  ::munmap(m, n * kPage);
}

// The mprotect page tracker and zero-copy share one SIGSEGV handler: each
// gets the faults of its own ranges.
TEST(ZeroCopyMprotectTest, SharesTheHandlerWithTheMprotectTracker) {
  auto tracker = os::PageTracker::CreateExactly(os::TrackMode::kMprotect);
  ASSERT_TRUE(tracker.ok()) << tracker.status().ToString();
  auto z = ZeroCopy::Create(1.0, WriteProtectMode::kMprotect);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  void* m = ::mmap(nullptr, 8 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* tracked = static_cast<uint8_t*>(m);
  uint8_t* zc = tracked + 4 * kPage;
  Store(zc + kPage, 7);
  ASSERT_TRUE((*tracker)->Track(tracked, 4 * kPage).ok());
  ASSERT_TRUE((*tracker)->Collect(tracked).ok());  // the first reports all
  ASSERT_TRUE((*z)->Begin({ZeroCopyRange{zc, 4 * kPage, {}}}).ok());
  Store(tracked + 2 * kPage, 1);  // the tracker's
  Store(zc + kPage, 8);           // zero-copy's: ORANGE
  EXPECT_EQ((*z)->counters().orange, 1u);
  auto c = (*tracker)->Collect(tracked);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->written.size(), 1u);
  EXPECT_EQ(c->written[0].offset, 2 * kPage);
  std::vector<uint8_t> read(4 * kPage);
  ASSERT_TRUE((*z)->Read(zc, read.data(), read.size()).ok());
  uint64_t v;
  std::memcpy(&v, read.data() + kPage, 8);
  EXPECT_EQ(v, 7u);
  (*z)->End();
  ASSERT_TRUE((*tracker)->Untrack(tracked).ok());
  ::munmap(m, 8 * kPage);
}

sigjmp_buf g_jump;
std::atomic<int> g_app_faults{0};
void AppHandler(int, siginfo_t*, void*) {
  g_app_faults.fetch_add(1);
  siglongjmp(g_jump, 1);
}
void InstallAppHandler() {
  g_app_faults = 0;  // a child: the parent may have counted some
  struct sigaction sa {};
  sa.sa_sigaction = AppHandler;
  sa.sa_flags = SA_SIGINFO;
  ::sigaction(SIGSEGV, &sa, nullptr);
}

// Runs body in a forked child (the SIGSEGV handler is process-wide and
// installed once: the child sets up the order under test) and expects exit 0.
template <typename F>
void InChild(F body) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);
    os::segv::UninstallForTest();  // an earlier test may have installed it
    ::_exit(body());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// The application's handler, installed before Cairn's, still gets the
// faults that are not zero-copy's during an epoch (a write to its own
// PROT_NONE guard page, a write to its own read-only page), and none of ours.
TEST(ZeroCopyMprotectTest, ApplicationsHandlerGetsTheFaultsThatAreNotOurs) {
  InChild([] {
    InstallAppHandler();
    auto z = ZeroCopy::Create(1.0, WriteProtectMode::kMprotect);
    if (!z.ok()) return 10;
    void* m = ::mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* guard = ::mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* ro = ::mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    auto* p = static_cast<uint8_t*>(m);
    Store(p + kPage, 5);
    if (!(*z)->Begin({ZeroCopyRange{p, 4 * kPage, {}}}).ok()) return 11;
    Store(p + kPage, 6);  // ours: ORANGE, silently
    if (g_app_faults.load() != 0 || (*z)->counters().orange != 1) return 12;
    if (sigsetjmp(g_jump, 1) == 0) static_cast<volatile uint8_t*>(guard)[0] = 1;
    if (g_app_faults.load() != 1) return 13;
    if (sigsetjmp(g_jump, 1) == 0) static_cast<volatile uint8_t*>(ro)[0] = 1;  // a write fault, not ours
    if (g_app_faults.load() != 2) return 14;
    std::vector<uint8_t> read(4 * kPage);
    if (!(*z)->Read(p, read.data(), read.size()).ok()) return 15;
    if (Load(read.data() + kPage) != 5) return 16;
    (*z)->End();
    return g_app_faults.load() == 2 ? 0 : 17;
  });
}

// A handler installed after Cairn's would get our faults without knowing
// them: Begin refuses (the capture copies instead) and protects nothing.
TEST(ZeroCopyMprotectTest, HandlerReplacedAfterOursIsRefused) {
  InChild([] {
    auto z = ZeroCopy::Create(0.05, WriteProtectMode::kMprotect);
    if (!z.ok()) return 10;
    InstallAppHandler();
    void* m = ::mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const Status s = (*z)->Begin({ZeroCopyRange{static_cast<uint8_t*>(m), 4 * kPage, {}}});
    if (s.code() != Code::kUnsupported || s.message().find("another SIGSEGV handler") == std::string::npos) return 11;
    auto count = os::CountProtectedPages(os::WpMechanism::kMprotect, m, 4 * kPage);
    if (!count.ok() || *count != 0) return 12;
    return (*z)->in_epoch() ? 13 : 0;
  });
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, ZeroCopyTest,
                         ::testing::Values(os::WpMechanism::kUserfaultfd, os::WpMechanism::kMprotect), MechanismName);

}  // namespace
}  // namespace cairn::core
