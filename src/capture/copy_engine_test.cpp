#include "capture/copy_engine.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace cairn::core {
namespace {

std::vector<uint8_t> Random(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Splits `src` into segments of the given sizes, copies them with `engine`
// into a zeroed destination and checks every byte landed where it belongs.
void CheckCopy(CopyEngine& engine, const std::vector<size_t>& sizes, uint32_t seed,
               CopyEngine::Stores stores = CopyEngine::Stores::kCached) {
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  auto src = Random(total, seed);
  std::vector<uint8_t> dst(total + 64, 0xEE);  // guard bytes after the end
  std::vector<CopySegment> segs;
  size_t pos = 0;
  // Scatter: destination segments in reverse order, to catch offset mix-ups.
  size_t dpos = total;
  for (size_t n : sizes) {
    dpos -= n;
    segs.push_back({.dst = dst.data() + dpos, .src = src.data() + pos, .bytes = n});
    pos += n;
  }
  engine.Copy(segs, stores);
  pos = 0;
  dpos = total;
  for (size_t n : sizes) {
    dpos -= n;
    ASSERT_EQ(0, std::memcmp(dst.data() + dpos, src.data() + pos, n)) << "segment of " << n;
    pos += n;
  }
  for (size_t i = total; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote past the end";
}

TEST(CopyEngine, SplitsOddSegmentsExactly) {
  for (int helpers : {0, 1, 3}) {
    CopyEngine engine(helpers);
    EXPECT_EQ(engine.helpers(), helpers);
    CheckCopy(engine, {3 << 20}, 1);                                   // one big segment
    CheckCopy(engine, {1, (1 << 20) + 7, 0, 4095, 2 << 20, 13}, 2);    // odd, empty, tiny
    CheckCopy(engine, std::vector<size_t>(40, 65536 + 3), 3);          // many
    CheckCopy(engine, {1000}, 4);                                      // below the split size
  }
}

TEST(CopyEngine, StreamingStoresCopyOddSegmentsExactly) {
  const auto kStreaming = CopyEngine::Stores::kStreaming;
  for (int helpers : {0, 1}) {
    CopyEngine engine(helpers);
    CheckCopy(engine, {3 << 20}, 5, kStreaming);
    // Odd sizes and offsets: unaligned heads, tails under 64 bytes, pieces
    // below kMinStreamingBytes, cuts between threads inside a segment.
    CheckCopy(engine, {1, (1 << 20) + 7, 0, 4095, (2 << 20) + 63, 13, (256 << 10) + 1}, 6, kStreaming);
    CheckCopy(engine, std::vector<size_t>(20, CopyEngine::kMinStreamingBytes + 3), 7, kStreaming);
  }
}

TEST(CopyEngine, StreamCopyEveryAlignmentAndTail) {
  // Destination offsets 0..17 and lengths around the 64-byte loop step.
  const size_t base = CopyEngine::kMinStreamingBytes;
  auto src = Random(base + 256, 8);
  for (size_t off : {0, 1, 7, 15, 16, 17}) {
    for (size_t n : {base, base + 1, base + 63, base + 64, base + 65}) {
      std::vector<uint8_t> dst(n + off + 64, 0xEE);
      CopyEngine::StreamCopy(dst.data() + off, src.data() + 3, n);
      ASSERT_EQ(0, std::memcmp(dst.data() + off, src.data() + 3, n)) << off << " " << n;
      for (size_t i = 0; i < off; ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote before the start";
      for (size_t i = off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote past the end";
    }
  }
}

TEST(CopyEngine, ConcurrentCallersBothComplete) {
  CopyEngine engine(1);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        auto src = Random((2 << 20) + t * 17 + i, static_cast<uint32_t>(t * 100 + i));
        std::vector<uint8_t> dst(src.size());
        CopySegment seg{.dst = dst.data(), .src = src.data(), .bytes = src.size()};
        engine.Copy({&seg, 1});
        if (dst != src) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(CopyEngine, DestroyWithoutUseJoinsHelpers) {
  for (int i = 0; i < 20; ++i) CopyEngine engine(2);  // must neither hang nor crash
}

}  // namespace
}  // namespace cairn::core
