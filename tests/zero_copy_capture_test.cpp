// Zero-copy checkpoints through the client (checkpoint.capture = zero-copy;
// docs/design.md "Zero-copy captures"): versions equal memory at the
// checkpoint call while application threads keep writing, for COW buffers
// from none to ample, full and layered (hash); back-to-back checkpoints;
// no protection left at close; the fallback to copying with a note; the
// application's own SIGSEGV handler untouched (userfaultfd) or chained to
// (mprotect). Each with both write-protection mechanisms.
#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "os/protect/page_tracker.hpp"
#include "os/protect/segv_handler.hpp"
#include "os/protect/write_protect.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr size_t kPage = 4096;
constexpr size_t kBytes = 256 * kPage;  // 1 MiB: 16 blocks of 64 KiB
const char* const kName = "zc";

void Store(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED); }
std::vector<uint8_t> Snapshot(const uint8_t* p, size_t n) {
  std::vector<uint8_t> out(n);
  for (size_t o = 0; o < n; o += 8) {
    const uint64_t v = __atomic_load_n(reinterpret_cast<const uint64_t*>(p + o), __ATOMIC_RELAXED);
    std::memcpy(out.data() + o, &v, 8);
  }
  return out;
}

os::WpMechanism MechanismOf(WriteProtectMode m) {
  return m == WriteProtectMode::kMprotect ? os::WpMechanism::kMprotect : os::WpMechanism::kUserfaultfd;
}

// Pages write-protected by `m` now (/proc/self/pagemap, /proc/self/maps).
uint64_t ProtectedPages(const void* p, size_t n, WriteProtectMode m = WriteProtectMode::kUserfaultfd) {
  auto r = os::CountProtectedPages(MechanismOf(m), p, n);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ~uint64_t{0};
}

bool ZeroCopyAvailable(std::string* why, WriteProtectMode m = WriteProtectMode::kUserfaultfd) {
  auto wp = os::WriteProtect::Create(MechanismOf(m), [](uintptr_t) { return true; });
  if (!wp.ok()) *why = wp.status().ToString();
  return wp.ok();
}

class ZeroCopyCaptureTest
    : public ScratchDirTest,
      public ::testing::WithParamInterface<std::tuple<double, ChangeDetection, WriteProtectMode>> {
 protected:
  ZeroCopyCaptureTest() : ScratchDirTest("zero_copy_capture") {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::string why;
    if (!ZeroCopyAvailable(&why, std::get<2>(GetParam()))) GTEST_SKIP() << "write-protection unavailable: " << why;
    // A small cache: the reader waits for the flush, so epochs overlap the
    // application's writes and the next checkpoint calls.
    config_ = MakeConfig(256 * kKiB, 64 * kKiB);
    config_.capture = CaptureMode::kZeroCopy;
    config_.cow_fraction = std::get<0>(GetParam());
    config_.changes = std::get<1>(GetParam());
    config_.write_protect = std::get<2>(GetParam());
    config_.keep_versions = 100;
    auto b = TrackedBuffer::Create(kBytes);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    buf_ = std::move(*b);
    mem_ = static_cast<uint8_t*>(buf_.data());
  }
  Config config_;
  TrackedBuffer buf_;
  uint8_t* mem_ = nullptr;
};

