#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "os/mem/memory.hpp"
#include "os/protect/page_tracker.hpp"
#include "os/protect/page_tracker_impl.hpp"

namespace cairn::os {
namespace {

const size_t kPage = PageSize();

std::set<size_t> Pages(const ExtentList& l) {
  std::set<size_t> s;
  for (const Extent& e : l) {
    for (uint64_t o = e.offset; o < e.end(); o += kPage) s.insert(o / kPage);
  }
  return s;
}

// Every mechanism in turn; a test skips only when the kernel lacks it.
class TrackerTest : public ::testing::TestWithParam<TrackMode> {
 protected:
  void SetUp() override {
    auto t = PageTracker::CreateExactly(GetParam());
    if (!t.ok()) GTEST_SKIP() << TrackModeName(GetParam()) << " unavailable: " << t.status().ToString();
    tracker_ = std::move(t).value();
  }
  uint8_t* Map(size_t pages) {
    void* p = ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    return static_cast<uint8_t*>(p);
  }
  std::set<size_t> CollectPages(void* p, bool* all = nullptr) {
    auto c = tracker_->Collect(p);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return {};
    if (all) *all = c->all;
    return Pages(c->written);
  }
  std::unique_ptr<PageTracker> tracker_;
};

TEST_P(TrackerTest, ReportsExactlyTheWrittenPages) {
  const size_t n = 64;
  uint8_t* p = Map(n);
  p[5 * kPage] = 1;  // touched before tracking: populated pages and untouched ones alike
  ASSERT_TRUE(tracker_->Track(p, n * kPage).ok());
  bool all = false;
  EXPECT_EQ(CollectPages(p, &all).size(), n);  // first Collect: everything
  EXPECT_TRUE(all);
  EXPECT_EQ(CollectPages(p, &all), std::set<size_t>{}) << "nothing written";
  EXPECT_FALSE(all);
  const std::set<size_t> want = {0, 5, 6, 7, 31, 63};
  for (size_t i : want) p[i * kPage + 100] = static_cast<uint8_t>(i + 1);
  p[6 * kPage + 4000] = 9;  // a second write to a page counts once
  EXPECT_EQ(CollectPages(p), want);
  for (size_t i : want) EXPECT_EQ(p[i * kPage + 100], i + 1);  // the data is intact
  EXPECT_EQ(CollectPages(p), std::set<size_t>{});
  // Re-armed: the same pages are seen again.
  p[31 * kPage] = 2;
  EXPECT_EQ(CollectPages(p), std::set<size_t>{31});
  const PageTrackerStats st = tracker_->stats();
  EXPECT_EQ(st.mode, GetParam());
  EXPECT_EQ(st.collects, 5u);
  EXPECT_EQ(st.pages_reported, n + want.size() + 1);
  if (GetParam() == TrackMode::kUffdSync || GetParam() == TrackMode::kMprotect) {
    EXPECT_GE(st.faults, want.size() + 1);
  }
  EXPECT_TRUE(tracker_->Untrack(p).ok());
  p[0] = 3;  // writable, untracked
  ::munmap(p, n * kPage);
}

TEST_P(TrackerTest, WriteAfterCollectIsReportedNextTime) {
  uint8_t* p = Map(8);
  ASSERT_TRUE(tracker_->Track(p, 8 * kPage).ok());
  (void)CollectPages(p);
  p[2 * kPage] = 1;                                  // before: now
  EXPECT_EQ(CollectPages(p), std::set<size_t>{2});
  p[2 * kPage] = 2;                                  // after: next time
  p[3 * kPage] = 2;
  EXPECT_EQ(CollectPages(p), (std::set<size_t>{2, 3}));
  ASSERT_TRUE(tracker_->Untrack(p).ok());
  ::munmap(p, 8 * kPage);
}

// The capture's use: writer threads keep writing while the main thread
// collects and copies the reported pages into a shadow copy (after Collect,
// as the pipeline does; a copy may be torn by a racing write). Two checks,
// neither depending on timing for its verdict:
//  - eventual: once the writers are done, one last Collect + copy leaves the
//    shadow equal to the memory (each write stores a value never stored
//    before, so a write that no report covered always shows);
//  - prompt: a write finished before a Collect started is in that Collect's
//    report or an earlier one that ended after the write began. Writers and
//    Collects take tickets from one counter (before a write, after it, and at
//    a Collect's start and end), which orders the events that matter.
TEST_P(TrackerTest, ConcurrentWritersNeverLoseAWrite) {
  const size_t n = 256;
  uint8_t* p = Map(n);
  ASSERT_TRUE(tracker_->Track(p, n * kPage).ok());
  std::vector<uint8_t> shadow(n * kPage);
  std::atomic<uint64_t> ticket{0};
  struct Report { uint64_t start, end; std::vector<bool> pages; };
  std::vector<Report> reports;
  auto collect_and_copy = [&] {
    Report r{ticket.fetch_add(1), 0, std::vector<bool>(n)};
    auto c = tracker_->Collect(p);
    r.end = ticket.fetch_add(1);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_FALSE(c->all && !c->note.empty()) << c->note;
    for (const Extent& e : c->written) {
      // Word by word with relaxed atomics: the race with the writers is the
      // point of the test, and TSan must not flag it.
      for (uint64_t o = e.offset; o < e.end(); o += 8) {
        const uint64_t v = __atomic_load_n(reinterpret_cast<uint64_t*>(p + o), __ATOMIC_RELAXED);
        std::memcpy(shadow.data() + o, &v, 8);
      }
      for (uint64_t o = e.offset; o < e.end(); o += kPage) r.pages[o / kPage] = true;
    }
    reports.push_back(std::move(r));
  };
  collect_and_copy();  // the first Collect reports (and copies) everything
  constexpr int kThreads = 3, kWritesPerThread = 20000;
  struct Write { uint64_t before, after; size_t page; };
  std::vector<std::vector<Write>> writes(kThreads);
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t x = 88172645463325252ull + static_cast<uint64_t>(t);
      writes[t].reserve(kWritesPerThread);
      for (int i = 0; i < kWritesPerThread; ++i) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        // Thread t owns the 8-byte words t, t+kThreads, ... of every page, so
        // (t, i) makes every stored value new for its word.
        const size_t page = x % n;
        const size_t word = (x >> 32) % (kPage / 8 / kThreads) * kThreads + static_cast<size_t>(t);
        const uint64_t value = (uint64_t{static_cast<uint32_t>(t) + 1} << 32) | static_cast<uint64_t>(i + 1);
        const uint64_t before = ticket.fetch_add(1);
        __atomic_store_n(reinterpret_cast<uint64_t*>(p + page * kPage + word * 8), value, __ATOMIC_RELAXED);
        writes[t].push_back(Write{before, ticket.fetch_add(1), page});
      }
      running.fetch_sub(1);
    });
  }
  int rounds = 0;
  while (running.load() > 0 || rounds < 10) {
    collect_and_copy();
    ++rounds;
  }
  for (auto& th : threads) th.join();
  collect_and_copy();
  size_t differing = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(shadow.data() + i * kPage, p + i * kPage, kPage) != 0) ++differing;
  }
  EXPECT_EQ(differing, 0u) << "pages whose last write no Collect reported, after " << rounds << " rounds";
  size_t late = 0;
  for (const auto& list : writes) {
    for (const Write& w : list) {
      // K: the first Collect that started after the write finished.
      auto k = std::upper_bound(reports.begin(), reports.end(), w.after,
                                [](uint64_t v, const Report& r) { return v < r.start; });
      if (k == reports.end()) continue;  // none: the eventual check covers it
      bool covered = false;
      for (auto j = k;; --j) {
        if (j->end < w.before) break;  // ended before the write began: too early
        if (j->pages[w.page]) {
          covered = true;
          break;
        }
        if (j == reports.begin()) break;
      }
      if (!covered) ++late;
    }
  }
  EXPECT_EQ(late, 0u) << "writes finished before a Collect but missing from its report";
  ASSERT_TRUE(tracker_->Untrack(p).ok());
  ::munmap(p, n * kPage);
}

