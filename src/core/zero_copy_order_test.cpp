// The learned flush order: the rank computation on fabricated epochs, and a
// reader and a writer in lock-step (gates, no timing) over real
// write-protected memory, where the writer goes through its pages in reverse.
#include "core/zero_copy_order.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/source_pieces.hpp"
#include "os/memory.hpp"

namespace cairn::core {
namespace {

TEST(FlushOrderTest, RedThenOrangeThenGreenByFirstWriteTiesByReadOrder) {
  // Pages 0..6 of a fabricated previous epoch.
  std::vector<PageSeen> seen(7);
  seen[0] = {PageColor::kGreen, 0, 0};
  seen[1] = {PageColor::kGreen, 0, 1};
  seen[2] = {PageColor::kOrange, 9, 5};
  seen[3] = {PageColor::kRed, 4, 6};
  seen[4] = {PageColor::kOrange, 2, 4};
  seen[5] = {PageColor::kRed, 7, 2};
  seen[6] = {PageColor::kNone, 0, 0};
  const std::vector<uint32_t> rank = RankPages(seen);
  // RED by first write (3: 4, 5: 7), ORANGE by first write (4: 2, 2: 9),
  // GREEN by read order (0, 1), then pages with no color.
  const std::vector<uint32_t> want = {4, 5, 3, 0, 2, 1, 6};
  EXPECT_EQ(rank, want);
}

TEST(FlushOrderTest, BlocksByKeyTiesKeepIndexOrder) {
  EXPECT_EQ(OrderByKey({5, 1, FlushHistory::kUnknown, 1, 0}), (std::vector<uint32_t>{4, 1, 3, 0, 2}));
}

TEST(FlushOrderTest, HistoryLooksPagesUpByAddress) {
  FlushHistory h;
  EXPECT_EQ(h.RankOf(0x10000), FlushHistory::kUnknown);
  std::vector<PageSeen> seen(3);
  seen[0] = {PageColor::kGreen, 0, 0};
  seen[1] = {PageColor::kGreen, 0, 1};
  seen[2] = {PageColor::kRed, 1, 2};
  h.Learn({{0x10000, 2 * 4096, 0}, {0x40000, 4096, 2}}, seen, 4096);
  EXPECT_EQ(h.RankOf(0x40000), 0u);
  EXPECT_EQ(h.RankOf(0x10000), 1u);
  EXPECT_EQ(h.RankOf(0x11000), 2u);
  EXPECT_EQ(h.RankOf(0x12000), FlushHistory::kUnknown);
  EXPECT_EQ(h.RankOf(0x0f000), FlushHistory::kUnknown);
}

void Store(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED); }
template <typename F>
void Until(F cond) {
  while (!cond()) std::this_thread::yield();
}

struct EpochCounts {
  uint64_t red = 0, orange = 0;
};

// One block per page. Each epoch: the reader reads one block, then lets the
// writer make one write (to pages n-1, n-2, ..., 0) and waits until it is
// done or trapped as RED; a RED writer gets no new write until its page is
// read. What is read must equal memory at Begin.
class LockStepTest : public ::testing::TestWithParam<double> {
 protected:
  static constexpr size_t kPages = 64;
  void SetUp() override {
    page_ = os::PageSize();
    mem_ = static_cast<uint8_t*>(::mmap(nullptr, kPages * page_, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem_, MAP_FAILED);
    for (size_t o = 0; o < kPages * page_; o += 8) Store(mem_ + o, o | 1);
  }
  void TearDown() override {
    zc_.reset();
    if (mem_ != MAP_FAILED) ::munmap(mem_, kPages * page_);
  }
  // Runs `epochs` epochs; returns RED/ORANGE counts of each.
  std::vector<EpochCounts> Run(bool learned, int epochs);

  size_t page_ = 4096;
  uint8_t* mem_ = static_cast<uint8_t*>(MAP_FAILED);
  std::unique_ptr<ZeroCopy> zc_;
};

std::vector<EpochCounts> LockStepTest::Run(bool learned, int epochs) {
  auto z = ZeroCopy::Create(GetParam());
  if (!z.ok()) {
    ADD_FAILURE() << z.status().ToString();
    return {};
  }
  zc_ = std::move(z).value();
  const size_t bytes = kPages * page_;
  format::Layout layout =
      format::Layout::Make({format::RegionSpec{1, MemoryKind::kHost, bytes}}, static_cast<uint32_t>(page_));
  std::vector<CaptureSource> sources{CaptureSource{layout.regions[0].spec, mem_, std::nullopt}};
  const std::vector<uint64_t> packed = PackedStarts(layout);
  std::vector<EpochCounts> out;
  for (int ep = 0; ep < epochs; ++ep) {
    std::vector<uint8_t> want(mem_, mem_ + bytes), got(bytes);
    const ZeroCopyCounters before = zc_->counters();
    EXPECT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
    ZeroCopyOrder order(layout, sources, packed, zc_.get(), learned);
    std::atomic<size_t> go{0}, done{0};
    std::jthread writer([&] {
      for (size_t k = 0; k < kPages; ++k) {
        Until([&] { return go.load() > k; });
        Store(mem_ + (kPages - 1 - k) * page_, (uint64_t{1} << 63) | (uint64_t(ep) << 32) | k);
        done.store(k + 1);
      }
    });
    size_t given = 0;
    bool blocked = false;
    while (const std::optional<uint32_t> b = order.Next()) {
      EXPECT_TRUE(zc_->Read(mem_ + *b * page_, got.data() + *b * page_, page_).ok());
      if (blocked && *b == kPages - given) {  // its page was read: the writer goes on
        Until([&] { return done.load() == given; });
        blocked = false;
      }
      if (!blocked && given < kPages) {
        const uint64_t red = zc_->counters().red;
        go.store(++given);
        Until([&] { return done.load() == given || zc_->counters().red > red; });
        blocked = done.load() != given;
      }
    }
    EXPECT_FALSE(blocked);
    zc_->End();
    go.store(kPages);  // epochs with a RED at the end: the rest is unprotected now
    writer.join();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << "epoch " << ep;
    const ZeroCopyCounters after = zc_->counters();
    out.push_back({after.red - before.red, after.orange - before.orange});
  }
  return out;
}

// Address order pays a trapped write every epoch; the learned order pays in
// the first epoch only (no history), then reads pages just ahead of the writer.
TEST_P(LockStepTest, ReversedWritesLearnedOrderStopsTrappingAfterOneEpoch) {
  const std::vector<EpochCounts> address = Run(false, 3);
  const std::vector<EpochCounts> learned = Run(true, 3);
  ASSERT_EQ(address.size(), 3u);
  ASSERT_EQ(learned.size(), 3u);
  for (int ep = 1; ep < 3; ++ep) {
    EXPECT_GE(address[ep].red + address[ep].orange, 1u) << "epoch " << ep;
    EXPECT_EQ(learned[ep].red + learned[ep].orange, 0u) << "epoch " << ep;
  }
  if (GetParam() == 0) {
    EXPECT_EQ(learned[0].orange + learned[1].orange, 0u);
  }
}

// The handler numbers first writes: pages copied into slots in the order
// 5, 3, 7 and read in address order rank 5, 3, 7 next epoch (by first write,
// not by read order), after the page that waited (RED ranks first).
TEST_P(LockStepTest, HistoryRanksByFirstWriteNotReadOrder) {
  auto z = ZeroCopy::Create(0.05);  // COW slots whatever the parameter
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  zc_ = std::move(z).value();
  const size_t bytes = kPages * page_;
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  for (const size_t p : {5, 3, 7}) Store(mem_ + p * page_, 7);  // ORANGE each (16 slots)
  std::vector<uint8_t> got(bytes);
  EXPECT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
  zc_->End();
  EXPECT_EQ(zc_->counters().orange, 3u);
  const FlushHistory& h = zc_->history();
  auto rank = [&](size_t p) { return h.RankOf(reinterpret_cast<uintptr_t>(mem_ + p * page_)); };
  EXPECT_EQ(rank(5), 0u);
  EXPECT_EQ(rank(3), 1u);
  EXPECT_EQ(rank(7), 2u);
  EXPECT_EQ(rank(0), 3u);  // then GREEN pages in read order
  EXPECT_EQ(rank(4), 6u);  // 0, 1, 2, 4, 6, 8, ...
  EXPECT_EQ(rank(8), 8u);
}

INSTANTIATE_TEST_SUITE_P(Cow, LockStepTest, ::testing::Values(0.0, 0.05));

}  // namespace
}  // namespace cairn::core