// Each round: snapshot, checkpoint (returns with the memory protected), then
// writer threads write random words (each value new) while the version is
// read; the next checkpoint is called as soon as they are done, usually with
// the previous epoch still being read (it waits). Every version restores to
// its snapshot.
TEST_P(ZeroCopyCaptureTest, VersionsEqualMemoryAtTheCallUnderConcurrentWriters) {
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(7);
  for (size_t o = 0; o < kBytes; o += 8) Store(mem_ + o, rng());
  constexpr int kVersions = 6, kThreads = 3;
  std::vector<std::vector<uint8_t>> content(kVersions + 1);
  for (int v = 1; v <= kVersions; ++v) {
    content[v] = Snapshot(mem_, kBytes);
    ASSERT_OK(c->Checkpoint(kName, v));
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t, v] {
        std::mt19937_64 r(static_cast<uint64_t>(v * 10 + t));
        // Few pages per version (layered versions store little), some twice.
        for (int i = 0; i < 40; ++i) {
          const size_t page = r() % (v % 2 == 0 ? 16 : kBytes / kPage);
          const size_t word = (r() % (kPage / 8 / kThreads)) * kThreads + static_cast<size_t>(t);
          Store(mem_ + page * kPage + word * 8, (uint64_t{1} << 63) | (uint64_t(v) << 40) | (uint64_t(t) << 32) | uint64_t(i));
        }
      });
    }
    for (auto& w : writers) w.join();
  }
  ASSERT_OK(c->Wait(kName, kVersions, Level::kLocal));
  const Stats s = c->GetStats();
  EXPECT_EQ(s.zero_copy.versions, uint64_t{kVersions}) << s.zero_copy.note;
  EXPECT_EQ(s.zero_copy.fallbacks, 0u) << s.zero_copy.note;
  // BLUE first writes are watched with the learned order on userfaultfd only.
  if (config_.write_protect == WriteProtectMode::kMprotect) {
    EXPECT_EQ(s.zero_copy.blue, 0u);
    EXPECT_EQ(s.zero_copy.watch_faults, 0u);
  }
  EXPECT_LE(s.zero_copy.blue, s.zero_copy.watch_faults);
  // pages: the engine's watch is the page source; mprotect has no watch, so
  // every version is full (layered chains: PagesChainIsLayeredAndExact).
  if (config_.changes == ChangeDetection::kPages && config_.write_protect == WriteProtectMode::kMprotect) {
    EXPECT_EQ(s.changes.layered_versions, 0u);
  }
  if (config_.cow_fraction == 0) {
    EXPECT_EQ(s.zero_copy.orange, 0u);
  }
  EXPECT_GT(s.zero_copy.green, 0u);
  EXPECT_LE(s.zero_copy.cow_peak_bytes, uint64_t{1} << 30);
  for (int v = kVersions; v >= 1; --v) {
    std::memset(mem_, 0, kBytes);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  ASSERT_OK(c->Close());
  EXPECT_EQ(ProtectedPages(mem_, kBytes, config_.write_protect), 0u) << "close leaves no protection";
}

// Regions that are not page-aligned (as Python and torch allocate): the
// pages wholly inside each are protected and read later, the partial pages
// at their ends (two regions share one here, and a third is a few bytes) are
// copied at the call, so those pages are never protected. Writers change
// every word right after each call; every version restores to its
// snapshot, and none is copied instead.
TEST_P(ZeroCopyCaptureTest, UnalignedRegionsAreProtectedInsideAndCopiedAtTheEdges) {
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  const size_t split = kBytes / 2 + 52;
  uint8_t* const a = mem_ + 104;               // [104, split): both ends mid-page
  uint8_t* const b = mem_ + split;             // [split, kBytes - 40): shares a's last page
  const size_t a_bytes = split - 104, b_bytes = kBytes - 40 - split;
  std::vector<uint8_t> tiny(24);
  ASSERT_OK(c->Protect(1, a, a_bytes));
  ASSERT_OK(c->Protect(2, b, b_bytes));
  ASSERT_OK(c->Protect(3, tiny.data(), tiny.size()));
  std::mt19937_64 rng(11);
  for (size_t o = 0; o < kBytes; o += 8) Store(mem_ + o, rng());
  constexpr int kVersions = 4;
  std::vector<std::vector<uint8_t>> content(kVersions + 1), tiny_at(kVersions + 1);
  for (int v = 1; v <= kVersions; ++v) {
    content[v] = Snapshot(mem_, kBytes);
    tiny_at[v] = tiny;
    ASSERT_OK(c->Checkpoint(kName, v));
    for (const size_t edge : {size_t{0}, split / kPage * kPage, kBytes - kPage}) {
      EXPECT_EQ(ProtectedPages(mem_ + edge, kPage, config_.write_protect), 0u) << "the page at " << edge;
    }
    std::thread writer([&, v] {
      std::mt19937_64 r(static_cast<uint64_t>(v));
      const size_t words = v % 2 == 0 ? kBytes / 8 : 64;  // all, or a few (layered versions)
      for (size_t i = 0; i < words; ++i) Store(mem_ + (v % 2 == 0 ? i : r() % (kBytes / 8)) * 8, r());
    });
    tiny[static_cast<size_t>(v) % tiny.size()] ^= 0xff;
    writer.join();
  }
  ASSERT_OK(c->Wait(kName, kVersions, Level::kLocal));
  const Stats s = c->GetStats();
  EXPECT_EQ(s.zero_copy.versions, uint64_t{kVersions}) << s.zero_copy.note;
  EXPECT_EQ(s.zero_copy.fallbacks, 0u) << s.zero_copy.note;
  for (int v = kVersions; v >= 1; --v) {
    std::memset(mem_, 0, kBytes);
    std::fill(tiny.begin(), tiny.end(), 0);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(a, content[v].data() + 104, a_bytes), 0) << "version " << v;
    EXPECT_EQ(std::memcmp(b, content[v].data() + split, b_bytes), 0) << "version " << v;
    EXPECT_EQ(tiny, tiny_at[v]) << "version " << v;
  }
  ASSERT_OK(c->Close());
  EXPECT_EQ(ProtectedPages(mem_, kBytes, config_.write_protect), 0u) << "close leaves no protection";
}