TEST_P(TrackerTest, UnalignedRangeIsRejected) {
  uint8_t* p = Map(4);
  Status s = tracker_->Track(p + 1, kPage);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("page-aligned"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cairn_alloc"), std::string::npos) << s.message();
  EXPECT_EQ(tracker_->Track(p, kPage + 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(tracker_->Track(p, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(tracker_->Untrack(p).code(), Code::kNotFound);
  EXPECT_FALSE(tracker_->Collect(p).ok());
  ::munmap(p, 4 * kPage);
}

TEST_P(TrackerTest, MunmapOfATrackedRangeIsReportedAsLost) {
  uint8_t* p = Map(8);
  ASSERT_TRUE(tracker_->Track(p, 8 * kPage).ok());
  (void)CollectPages(p);
  ASSERT_EQ(::munmap(p + 2 * kPage, kPage), 0);
  auto c = tracker_->Collect(p);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->all);
  EXPECT_NE(c->note.find("unmapped"), std::string::npos) << c->note;
  EXPECT_EQ(tracker_->stats().lost, 1u);
  EXPECT_TRUE(tracker_->Untrack(p).ok());
  ::munmap(p, 8 * kPage);
}

TEST_P(TrackerTest, MadviseDontneedIsNeverMissed) {
  uint8_t* p = Map(8);
  for (size_t i = 0; i < 8; ++i) p[i * kPage] = 1;
  ASSERT_TRUE(tracker_->Track(p, 8 * kPage).ok());
  (void)CollectPages(p);
  ASSERT_EQ(::madvise(p + 4 * kPage, kPage, MADV_DONTNEED), 0);  // page 4 is now zeros
  bool all = false;
  std::set<size_t> got = CollectPages(p, &all);
  EXPECT_TRUE(got.count(4)) << "the dropped page must be reported (changed to zeros)";
  p[4 * kPage] = 5;  // still usable
  p[1 * kPage] = 5;
  got = CollectPages(p, &all);
  EXPECT_TRUE(got.count(1));
  EXPECT_TRUE(tracker_->Untrack(p).ok());
  ::munmap(p, 8 * kPage);
}

TEST_P(TrackerTest, MprotectByTheApplicationDoesNotCrash) {
  uint8_t* p = Map(8);
  ASSERT_TRUE(tracker_->Track(p, 8 * kPage).ok());
  (void)CollectPages(p);
  ASSERT_EQ(::mprotect(p, 8 * kPage, PROT_READ | PROT_WRITE), 0);
  p[3 * kPage] = 1;
  auto c = tracker_->Collect(p);
  ASSERT_TRUE(c.ok());
  // uffd: protection is in the page tables, not the VMA: page 3 is seen.
  // mprotect: the write went unseen unless... it is the one mechanism the
  // application's own mprotect defeats (documented); no crash either way.
  if (GetParam() != TrackMode::kMprotect) {
    EXPECT_TRUE(Pages(c->written).count(3));
  }
  EXPECT_TRUE(tracker_->Untrack(p).ok());
  ::munmap(p, 8 * kPage);
}

TEST_P(TrackerTest, ForkedChildWritesFreelyAndParentKeepsTracking) {
  uint8_t* p = Map(8);
  ASSERT_TRUE(tracker_->Track(p, 8 * kPage).ok());
  (void)CollectPages(p);
  // Fork only once the tracker's threads (uffd-sync: the handler) are past
  // their start: one write handled, then collected (Collect waits for the
  // handler's batch). A thread still starting may hold the ASan runtime's
  // locks, which the child would then wait for in its first allocation
  // (the child hung in 2 of 12 fresh ASan processes before this).
  p[0] = 1;
  EXPECT_EQ(CollectPages(p), std::set<size_t>{0});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);  // a hang would be the bug: die of SIGALRM instead
    for (size_t i = 0; i < 8; ++i) p[i * kPage] = 7;
    auto c = tracker_->Collect(p);  // must not touch the parent's memory
    ::_exit(c.ok() && c->all ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  // uffd: the child's Collect says tracking was lost (not inherited);
  // mprotect: the child inherits protection and handler and tracks on its own.
  EXPECT_EQ(WEXITSTATUS(status), GetParam() == TrackMode::kMprotect ? 3 : 0);
  EXPECT_EQ(CollectPages(p), std::set<size_t>{}) << "the child's writes are not the parent's";
  p[6 * kPage] = 1;
  EXPECT_EQ(CollectPages(p), std::set<size_t>{6});
  EXPECT_TRUE(tracker_->Untrack(p).ok());
  ::munmap(p, 8 * kPage);
}

TEST_P(TrackerTest, TwoTrackersInOneProcess) {
  auto other = PageTracker::CreateExactly(GetParam());
  ASSERT_TRUE(other.ok());
  uint8_t* a = Map(4);
  uint8_t* b = Map(4);
  ASSERT_TRUE(tracker_->Track(a, 4 * kPage).ok());
  ASSERT_TRUE((*other)->Track(b, 4 * kPage).ok());
  Status s = (*other)->Track(a, 4 * kPage);  // the same range twice
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.ToString();
  (void)CollectPages(a);
  (void)(*other)->Collect(b);
  a[kPage] = 1;
  b[2 * kPage] = 1;
  EXPECT_EQ(CollectPages(a), std::set<size_t>{1});
  auto cb = (*other)->Collect(b);
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(Pages(cb->written), std::set<size_t>{2});
  other->reset();  // destroying one tracker leaves the other working
  b[0] = 1;        // and b writable
  a[3 * kPage] = 1;
  EXPECT_EQ(CollectPages(a), std::set<size_t>{3});
  EXPECT_TRUE(tracker_->Untrack(a).ok());
  ::munmap(a, 4 * kPage);
  ::munmap(b, 4 * kPage);
}

TEST_P(TrackerTest, TransparentHugePages) {
  const size_t huge = 2 << 20;
  auto m = Mapping::Create(2 * huge, MapOptions{.populate = true, .huge_pages = true});
  ASSERT_TRUE(m.ok());
  // A 2 MiB-aligned range inside (THP needs the alignment).
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m->data()) + huge - 1) / huge * huge);
  ASSERT_TRUE(tracker_->Track(p, huge).ok());
  (void)CollectPages(p);
  p[10 * kPage] = 1;
  p[300 * kPage] = 1;
  const std::set<size_t> got = CollectPages(p);
  // Reported with 4 KiB granularity: the kernel splits the huge page on the
  // first tracked write (uffd async and sync; mprotect splits the VMA).
  EXPECT_EQ(got, (std::set<size_t>{10, 300}));
  EXPECT_TRUE(tracker_->Untrack(p).ok());
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, TrackerTest,
                         ::testing::Values(TrackMode::kUffdAsync, TrackMode::kUffdSync, TrackMode::kMprotect),
                         [](const auto& param_info) {
                           switch (param_info.param) {
                             case TrackMode::kUffdAsync: return std::string("UffdAsync");
                             case TrackMode::kUffdSync: return std::string("UffdSync");
                             case TrackMode::kMprotect: return std::string("Mprotect");
                             default: return std::string("None");
                           }
                         });

TEST(PageTrackerTest, NoneReportsEverythingEveryTime) {
  auto t = PageTracker::CreateExactly(TrackMode::kNone);
  ASSERT_TRUE(t.ok());
  std::vector<uint8_t> v(8 * kPage + kPage);
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(v.data()) + kPage - 1) / kPage * kPage);
  ASSERT_TRUE((*t)->Track(p, 8 * kPage).ok());
  for (int i = 0; i < 3; ++i) {
    auto c = (*t)->Collect(p);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->all);
    EXPECT_EQ(c->written, (ExtentList{Extent{0, 8 * kPage}}));
  }
  EXPECT_EQ((*t)->Track(p + 1, kPage).code(), Code::kInvalidArgument);
  EXPECT_TRUE((*t)->Untrack(p).ok());
  EXPECT_EQ((*t)->Untrack(p).code(), Code::kNotFound);
}

