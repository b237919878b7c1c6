// The learned flush order: the rank computation on fabricated epochs, and a
// reader and a writer in lock-step (gates, no timing) over real
// write-protected memory, where the writer goes through its pages in reverse.
#include "capture/zero_copy/zero_copy_order.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/source_pieces.hpp"
#include "os/mem/memory.hpp"
#include "os/protect/write_protect.hpp"

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

// RankPages is a radix sort: it must equal the comparison sort it replaced
// (stable by page index) on random epochs whose fields use every digit,
// including first_write 0 (no trapped write: after those with one) and the
// values that differ only in a high digit.
TEST(FlushOrderTest, RankPagesEqualsAStableSortByColorFirstWriteReadPos) {
  std::mt19937 rng(7);
  for (const size_t n : {size_t{1}, size_t{300}, size_t{70000}}) {
    std::vector<PageSeen> seen(n);
    for (PageSeen& p : seen) {
      p.color = static_cast<PageColor>(rng() % 5);
      const uint32_t pick = rng() % 4;
      p.first_write = pick == 0 ? 0u : pick == 1 ? (rng() % 3) << 16 : pick == 2 ? ~0u - rng() % 2 : rng();
      p.read_pos = rng() % 2 == 0 ? rng() % 8 : rng() % 3 << 16 | rng() % 2;
    }
    std::vector<uint32_t> by(n);
    std::iota(by.begin(), by.end(), 0u);
    auto key = [&](uint32_t i) {
      return std::tuple(static_cast<uint8_t>(seen[i].color), seen[i].first_write - 1u, seen[i].read_pos);
    };
    std::stable_sort(by.begin(), by.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    std::vector<uint32_t> want(n);
    for (uint32_t r = 0; r < n; ++r) want[by[r]] = r;
    uint32_t red = ~0u;
    EXPECT_EQ(RankPages(seen, &red), want) << n << " pages";
    EXPECT_EQ(red, std::count_if(seen.begin(), seen.end(), [](const PageSeen& p) { return p.color == PageColor::kRed; }))
        << n << " pages";
  }
  // The color pass is skipped when every page has one color: all RED, or none.
  for (const PageColor c : {PageColor::kRed, PageColor::kGreen}) {
    uint32_t red = ~0u;
    (void)RankPages(std::vector<PageSeen>(5, PageSeen{c, 0, 0}), &red);
    EXPECT_EQ(red, c == PageColor::kRed ? 5u : 0u);
  }
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
  EXPECT_EQ(h.red_pages(), 1u);
}

// An epoch's first writes in page order 0..n-1 (forward) or n-1..0, every
// page ORANGE (written before its read).
std::vector<PageSeen> WrittenInOrder(size_t n, bool reversed) {
  std::vector<PageSeen> seen(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t at = reversed ? n - 1 - i : i;
    seen[at] = {PageColor::kOrange, static_cast<uint32_t>(i + 1), static_cast<uint32_t>(at)};
  }
  return seen;
}

std::vector<uint32_t> Forward(size_t n) {
  std::vector<uint32_t> r(n);
  std::iota(r.begin(), r.end(), 0u);
  return r;
}

TEST(FlushOrderTest, ScoresSayWhichForecastTheFirstWritesFollowed) {
  const size_t n = 100;
  std::vector<uint32_t> backward = Forward(n);
  std::reverse(backward.begin(), backward.end());
  auto score = [&](const std::vector<uint32_t>& prior, bool reversed) {
    const std::optional<OrderScores> s = ScoreOrders(prior, WrittenInOrder(n, reversed));
    EXPECT_TRUE(s.has_value());
    return s.value_or(OrderScores{-1, -1});
  };
  OrderScores s = score(Forward(n), false);  // a sweep: both forecast it
  EXPECT_EQ(s.learned, 1.0);
  EXPECT_EQ(s.address, 1.0);
  s = score(backward, true);  // reversed, as last epoch: only the ranks forecast it
  EXPECT_EQ(s.learned, 1.0);
  EXPECT_EQ(s.address, 0.0);
  s = score(backward, false);  // flipped since last epoch: only address order does
  EXPECT_EQ(s.learned, 0.0);
  EXPECT_EQ(s.address, 1.0);
  // Pages not written do not count; too few written pages give no score.
  std::vector<PageSeen> few = WrittenInOrder(n, false);
  for (size_t i = kMinScoredWrites - 1; i < n; ++i)
    few[i] = {PageColor::kGreen, 0, static_cast<uint32_t>(i)};
  EXPECT_FALSE(ScoreOrders(Forward(n), few).has_value());
  few[n - 1] = {PageColor::kBlue, 1000, static_cast<uint32_t>(n - 1)};
  ASSERT_TRUE(ScoreOrders(Forward(n), few).has_value());
  EXPECT_EQ(ScoreOrders(Forward(n), few)->address, 1.0);
  // A prior of other ranges cannot be scored.
  EXPECT_FALSE(ScoreOrders(Forward(n - 1), WrittenInOrder(n, false)).has_value());
}

// Learn scores every epoch over the same ranges. After two scored epochs,
// the ranks are kept only where they forecast clearly better than address
// order: a steady reversed order keeps them; a forward sweep (address order
// forecasts it as well) and an order that flips between epochs fall back.
// Epochs that follow address order are not scored, and after kProbeAfter of
// them the learned order is tried again.
TEST(FlushOrderTest, HistoryPrefersAddressOrderForAFlippingOrderThenProbesAgain) {
  const size_t n = 128;
  const std::vector<FlushHistory::Range> ranges = {{0x100000, n * 4096, 0}};
  for (const int pattern : {0, 1, 2}) {  // forward, reversed, flipping
    FlushHistory h;
    for (int ep = 0; ep < 6; ++ep) {
      h.Learn(ranges, WrittenInOrder(n, pattern == 1 || (pattern == 2 && ep % 2 == 1)), 4096);
      EXPECT_EQ(h.scored_epochs(), static_cast<uint32_t>(ep)) << pattern;  // the first has no prior
      EXPECT_EQ(h.PrefersAddressOrder(), pattern != 1 && ep >= 2)
          << "pattern " << pattern << " epoch " << ep;
    }
  }
  FlushHistory h;
  for (int ep = 0; ep < 3; ++ep) h.Learn(ranges, WrittenInOrder(n, ep % 2 == 1), 4096);
  ASSERT_TRUE(h.PrefersAddressOrder());
  for (uint32_t ep = 1; ep < FlushHistory::kProbeAfter; ++ep) {
    h.Learn(ranges, WrittenInOrder(n, ep % 2 == 0), 4096, /*followed_address=*/true);
    EXPECT_TRUE(h.PrefersAddressOrder()) << ep;
  }
  h.Learn(ranges, WrittenInOrder(n, false), 4096, /*followed_address=*/true);
  EXPECT_FALSE(h.PrefersAddressOrder());
  EXPECT_EQ(h.scored_epochs(), 0u);
  // Other ranges start afresh.
  for (int ep = 0; ep < 3; ++ep) h.Learn(ranges, WrittenInOrder(n, ep % 2 == 1), 4096);
  ASSERT_TRUE(h.PrefersAddressOrder());
  h.Learn({{0x200000, n * 4096, 0}}, WrittenInOrder(n, false), 4096);
  EXPECT_FALSE(h.PrefersAddressOrder());
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
  // A userfaultfd engine in zc_, watching or not: the reason when this kernel
  // cannot write-protect (the test skips with it), else empty.
  std::string UseUffd(bool watch) {
    auto z = ZeroCopy::Create(GetParam(), WriteProtectMode::kUserfaultfd, watch);
    if (!z.ok()) return "userfaultfd write-protection unavailable: " + z.status().ToString();
    zc_ = std::move(z).value();
    return "";
  }
  // One epoch over every page: Begin, read them all into `got`, End.
  void ReadEpoch(std::vector<uint8_t>& got) {
    ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, kPages * page_, {}}}).ok());
    ASSERT_TRUE(zc_->Read(mem_, got.data(), kPages * page_).ok());
    zc_->End();
  }
  // The planned block order of the epoch after the one `first` runs, with
  // an engine of cow_fraction over mem_ in blocks of kBlockPages pages.
  static constexpr size_t kBlockPages = 4;
  struct OneRegion {
    format::Layout layout;
    std::vector<CaptureSource> sources;
  };
  void NewEngine(double cow_fraction) {  // zc_
    auto z = ZeroCopy::Create(cow_fraction);
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    zc_ = std::move(z).value();
  }
  // One region over mem_ (kPages pages) in blocks of kBlockPages pages.
  OneRegion Blocks() const {
    OneRegion r{format::Layout::Make({format::RegionSpec{1, MemoryKind::kHost, kPages * page_}},
                                     static_cast<uint32_t>(kBlockPages * page_)),
                {}};
    r.sources.push_back(CaptureSource{r.layout.regions[0].spec, mem_, std::nullopt});
    return r;
  }
  template <typename F>
  std::vector<uint32_t> OrderAfter(double cow_fraction, F first) {
    auto z = ZeroCopy::Create(cow_fraction);
    EXPECT_TRUE(z.ok()) << z.status().ToString();
    if (!z.ok()) return {};
    zc_ = std::move(z).value();
    const size_t bytes = kPages * page_;
    const OneRegion blocks = Blocks();
    const format::Layout& layout = blocks.layout;
    const std::vector<CaptureSource>& sources = blocks.sources;
    EXPECT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
    first();
    std::vector<uint8_t> got(bytes);
    EXPECT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
    zc_->End();
    EXPECT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
    std::vector<uint32_t> planned =
        ZeroCopyOrder(layout, sources, PackedStarts(layout), zc_.get(), /*learned=*/true).planned();
    zc_->End();
    return planned;
  }
  // Pages of mem_ still write-protected by userfaultfd.
  uint64_t ProtectedPages() {
    auto r = os::CountUffdProtectedPages(mem_, kPages * page_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ~uint64_t{0};
  }

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

// Under address order (learn = false) nobody reads the history: the epoch's
// record is dropped, not ranked and scored, and the next epoch still runs.
TEST_P(LockStepTest, AddressOrderLearnsNoHistory) {
  auto z = ZeroCopy::Create(0.05, WriteProtectMode::kAuto, /*watch=*/false, 1, /*learn=*/false);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  zc_ = std::move(z).value();
  const size_t bytes = kPages * page_;
  for (int ep = 0; ep < 2; ++ep) {
    const std::vector<uint8_t> want(mem_, mem_ + bytes);
    ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
    for (const size_t p : {5, 3, 7}) Store(mem_ + p * page_, 7 + ep);
    std::vector<uint8_t> got(bytes);
    EXPECT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
    zc_->End();
    EXPECT_TRUE(got == want) << "epoch " << ep << " reads memory as it was at Begin";
    EXPECT_TRUE(zc_->history().empty()) << "epoch " << ep;
  }
  EXPECT_EQ(zc_->counters().orange, 6u);
}

// A block is ranked by the median of its pages' ranks: one stray first write
// per block last epoch (an irregular pattern) does not pull the block ahead.
// Blocks of 4 pages; one page of every odd block was written before the
// read, in the order 15, 13, ..., 1 (ORANGE: ranks 0-7); the rest are GREEN
// in address order. By each block's earliest page the next order would be
// 15, 13, ..., 1, 0, 2, ...; by the median it stays 0, 1, ..., 15.
TEST_P(LockStepTest, OneStrayFirstWritePerBlockDoesNotMoveItsBlock) {
  const size_t blocks = kPages / kBlockPages;
  const std::vector<uint32_t> planned = OrderAfter(0.05, [&] {  // COW slots whatever the parameter
    for (size_t b = blocks - 1; b < blocks; b -= 2) Store(mem_ + (b * kBlockPages + 1) * page_, 7);
  });
  EXPECT_EQ(zc_->counters().orange, blocks / 2);
  std::vector<uint32_t> want(blocks);
  std::iota(want.begin(), want.end(), 0u);
  EXPECT_EQ(planned, want);
}

// A page the application waited for (RED) still takes its block to the
// front: one RED write in block 15 (no COW buffer) puts block 15 first.
TEST_P(LockStepTest, ARedPageTakesItsBlockFirst) {
  std::jthread writer;
  const std::vector<uint32_t> planned = OrderAfter(0, [&] {
    writer = std::jthread([&] { Store(mem_ + (15 * kBlockPages + 1) * page_, 7); });  // waits for its read
    Until([&] { return zc_->counters().red == 1; });
  });
  writer.join();
  std::vector<uint32_t> want{15};
  for (uint32_t b = 0; b < 15; ++b) want.push_back(b);
  EXPECT_EQ(planned, want);
}

// What the reader asks before it picks a block (Pipeline::Capturer::HoldRoom): a RED
// page waits in the queue (RedWaiting, the learned order only) until Next
// takes its block; Done once every block was handed out.
TEST_P(LockStepTest, RedWaitingUntilNextTakesItsBlockAndDoneAfterTheLast) {
  ASSERT_NO_FATAL_FAILURE(NewEngine(0));  // no COW slot: every early first write is RED
  const size_t bytes = kPages * page_;
  const OneRegion blocks = Blocks();
  const format::Layout& layout = blocks.layout;
  const std::vector<CaptureSource>& sources = blocks.sources;
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  ZeroCopyOrder address(layout, sources, PackedStarts(layout), zc_.get(), /*learned=*/false);
  ZeroCopyOrder order(layout, sources, PackedStarts(layout), zc_.get(), /*learned=*/true);
  EXPECT_TRUE(order.WantsSpares());  // no COW slot: any first write goes RED
  EXPECT_FALSE(address.WantsSpares());
  EXPECT_FALSE(order.RedWaiting());
  std::jthread writer([&] { Store(mem_ + (9 * kBlockPages + 2) * page_, 7); });  // waits for its read
  Until([&] { return zc_->counters().red == 1; });
  EXPECT_TRUE(order.RedWaiting());
  EXPECT_FALSE(address.RedWaiting());
  EXPECT_EQ(order.Next(), std::optional<uint32_t>(9));
  EXPECT_FALSE(order.RedWaiting());
  std::vector<uint8_t> got(kBlockPages * page_);
  ASSERT_TRUE(zc_->Read(mem_ + 9 * kBlockPages * page_, got.data(), got.size()).ok());  // releases the writer
  writer.join();
  size_t handed = 1;
  while (!order.Done()) {
    ASSERT_TRUE(order.Next().has_value());
    ++handed;
  }
  EXPECT_EQ(handed, kPages / kBlockPages);
  EXPECT_EQ(order.Next(), std::nullopt);
  zc_->End();
}

// An ORANGE page (its write did not wait) takes its block to the front only
// without history (in trap order) or while more than half of the COW slots
// are in use (then the soonest planned such block): a stray write must not
// break the planned order. 16 slots (the floor), blocks of 4 pages.
// Epoch 1 (no history): a write in block 15 makes it first. Epoch 2: a
// write in the 14th planned block leaves the planned order alone; once 9
// pages are in slots (8 more in the 3rd and 4th planned blocks), the 3rd
// planned block goes next: not the 2nd (the plan), nor the 14th (trap order).
TEST_P(LockStepTest, AnOrangePageJumpsTheQueueOnlyWithoutHistoryOrUnderCowPressure) {
  ASSERT_NO_FATAL_FAILURE(NewEngine(0.05));  // COW slots whatever the parameter
  const size_t bytes = kPages * page_;
  const OneRegion blocks = Blocks();
  const format::Layout& layout = blocks.layout;
  const std::vector<CaptureSource>& sources = blocks.sources;
  std::vector<uint8_t> got(bytes);
  auto read = [&](uint32_t b) {
    const size_t at = b * kBlockPages * page_;
    EXPECT_TRUE(zc_->Read(mem_ + at, got.data() + at, kBlockPages * page_).ok());
  };
  auto write = [&](size_t block, size_t page) { Store(mem_ + (block * kBlockPages + page) * page_, 7); };

  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  ZeroCopyOrder first(layout, sources, PackedStarts(layout), zc_.get(), /*learned=*/true);
  write(15, 1);
  std::optional<uint32_t> b = first.Next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, 15u) << "without history an ORANGE page's block goes first";
  for (; b; b = first.Next()) read(*b);
  zc_->End();

  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  ZeroCopyOrder second(layout, sources, PackedStarts(layout), zc_.get(), /*learned=*/true);
  const std::vector<uint32_t> planned = second.planned();
  EXPECT_FALSE(second.WantsSpares()) << "no COW slot in use: no first write goes RED soon";
  write(planned[13], 2);  // 1 of 16 slots
  b = second.Next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, planned[0]) << "an ORANGE page moved the planned order while the COW buffer had room";
  read(*b);
  for (size_t k = 0; k < 8; ++k) write(planned[2 + k / kBlockPages], k % kBlockPages);  // 9 of 16 slots
  ASSERT_EQ(zc_->counters().orange, 10u);  // 1 in epoch 1, 9 now
  EXPECT_TRUE(second.WantsSpares()) << "over half of the COW slots in use";
  b = second.Next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, planned[2]) << "over half of the COW slots in use: the soonest planned ORANGE block goes next";
  for (; b; b = second.Next()) read(*b);
  zc_->End();
}