INSTANTIATE_TEST_SUITE_P(CowAndChanges, ZeroCopyCaptureTest,
                         ::testing::Combine(::testing::Values(0.0, 0.05, 1.0),
                                            ::testing::Values(ChangeDetection::kFull, ChangeDetection::kHash,
                                                              ChangeDetection::kPages),
                                            ::testing::Values(WriteProtectMode::kUserfaultfd,
                                                              WriteProtectMode::kMprotect)));

class ZeroCopyClientTest : public ScratchDirTest {
 protected:
  ZeroCopyClientTest() : ScratchDirTest("zero_copy_client") {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::string why;
    if (!ZeroCopyAvailable(&why)) GTEST_SKIP() << "userfaultfd write-protection unavailable: " << why;
    auto b = TrackedBuffer::Create(kBytes);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    buf_ = std::move(*b);
    mem_ = static_cast<uint8_t*>(buf_.data());
  }
  TrackedBuffer buf_;
  uint8_t* mem_ = nullptr;
};

// checkpoint.zero_copy_order: with the learned order the reader reads blocks
// out of file order (RED and ORANGE pages first, then the previous epoch's
// order) while two threads write the pages in reverse; every version still
// restores byte for byte, for both orders, with and without COW slots.
TEST_F(ZeroCopyClientTest, ReversedWritersEitherOrderVersionsExact) {
  for (const char* order : {"address", "learned"}) {
    for (const double cow : {0.0, 0.05}) {
      Config config = MakeConfig(256 * kKiB, 64 * kKiB);
      config.capture = CaptureMode::kZeroCopy;
      config.zero_copy_order = order;
      config.cow_fraction = cow;
      config.keep_versions = 100;
      const std::string name = std::string("rev_") + order + (cow > 0 ? "_cow" : "");
      auto c = OpenClient(config);
      ASSERT_NE(c, nullptr);
      ASSERT_OK(c->Protect(1, mem_, kBytes));
      constexpr int kVersions = 4;
      std::vector<std::vector<uint8_t>> content(kVersions + 1);
      for (int v = 1; v <= kVersions; ++v) {
        content[v] = Snapshot(mem_, kBytes);
        ASSERT_OK(c->Checkpoint(name, v));
        std::vector<std::thread> writers;
        for (int t = 0; t < 2; ++t) {  // thread t writes word t of every page, last page first
          writers.emplace_back([&, t, v] {
            for (size_t p = kBytes / kPage; p-- > 0;) Store(mem_ + p * kPage + size_t(t) * 8, (uint64_t(v) << 32) | p);
          });
        }
        for (auto& w : writers) w.join();
      }
      ASSERT_OK(c->Wait(name, kVersions, Level::kLocal));
      EXPECT_EQ(c->GetStats().zero_copy.versions, uint64_t{kVersions});
      for (int v = kVersions; v >= 1; --v) {
        std::memset(mem_, 0, kBytes);
        ASSERT_OK(c->Restore(name, v));
        EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << order << " cow " << cow << " version " << v;
      }
      ASSERT_OK(c->Close());
    }
  }
}