TEST(PageTrackerTest, FactoryPicksTheBestAndNamesIt) {
  auto t = PageTracker::Create();
  ASSERT_NE(t, nullptr);
  // This kernel (6.18, root) has async write-protection; elsewhere the
  // fallbacks say why.
  if (t->mode() != TrackMode::kUffdAsync) {
    EXPECT_FALSE(t->stats().fallbacks.empty());
  }
  auto from = PageTracker::Create(TrackMode::kMprotect);
  EXPECT_EQ(from->mode(), TrackMode::kMprotect);
  EXPECT_EQ(ParseTrackMode("uffd-sync").value(), TrackMode::kUffdSync);
  EXPECT_FALSE(ParseTrackMode("soft-dirty").ok());
}

// The application's own SIGSEGV handler still gets faults that are not ours.
sigjmp_buf g_jump;
std::atomic<int> g_app_faults{0};
void AppHandler(int, siginfo_t*, void*) {
  g_app_faults.fetch_add(1);
  siglongjmp(g_jump, 1);
}

TEST(PageTrackerTest, MprotectChainsToTheApplicationsHandler) {
  // Installed before the tracker's (which is process-wide and installed once:
  // run in a child so that the order is the one under test).
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);
    internal::UninstallSegvHandlerForTest();  // an earlier test may have installed it
    struct sigaction sa {};
    sa.sa_sigaction = AppHandler;
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGSEGV, &sa, nullptr);
    auto t = PageTracker::CreateExactly(TrackMode::kMprotect);
    if (!t.ok()) ::_exit(10);
    void* p = ::mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* guard = ::mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!(*t)->Track(p, 4 * kPage).ok()) ::_exit(11);
    static_cast<volatile uint8_t*>(p)[kPage] = 1;  // ours: handled silently
    if (g_app_faults.load() != 0) ::_exit(12);
    if (sigsetjmp(g_jump, 1) == 0) static_cast<volatile uint8_t*>(guard)[0] = 1;  // the application's
    if (g_app_faults.load() != 1) ::_exit(13);
    auto c = (*t)->Collect(p);
    if (!c.ok() || c->written.empty()) ::_exit(14);
    c = (*t)->Collect(p);
    if (!c.ok() || !c->written.empty()) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace cairn::os