// Watching (learned order, userfaultfd): pages read before any write stay
// protected; their first writes are trapped, GREEN in write order while the
// epoch runs and BLUE once its last page was read, and the next epoch reads them in
// that order: GREEN 9, 2, 5, then BLUE 12, 1, then the pages never written
// (in the last read order), which rank last. One fault per watched first
// write (watch_faults); a second write to the page does not fault.
TEST_P(LockStepTest, WatchedFirstWritesAfterTheReadAreGreenThenBlueInOrder) {
  if (const std::string why = UseUffd(/*watch=*/true); !why.empty()) GTEST_SKIP() << why;
  const size_t bytes = kPages * page_;
  format::Layout layout =
      format::Layout::Make({format::RegionSpec{1, MemoryKind::kHost, bytes}}, static_cast<uint32_t>(page_));
  std::vector<CaptureSource> sources{CaptureSource{layout.regions[0].spec, mem_, std::nullopt}};
  const std::vector<uint64_t> packed = PackedStarts(layout);
  std::vector<uint8_t> got(bytes);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  const std::vector<uint8_t> want(mem_, mem_ + bytes);
  const size_t last = bytes - page_;  // the last page is read after the GREEN writes
  ASSERT_TRUE(zc_->Read(mem_, got.data(), last).ok());
  EXPECT_EQ(ProtectedPages(), kPages) << "read pages stay protected until their first write";
  for (const size_t p : {9, 2, 5}) Store(mem_ + p * page_, 100 + p);  // GREEN: read, then written
  Store(mem_ + 9 * page_ + 8, 1);                                      // a second write: no fault
  EXPECT_EQ(zc_->counters().watch_faults, 3u);
  EXPECT_EQ(zc_->counters().blue, 0u);
  EXPECT_EQ(ProtectedPages(), kPages - 3);
  ASSERT_TRUE(zc_->in_epoch());
  ASSERT_TRUE(zc_->Read(mem_ + last, got.data() + last, page_).ok());
  EXPECT_FALSE(zc_->in_epoch()) << "reading the last page completes the version";
  zc_->End();
  EXPECT_TRUE(zc_->watching());
  EXPECT_FALSE(zc_->in_epoch());
  EXPECT_EQ(ProtectedPages(), kPages - 3) << "the watch goes on after End";
  for (const size_t p : {12, 1}) Store(mem_ + p * page_, 200 + p);  // BLUE: after the version completed
  EXPECT_EQ(zc_->counters().watch_faults, 5u);
  EXPECT_EQ(zc_->counters().blue, 2u);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);

  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());  // ends the watch, learns it
  const ZeroCopyOrder order(layout, sources, packed, zc_.get(), /*learned=*/true);
  const std::vector<uint32_t> head(order.planned().begin(), order.planned().begin() + 7);
  EXPECT_EQ(head, (std::vector<uint32_t>{9, 2, 5, 12, 1, 0, 3}));
  ASSERT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
  zc_->End();
  zc_->StopWatching();
  EXPECT_FALSE(zc_->watching());
  EXPECT_EQ(ProtectedPages(), 0u) << "StopWatching removes the protection";
  Store(mem_, 1);  // would hang if still protected with no handler deciding
}