// The learned order's reader keeps spare chunks for RED pages (Pipeline::
// HoldRoom): with no COW slot and the flush stopped (the cache full of
// blocks waiting for their write), a first write to a page not read yet is
// still read and released at once, from a spare, not when the flush frees
// room. The version keeps the page as it was at the call. (Without spares
// the write would wait for the gate: the bounded wait below fails instead.)
TEST_F(ZeroCopyClientTest, ARedPageIsReadFromASpareWhileTheFlushIsStopped) {
  GateFs fs(format::EntryFileName(format::EntryKind::kCheckpoint, 1));  // the flusher's open waits
  Config config = MakeConfig(8 * 64 * kKiB, 64 * kKiB);  // 8 chunks: 2 spares, 6 for the flush
  config.capture = CaptureMode::kZeroCopy;
  config.zero_copy_order = "learned";
  config.cow_fraction = 0;
  config.fs = &fs;
  auto c = OpenClient(config);
  ASSERT_NE(c, nullptr);
  GateRelease release{&fs};  // after the client: runs first at scope exit
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  for (size_t o = 0; o < kBytes; o += 8) Store(mem_ + o, o);
  const std::vector<uint8_t> before = Snapshot(mem_, kBytes);
  ASSERT_OK(c->Checkpoint(kName, 1));
  // The reader fills the 6 chunks that are not spares (blocks 0-5, in
  // address order: no history yet) and waits for room. Then the last page
  // (block 15) goes RED.
  constexpr uint64_t kFilled = 6 * 64 * kKiB / kPage;
  while (c->GetStats().zero_copy.green < kFilled) std::this_thread::yield();
  auto write = std::async(std::launch::async, [&] { Store(mem_ + kBytes - kPage, ~uint64_t{0}); });
  const bool done = write.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  fs.Release();
  write.wait();
  EXPECT_TRUE(done) << "the RED write waited for the flush";
  ASSERT_OK(c->Wait(kName, 1, Level::kLocal));
  EXPECT_GE(c->GetStats().zero_copy.red, uint64_t{1});
  std::memset(mem_, 0, kBytes);
  ASSERT_OK(c->Restore(kName, 1));
  EXPECT_EQ(std::memcmp(mem_, before.data(), kBytes), 0);
  ASSERT_OK(c->Close());
}

// Unprotect reads a zero-copy epoch still reading the region to the end
// before it returns, so that the application may free the memory right
// after: nothing of it is protected then, and the version holds it as it was
// at the call. The flush waits for a gate, so the reader is stopped with the
// cache full and most of the region not read when Unprotect is called;
// another thread opens the gate as the call begins.
// UnprotectOptions::wait_for_reads = false returns at once instead.
TEST_F(ZeroCopyClientTest, UnprotectReadsAnEpochInFlightToTheEnd) {
  for (const bool wait : {true, false}) {
    SCOPED_TRACE(wait ? "wait_for_reads" : "no wait");
    GateFs fs(format::EntryFileName(format::EntryKind::kCheckpoint, 1));
    Config config = MakeConfig(8 * 64 * kKiB, 64 * kKiB);
    config.capture = CaptureMode::kZeroCopy;
    config.cow_fraction = 0;
    config.fs = &fs;
    config.scratch_dir = tmp_.path() + (wait ? "/wait" : "/nowait");
    auto c = OpenClient(config);
    ASSERT_NE(c, nullptr);
    GateRelease release{&fs};
    ASSERT_OK(c->Protect(1, mem_, kBytes));
    for (size_t o = 0; o < kBytes; o += 8) Store(mem_ + o, o * 3 + 1);
    const std::vector<uint8_t> before = Snapshot(mem_, kBytes);
    ASSERT_OK(c->Checkpoint(kName, 1));
    ASSERT_EQ(c->GetStats().zero_copy.versions, 1u) << c->GetStats().zero_copy.note;
    EXPECT_GT(ProtectedPages(mem_, kBytes), 0u) << "the reader is stopped at the full cache";
    std::thread opener([&] { fs.Release(); });
    ASSERT_OK(c->Unprotect(1, UnprotectOptions{.wait_for_reads = wait}));
    const uint64_t left = ProtectedPages(mem_, kBytes);
    opener.join();
    if (wait) {
      EXPECT_EQ(left, 0u) << "Unprotect returned with the region still being read";
    }
    ASSERT_OK(c->Wait(kName, 1, Level::kLocal));
    std::memset(mem_, 0, kBytes);  // the memory is the application's again
    ASSERT_OK(c->Protect(1, mem_, kBytes));
    ASSERT_OK(c->Restore(kName, 1));
    EXPECT_EQ(std::memcmp(mem_, before.data(), kBytes), 0);
    ASSERT_OK(c->Close());
  }
}

