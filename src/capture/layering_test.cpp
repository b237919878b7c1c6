// core::Layering alone: which layout each version gets from its detectors,
// commits and drops, and the tracked ranges shared between names.
#include "capture/layering.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cairn/cairn.hpp"

namespace cairn::core {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kBytes = 32 * kPage;  // two 64 KiB hash chunks
constexpr uint32_t kBlock = 64 << 10;

ChangeOptions Options(ChangeDetection mode, int max_layers = 10) {
  return ChangeOptions{.mode = mode, .max_layers = max_layers, .hash_chunk = 64 << 10};
}

class LayeringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = TrackedBuffer::Create(kBytes);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    buf_ = std::move(*b);
    mem_ = static_cast<uint8_t*>(buf_.data());
    std::memset(mem_, 1, kBytes);
  }
  std::vector<CaptureSource> Sources() const {
    return {CaptureSource{.spec = {.id = 1, .memory = MemoryKind::kHost, .bytes = kBytes}, .data = mem_}};
  }
  // The extents region r of `l` stores.
  static ExtentList Stored(const format::Layout& l, uint32_t r = 0) {
    return ExtentList(l.region_extents(r), l.region_extents(r) + l.regions[r].extent_count);
  }

  TrackedBuffer buf_;
  uint8_t* mem_ = nullptr;
};

TEST_F(LayeringTest, FullModeKeepsFormatVersion1) {
  Layering l(Options(ChangeDetection::kFull), kBlock);
  EXPECT_FALSE(l.enabled());
  const format::Layout layout = l.Plan("a", 1, Sources()).layout;
  EXPECT_EQ(layout.format_version, format::kFormatVersion);
  EXPECT_EQ(layout.stored_bytes, kBytes);
}

// A version is layered on the previous capture, committed or not; a dropped
// one, and every version layered on it, is never a base.
TEST_F(LayeringTest, LayeredOnThePreviousCapture) {
  Layering l(Options(ChangeDetection::kHash), kBlock);
  const format::Layout v1 = l.Plan("a", 1, Sources()).layout;
  EXPECT_EQ(v1.format_version, format::kFormatVersion2);
  EXPECT_FALSE(v1.layered());
  EXPECT_NE(v1.record.content_id, 0u);
  mem_[10] = 2;  // the first chunk
  const format::Layout v2 = l.Plan("a", 2, Sources()).layout;
  ASSERT_TRUE(v2.layered()) << "1 is in flight: 2 is layered on it all the same";
  EXPECT_EQ(v2.record.base_version, 1);
  EXPECT_EQ(v2.record.base_content_id, v1.record.content_id);
  EXPECT_EQ(v2.record.depth, 1u);
  EXPECT_EQ(Stored(v2), (ExtentList{{0, 64 << 10}}));
  mem_[kBytes - 1] = 3;  // the second chunk
  const format::Layout v3 = l.Plan("a", 3, Sources()).layout;
  ASSERT_TRUE(v3.layered());
  EXPECT_EQ(v3.record.base_version, 2);
  EXPECT_EQ(v3.record.base_content_id, v2.record.content_id);
  EXPECT_EQ(v3.record.depth, 2u);
  EXPECT_EQ(Stored(v3), (ExtentList{{64 << 10, kBytes - (64 << 10)}})) << "only the second chunk since 2";
  l.Dropped("a", 2);  // 3 cannot commit either
  l.Committed("a", 1);
  const format::Layout v4 = l.Plan("a", 4, Sources()).layout;
  ASSERT_TRUE(v4.layered());
  EXPECT_EQ(v4.record.base_version, 1);
  EXPECT_EQ(v4.record.depth, 1u);
  EXPECT_EQ(Stored(v4), (ExtentList{{0, kBytes}})) << "both chunks changed since 1";
  l.Committed("a", 4);
  const format::Layout v5 = l.Plan("a", 5, Sources()).layout;
  ASSERT_TRUE(v5.layered());
  EXPECT_EQ(v5.record.base_version, 4);
  EXPECT_EQ(Stored(v5), ExtentList{});
  const ChangeStats s = l.stats();
  EXPECT_EQ(s.layered_versions, 4u);
  EXPECT_EQ(s.full_versions, 1u);
  EXPECT_EQ(s.bytes_hashed, 5 * kBytes);
  EXPECT_EQ(s.mode, "hash");
}

TEST_F(LayeringTest, ChainsStopAtMaxLayers) {
  Layering l(Options(ChangeDetection::kHash, 2), kBlock);
  std::vector<uint32_t> depths;
  for (int64_t v = 1; v <= 7; ++v) {
    mem_[v] = static_cast<uint8_t>(v);
    depths.push_back(l.Plan("a", v, Sources()).layout.record.depth);
    l.Committed("a", v);
  }
  EXPECT_EQ(depths, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2, 0}));
}

// A device region inside a layered version is stored whole; its memory is
// never read by detection.
TEST_F(LayeringTest, DeviceRegionsAreStoredFull) {
  Layering l(Options(ChangeDetection::kHash), kBlock);
  std::vector<CaptureSource> sources = Sources();
  sources.push_back({.spec = {.id = 2, .memory = MemoryKind::kDevice, .bytes = 3 * kPage},
                     .data = reinterpret_cast<const void*>(uintptr_t{0x1000})});
  l.Plan("a", 1, sources);
  l.Committed("a", 1);
  mem_[0] = 9;
  const format::Layout v2 = l.Plan("a", 2, sources).layout;
  ASSERT_TRUE(v2.layered());
  EXPECT_EQ(Stored(v2, 0), (ExtentList{{0, 64 << 10}}));
  EXPECT_EQ(Stored(v2, 1), (ExtentList{{0, 3 * kPage}}));
  EXPECT_EQ(l.stats().bytes_examined, 2 * kBytes);
}