// A watch group of 8 pages: the first write to a read page releases the
// watched pages of its aligned group of 8 with one fault, numbered as that
// write; a page of the group not read yet stays protected (and is read as
// it was at Begin). Written reports the whole group. With groups, an epoch
// watches only when the last one trapped more first writes than it has
// groups (8 here): the first epoch does not; after 10 ORANGE writes the
// second does; after none, the third does not.
TEST_P(LockStepTest, WatchGroupReleasesTheGroupsWatchedPagesWithOneFault) {
  auto z = ZeroCopy::Create(1.0, WriteProtectMode::kUserfaultfd, /*watch=*/true, /*watch_group=*/8);
  if (!z.ok()) GTEST_SKIP() << "userfaultfd write-protection unavailable: " << z.status().ToString();
  zc_ = std::move(z).value();
  const size_t bytes = kPages * page_;
  std::vector<uint8_t> got(bytes);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  for (size_t p = 30; p < 40; ++p) Store(mem_ + p * page_, 5);  // 10 ORANGE
  ASSERT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
  zc_->End();
  EXPECT_FALSE(zc_->watching()) << "the first epoch does not watch";
  EXPECT_EQ(zc_->counters().orange, 10u);

  size_t g = 8;  // the first page >= 8 that starts an aligned group of 8
  while (reinterpret_cast<uintptr_t>(mem_ + g * page_) % (8 * page_) != 0) ++g;
  const std::vector<uint8_t> want(mem_, mem_ + bytes);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  const size_t head = (g + 5) * page_;  // pages g+5 .. g+7 of the group are not read yet
  ASSERT_TRUE(zc_->Read(mem_, got.data(), head).ok());
  Store(mem_ + (g + 2) * page_, 1);  // releases g .. g+4
  EXPECT_EQ(zc_->counters().watch_faults, 1u);
  EXPECT_EQ(ProtectedPages(), kPages - 5);
  for (const size_t p : {g, g + 1, g + 3, g + 4}) Store(mem_ + p * page_ + 8, 2);  // released already
  ASSERT_TRUE(zc_->Read(mem_ + head, got.data() + head, bytes - head).ok());
  zc_->End();
  EXPECT_TRUE(zc_->watching()) << "10 traps last epoch, 8 groups";
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << "unread pages of the group kept their bytes";
  Store(mem_ + (g + 6) * page_, 3);  // the rest of the group, read since: one more fault
  EXPECT_EQ(zc_->counters().watch_faults, 2u);
  EXPECT_EQ(ProtectedPages(), kPages - 8);
  auto written = zc_->Written(mem_, bytes);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, (ExtentList{Extent{g * page_, 8 * page_}}));

  ASSERT_NO_FATAL_FAILURE(ReadEpoch(got));  // no trap in the second epoch: no watch in the third
  EXPECT_FALSE(zc_->watching());
  EXPECT_EQ(ProtectedPages(), 0u);

  // Traps that do not grow (more than 1.5x) over the epoch before's are not
  // watched: noise no order predicts.
  auto trapped_epoch = [&] {  // 10 ORANGE, then every page read
    ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
    for (size_t p = 30; p < 40; ++p) Store(mem_ + p * page_, 6);
    ASSERT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
    zc_->End();
  };
  ASSERT_NO_FATAL_FAILURE(trapped_epoch());
  EXPECT_FALSE(zc_->watching()) << "no trap in the epoch before";
  ASSERT_NO_FATAL_FAILURE(trapped_epoch());
  EXPECT_TRUE(zc_->watching()) << "10 traps after 0";
  ASSERT_NO_FATAL_FAILURE(trapped_epoch());
  EXPECT_FALSE(zc_->watching()) << "10 traps after 10";
  EXPECT_EQ(ProtectedPages(), 0u);
}