// checkpoint.changes = pages under zero-copy (userfaultfd): the engine's
// watch of first writes is the page source, so a version stores only the
// pages written since the last checkpoint, whenever they were written: before
// the call, during the epoch (RED/ORANGE/GREEN) or after it completed
// (BLUE). Each version is waited for before the next, so each is layered on
// the one before; the whole chain restores byte for byte.
TEST_F(ZeroCopyClientTest, PagesChainIsLayeredAndExact) {
  Config config = MakeConfig(256 * kKiB, 64 * kKiB);
  config.capture = CaptureMode::kZeroCopy;
  config.write_protect = WriteProtectMode::kUserfaultfd;
  config.changes = ChangeDetection::kPages;
  config.keep_versions = 100;
  auto c = OpenClient(config);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(11);
  for (size_t o = 0; o < kBytes; o += 8) Store(mem_ + o, rng());
  constexpr int kVersions = 6;
  constexpr size_t kPages = kBytes / kPage;
  std::vector<std::vector<uint8_t>> content(kVersions + 1);
  uint64_t value = 1;
  auto write_some = [&](int n) {  // n random pages, each a value never stored before
    for (int i = 0; i < n; ++i) Store(mem_ + (rng() % kPages) * kPage + (rng() % (kPage / 8)) * 8, value++);
  };
  for (int v = 1; v <= kVersions; ++v) {
    write_some(5);
    content[v] = Snapshot(mem_, kBytes);
    ASSERT_OK(c->Checkpoint(kName, v));
    std::thread during([&] { write_some(5); });  // while the epoch is read
    during.join();
    ASSERT_OK(c->Wait(kName, v, Level::kLocal));
    write_some(5);  // after the version completed: BLUE
  }
  const Stats s = c->GetStats();
  EXPECT_EQ(s.zero_copy.versions, uint64_t{kVersions}) << s.zero_copy.note;
  EXPECT_EQ(s.changes.layered_versions, uint64_t{kVersions - 1}) << s.changes.fallback_note;
  EXPECT_GT(s.zero_copy.blue, 0u);
  // At most 15 pages written per version, against 256 in a full one.
  EXPECT_LT(s.changes.bytes_stored, kBytes + (kVersions - 1) * 16 * kPage);
  for (int v = kVersions; v >= 1; --v) {
    std::memset(mem_, 0, kBytes);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  ASSERT_OK(c->Close());
  EXPECT_EQ(ProtectedPages(mem_, kBytes), 0u);
}

// Memory that checkpoint.changes = auto tracks belongs to the tracker's
// userfaultfd: the checkpoint is copied instead, and the stats say why
// (`pages` uses the zero-copy engine's own watch instead: above).
TEST_F(ZeroCopyClientTest, UnprotectableMemoryFallsBackToCopyWithANote) {
  Config config = MakeConfig(4 * kMiB, 64 * kKiB);
  config.capture = CaptureMode::kZeroCopy;
  config.write_protect = WriteProtectMode::kUserfaultfd;
  config.changes = ChangeDetection::kAuto;
  auto c = OpenClient(config);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::memset(mem_, 3, kBytes);
  ASSERT_OK(c->Checkpoint(kName, 1));
  mem_[5] = 4;
  ASSERT_OK(c->Checkpoint(kName, 2));
  ASSERT_OK(c->Wait(kName, 2, Level::kLocal));
  const Stats s = c->GetStats();
  if (s.changes.tracker != "uffd-async" && s.changes.tracker != "uffd-sync") {
    GTEST_SKIP() << "the pages tracker is not userfaultfd here: " << s.changes.tracker;
  }
  EXPECT_EQ(s.zero_copy.versions, 0u);
  EXPECT_EQ(s.zero_copy.fallbacks, 2u);
  EXPECT_NE(s.zero_copy.note.find("another userfaultfd"), std::string::npos) << s.zero_copy.note;
  ASSERT_OK(c->Restore(kName, 1));
  EXPECT_EQ(mem_[5], 3);
  ASSERT_OK(c->Restore(kName, 2));
  EXPECT_EQ(mem_[5], 4);
}

// The learned order watches first writes after a page's read until the next
// checkpoint: once the version is committed, pages stay protected until
// their first write, which counts as BLUE (one watch fault each); a restore
// ends the watch, and so does close (no protection left either way).
// checkpoint.changes = pages: the page-by-page watch of every epoch (with
// full or hash the watch goes by block and only after an epoch with traps:
// LockStepTest.WatchGroupReleasesTheGroupsWatchedPagesWithOneFault).
TEST_F(ZeroCopyClientTest, FirstWritesAfterTheVersionAreBlueUntilRestoreOrClose) {
  Config config = MakeConfig(256 * kKiB, 64 * kKiB);
  config.capture = CaptureMode::kZeroCopy;
  config.zero_copy_order = "learned";
  config.write_protect = WriteProtectMode::kUserfaultfd;
  config.changes = ChangeDetection::kPages;
  auto c = OpenClient(config);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  for (int round = 0; round < 2; ++round) {
    std::memset(mem_, 7 + round, kBytes);
    ASSERT_OK(c->Checkpoint(kName, round + 1));
    ASSERT_OK(c->Wait(kName, round + 1, Level::kLocal));
    const uint64_t blue = c->GetStats().zero_copy.blue;
    EXPECT_EQ(ProtectedPages(mem_, kBytes), kBytes / kPage) << "committed, and watched";
    for (const size_t p : {40, 3, 17}) Store(mem_ + p * kPage, p);
    const Stats s = c->GetStats();
    EXPECT_EQ(s.zero_copy.versions, uint64_t(round) + 1) << s.zero_copy.note;
    EXPECT_EQ(s.zero_copy.blue, blue + 3);
    EXPECT_EQ(ProtectedPages(mem_, kBytes), kBytes / kPage - 3);
    if (round == 0) {
      ASSERT_OK(c->Restore(kName, 1));
      EXPECT_EQ(ProtectedPages(mem_, kBytes), 0u) << "a restore ends the watch";
      EXPECT_EQ(mem_[40 * kPage], 7);
    }
  }
  ASSERT_OK(c->Close());
  EXPECT_EQ(ProtectedPages(mem_, kBytes), 0u) << "close ends the watch";
}

// Closing right after a zero-copy checkpoint reads the epoch to the end
// (the version is committed) and leaves nothing protected: writes after
// close do not fault (a fault with no handler would hang here).
class ZeroCopyCloseTest : public ZeroCopyClientTest, public ::testing::WithParamInterface<WriteProtectMode> {};

TEST_P(ZeroCopyCloseTest, CloseFinishesTheEpochAndRemovesProtection) {
  Config config = MakeConfig(128 * kKiB, 64 * kKiB);
  config.capture = CaptureMode::kZeroCopy;
  config.cow_fraction = 0;
  config.write_protect = GetParam();
  {
    auto c = OpenClient(config);
    ASSERT_NE(c, nullptr);
    ASSERT_OK(c->Protect(1, mem_, kBytes));
    std::memset(mem_, 9, kBytes);
    ASSERT_OK(c->Checkpoint(kName, 1));
    EXPECT_EQ(c->GetStats().zero_copy.versions, 1u) << c->GetStats().zero_copy.note;
    ASSERT_OK(c->Close());
  }
  EXPECT_EQ(ProtectedPages(mem_, kBytes, GetParam()), 0u);
  std::memset(mem_, 1, kBytes);
  auto c = OpenClient(config);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  ASSERT_OK(c->Restore(kName, 1));
  EXPECT_EQ(mem_[kBytes - 1], 9);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, ZeroCopyCloseTest,
                         ::testing::Values(WriteProtectMode::kUserfaultfd, WriteProtectMode::kMprotect));

sigjmp_buf g_jump;
std::atomic<int> g_app_segvs{0};
void AppSegv(int) {
  g_app_segvs.fetch_add(1);
  siglongjmp(g_jump, 1);
}

// The application's own SIGSEGV handler keeps working during an epoch
// (userfaultfd faults never raise signals; nothing is chained or replaced).
TEST_F(ZeroCopyClientTest, ApplicationSegvHandlerStillWorks) {
  g_app_segvs = 0;  // counts from here (--gtest_repeat, other tests)
  struct sigaction sa {}, old {};
  sa.sa_handler = AppSegv;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(::sigaction(SIGSEGV, &sa, &old), 0);
  void* guard = ::mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(guard, MAP_FAILED);
  Config config = MakeConfig(1 * kMiB, 64 * kKiB);
  config.capture = CaptureMode::kZeroCopy;
  auto c = OpenClient(config);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  ASSERT_OK(c->Checkpoint(kName, 1));
  if (sigsetjmp(g_jump, 1) == 0) {
    *static_cast<volatile uint8_t*>(guard) = 1;  // the application's own fault
  }
  EXPECT_EQ(g_app_segvs.load(), 1);
  Store(mem_, 1);  // a zero-copy fault: handled without a signal
  EXPECT_EQ(g_app_segvs.load(), 1);
  ASSERT_OK(c->Close());
  ::sigaction(SIGSEGV, &old, nullptr);
  ::munmap(guard, kPage);
}

// mprotect: the application's plain (not SA_SIGINFO) handler, installed
// before the client, gets its own faults during an epoch and none of
// Cairn's; the versions are zero-copy and exact. In a child: the SIGSEGV
// handler is process-wide and installed once.
TEST_F(ZeroCopyClientTest, MprotectChainsToTheApplicationsPlainHandler) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(60);
    os::segv::UninstallForTest();  // an earlier test may have installed it
    g_app_segvs = 0;               // and counted its own faults
    struct sigaction sa {};
    sa.sa_handler = AppSegv;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, nullptr);
    void* guard = ::mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Config config = MakeConfig(256 * kKiB, 64 * kKiB);
    config.capture = CaptureMode::kZeroCopy;
    config.write_protect = WriteProtectMode::kMprotect;
    config.cow_fraction = 0.05;
    auto c = Client::Open(config);
    if (!c.ok()) ::_exit(10);
    if (!(*c)->Protect(1, mem_, kBytes).ok()) ::_exit(11);
    std::memset(mem_, 2, kBytes);
    if (!(*c)->Checkpoint(kName, 1).ok()) ::_exit(12);
    if (sigsetjmp(g_jump, 1) == 0) *static_cast<volatile uint8_t*>(guard) = 1;
    if (g_app_segvs.load() != 1) ::_exit(13);
    for (size_t o = 0; o < kBytes; o += kPage) Store(mem_ + o, 3);  // Cairn's faults (ORANGE or RED)
    if (g_app_segvs.load() != 1) ::_exit(14);
    if (!(*c)->Wait(kName, 1, Level::kLocal).ok()) ::_exit(15);
    const Stats s = (*c)->GetStats();
    if (s.zero_copy.versions != 1 || s.zero_copy.fallbacks != 0 || s.zero_copy.faults == 0) ::_exit(16);
    if (!(*c)->Restore(kName, 1).ok() || mem_[0] != 2 || mem_[kBytes - 1] != 2) ::_exit(17);
    if (!(*c)->Close().ok()) ::_exit(18);
    ::_exit(g_app_segvs.load() == 1 ? 0 : 19);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace cairn