// The same tracked memory under two names: each name's next version stores
// the pages written since *its* previous version, whoever collected first.
TEST_F(LayeringTest, PagesSharedBetweenNames) {
  Layering l(Options(ChangeDetection::kPages), kBlock);
  for (const char* n : {"a", "b"}) {
    EXPECT_FALSE(l.Plan(n, 1, Sources()).layout.layered());
    l.Committed(n, 1);
  }
  if (l.stats().fallbacks > 0) GTEST_SKIP() << "no page tracking here: " << l.stats().fallback_note;
  mem_[3 * kPage] = 7;
  const format::Layout a2 = l.Plan("a", 2, Sources()).layout;
  mem_[9 * kPage + 5] = 7;
  const format::Layout b2 = l.Plan("b", 2, Sources()).layout;
  ASSERT_TRUE(a2.layered());
  ASSERT_TRUE(b2.layered());
  EXPECT_EQ(Stored(a2), (ExtentList{{3 * kPage, kPage}}));
  EXPECT_EQ(Stored(b2), (ExtentList{{3 * kPage, kPage}, {9 * kPage, kPage}}));
  l.Committed("a", 2);
  const format::Layout a3 = l.Plan("a", 3, Sources()).layout;
  EXPECT_EQ(Stored(a3), (ExtentList{{9 * kPage, kPage}}));
  EXPECT_FALSE(l.stats().tracker.empty());
}

// A restore into tracked memory releases it; the next version stores the
// whole region, and the one after only what was written again.
TEST_F(LayeringTest, RestoreReleasesTrackedMemory) {
  Layering l(Options(ChangeDetection::kPages), kBlock);
  l.Plan("a", 1, Sources());
  l.Committed("a", 1);
  if (l.stats().fallbacks > 0) GTEST_SKIP() << "no page tracking here: " << l.stats().fallback_note;
  l.BeforeRestore(mem_ + kPage, kPage);  // overlaps the range
  std::memset(mem_, 5, kBytes);          // the "restore"
  const format::Layout v2 = l.Plan("a", 2, Sources()).layout;
  EXPECT_EQ(Stored(v2), (ExtentList{{0, kBytes}}));
  l.Committed("a", 2);
  mem_[kPage * 4] = 6;
  EXPECT_EQ(Stored(l.Plan("a", 3, Sources()).layout), (ExtentList{{4 * kPage, kPage}}));
}

TEST_F(LayeringTest, UntrackableMemoryIsHashedAndCountedOnce) {
  Layering l(Options(ChangeDetection::kPages), kBlock);
  std::vector<CaptureSource> sources = Sources();
  sources[0].data = mem_ + 8;
  sources[0].spec.bytes = kBytes - kPage;
  for (int64_t v = 1; v <= 3; ++v) {
    mem_[100] = static_cast<uint8_t>(v);
    l.Plan("a", v, sources);
    l.Committed("a", v);
  }
  const ChangeStats s = l.stats();
  EXPECT_EQ(s.fallbacks, 1u);
  EXPECT_NE(s.fallback_note.find("region 1"), std::string::npos) << s.fallback_note;
  EXPECT_EQ(s.layered_versions, 2u);
  EXPECT_GT(s.bytes_hashed, 0u);
}

// A region resized or moved makes new detectors: that version is full.
TEST_F(LayeringTest, RegionChangesForceAFullVersion) {
  Layering l(Options(ChangeDetection::kHash), kBlock);
  std::vector<CaptureSource> sources = Sources();
  l.Plan("a", 1, sources);
  l.Committed("a", 1);
  EXPECT_TRUE(l.Plan("a", 2, sources).layout.layered());
  l.Committed("a", 2);
  sources[0].data = mem_ + kPage;
  sources[0].spec.bytes = kBytes - kPage;
  EXPECT_FALSE(l.Plan("a", 3, sources).layout.layered());
  l.Committed("a", 3);
  EXPECT_TRUE(l.Plan("a", 4, sources).layout.layered());
}

// Moved memory of the same size: a hashed region stays layered (contents
// are compared), a tracked one starts afresh; another mode starts afresh.
TEST_F(LayeringTest, MovedOrReconfiguredRegions) {
  auto other = TrackedBuffer::Create(kBytes);
  ASSERT_TRUE(other.ok());
  std::memcpy(other->data(), mem_, kBytes);
  for (ChangeDetection mode : {ChangeDetection::kHash, ChangeDetection::kPages}) {
    SCOPED_TRACE(ChangeDetectionName(mode));
    Layering l(Options(ChangeDetection::kFull), kBlock);  // the regions ask for it
    std::vector<CaptureSource> sources = Sources();
    sources[0].changes = mode;
    EXPECT_EQ(l.Plan("a", 1, sources).layout.format_version, format::kFormatVersion2);
    l.Committed("a", 1);
    sources[0].data = other->data();
    EXPECT_EQ(l.Plan("a", 2, sources).layout.layered(), mode == ChangeDetection::kHash);
    l.Committed("a", 2);
    EXPECT_TRUE(l.Plan("a", 3, sources).layout.layered());
    l.Committed("a", 3);
    sources[0].changes = ChangeDetection::kAuto;
    EXPECT_FALSE(l.Plan("a", 4, sources).layout.layered());
    sources[0].changes.reset();  // the client's full: format v1 again
    EXPECT_EQ(l.Plan("a", 5, sources).layout.format_version, format::kFormatVersion);
  }
}

}  // namespace
}  // namespace cairn::core