// Written (checkpoint.changes = pages): the pages written since the watched
// epoch's Begin; a write after Written looked (during the next checkpoint
// call) is reported by the next epoch's Written. A watching Begin of a
// layered version protects the whole range: a page outside its extents is
// watched (its write is recorded and goes through, it is not read).
TEST_P(LockStepTest, WrittenReportsPagesWrittenSinceBeginAndLateOnesNextTime) {
  if (const std::string why = UseUffd(/*watch=*/true); !why.empty()) GTEST_SKIP() << why;
  const size_t bytes = kPages * page_;
  auto pages_of = [&](Result<ExtentList> r) {
    std::vector<uint64_t> out;
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const Extent& x : *r) {
        for (uint64_t o = x.offset; o < x.end(); o += page_) out.push_back(o / page_);
      }
    }
    return out;
  };
  EXPECT_FALSE(zc_->Written(mem_, bytes).ok()) << "no epoch yet: nothing known";
  std::vector<uint8_t> got(bytes);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  std::jthread early([&] {  // before or after their read (RED with no COW slot: waits for it)
    Store(mem_ + 3 * page_, 1);
    Store(mem_ + 7 * page_, 1);
  });
  ASSERT_TRUE(zc_->Read(mem_, got.data(), bytes - page_).ok());
  early.join();
  EXPECT_FALSE(zc_->Written(mem_, bytes).ok()) << "the epoch is still in progress";
  ASSERT_TRUE(zc_->Read(mem_ + bytes - page_, got.data() + bytes - page_, page_).ok());
  zc_->End();
  Store(mem_ + 40 * page_, 1);  // BLUE
  EXPECT_EQ(pages_of(zc_->Written(mem_, bytes)), (std::vector<uint64_t>{3, 7, 40}));
  EXPECT_FALSE(zc_->Written(mem_, bytes / 2).ok()) << "not a range of the epoch";
  Store(mem_ + 9 * page_, 1);  // late: after Written, before the next Begin

  // The next version stores pages 3, 7 and 40 only.
  const std::vector<uint8_t> want(mem_, mem_ + bytes);
  const ExtentList stored{Extent{3 * page_, page_}, Extent{7 * page_, page_}, Extent{40 * page_, page_}};
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, stored}}).ok());
  EXPECT_EQ(ProtectedPages(), kPages) << "a watching epoch protects the whole range";
  Store(mem_ + 20 * page_, 2);  // not stored: watched, goes through
  for (const Extent& x : stored) ASSERT_TRUE(zc_->Read(mem_ + x.offset, got.data() + x.offset, page_).ok());
  for (const Extent& x : stored) EXPECT_EQ(std::memcmp(got.data() + x.offset, want.data() + x.offset, page_), 0);
  EXPECT_FALSE(zc_->Read(mem_ + 20 * page_, got.data(), page_).ok()) << "not part of the version";
  zc_->End();
  EXPECT_TRUE(zc_->watching());
  EXPECT_EQ(pages_of(zc_->Written(mem_, bytes)), (std::vector<uint64_t>{9, 20}));
}

// A write from another thread during the checkpoint call, after Written
// looked and before the new epoch protects (no epoch is live then), is not
// in this version, so the next Written must report it.
TEST_P(LockStepTest, AWriteBetweenTheWatchAndTheNextEpochIsReportedNextTime) {
  if (const std::string why = UseUffd(/*watch=*/true); !why.empty()) GTEST_SKIP() << why;
  const size_t bytes = kPages * page_;
  std::vector<uint8_t> got(bytes);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
  ASSERT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
  zc_->End();
  Store(mem_ + 5 * page_, 1);
  auto written = zc_->Written(mem_, bytes);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, (ExtentList{Extent{5 * page_, page_}}));
  zc_->set_between_epochs_hook_for_test([](void* p) { Store(static_cast<uint8_t*>(p), 2); }, mem_ + 11 * page_);
  ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, *written}}).ok());
  zc_->set_between_epochs_hook_for_test(nullptr, nullptr);
  EXPECT_EQ(mem_[11 * page_], 2);
  ASSERT_TRUE(zc_->Read(mem_ + 5 * page_, got.data(), page_).ok());
  zc_->End();
  written = zc_->Written(mem_, bytes);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, (ExtentList{Extent{11 * page_, page_}}));
}

// Without a watch (the address order, or mprotect) End removes everything,
// and every page read from memory counts as GREEN for the next order.
TEST_P(LockStepTest, UnwatchedEndRemovesAllProtection) {
  if (const std::string why = UseUffd(/*watch=*/false); !why.empty()) GTEST_SKIP() << why;
  std::vector<uint8_t> got(kPages * page_);
  ASSERT_NO_FATAL_FAILURE(ReadEpoch(got));
  EXPECT_FALSE(zc_->watching());
  EXPECT_EQ(ProtectedPages(), 0u);
  Store(mem_ + 3 * page_, 1);
  EXPECT_EQ(zc_->counters().watch_faults, 0u);
  EXPECT_EQ(zc_->history().RankOf(reinterpret_cast<uintptr_t>(mem_)), 0u);
}

// The engine destroyed while watching leaves no protection behind.
TEST_P(LockStepTest, DestructionWhileWatchingRemovesProtection) {
  if (const std::string why = UseUffd(/*watch=*/true); !why.empty()) GTEST_SKIP() << why;
  std::vector<uint8_t> got(kPages * page_);
  ASSERT_NO_FATAL_FAILURE(ReadEpoch(got));
  ASSERT_TRUE(zc_->watching());
  zc_.reset();
  EXPECT_EQ(ProtectedPages(), 0u);
  Store(mem_, 1);
}

INSTANTIATE_TEST_SUITE_P(Cow, LockStepTest, ::testing::Values(0.0, 0.05));

// The engine follows the history: every page written before its read,
// forward on even epochs and reversed on odd ones. After two scored epochs
// the epochs fall back to address order (the reader plans in file order; the
// engine does not watch), kProbeAfter of them, then the learned order is
// tried again. Every epoch's record is learned before the next Begin, as the
// reader's Tidy does.
TEST_P(LockStepTest, AFlippingOrderFallsBackToAddressOrderThenProbesAgain) {
  auto z = ZeroCopy::Create(1.0, WriteProtectMode::kAuto, /*watch=*/true,
                            kBlockPages);  // a slot per page
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  zc_ = std::move(z).value();
  const OneRegion blocks = Blocks();
  const size_t bytes = kPages * page_;
  std::vector<uint8_t> got(bytes);
  std::vector<uint32_t> file_order(kPages / kBlockPages);
  std::iota(file_order.begin(), file_order.end(), 0u);
  std::string fell_back;
  for (uint32_t ep = 0; ep < 3 + FlushHistory::kProbeAfter + 1; ++ep) {
    ASSERT_TRUE(zc_->Begin({ZeroCopyRange{mem_, bytes, {}}}).ok());
    const ZeroCopyOrder order(blocks.layout, blocks.sources, PackedStarts(blocks.layout), zc_.get(),
                              true);
    EXPECT_EQ(order.address_fallback(), zc_->address_epoch());
    if (order.address_fallback()) {
      EXPECT_EQ(order.planned(), file_order) << "epoch " << ep;
    }
    fell_back += order.address_fallback() ? 'A' : 'L';
    for (size_t i = 0; i < kPages; ++i)
      Store(mem_ + (ep % 2 == 0 ? i : kPages - 1 - i) * page_, ep);
    ASSERT_TRUE(zc_->Read(mem_, got.data(), bytes).ok());
    zc_->End();
    if (order.address_fallback()) {
      EXPECT_FALSE(zc_->watching()) << "epoch " << ep;
    }
    zc_->StopWatching();
    (void)zc_->history();
  }
  EXPECT_EQ(fell_back, "LLL" + std::string(FlushHistory::kProbeAfter, 'A') + "L");
}

}  // namespace
}  // namespace cairn::core
