// A redundancy level's bundle read piecewise (bundle_stream.hpp): Read and
// the in-place View give the same bytes; View declines what it cannot hand
// out in place (the heads, a range past a file's end, a file system that
// cannot map), and Read serves those; FromCache gives them from the host
// cache when it holds all of them.
#include "redundancy/bundle_stream.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/group/fake_checkpoints.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

class BundleStreamTest : public ScratchDirTest {
 protected:
  BundleStreamTest() : ScratchDirTest("bundle_stream") {}

  // Version 1 of "sim": one full version, so its bundle is the count and
  // the file's head (24 bytes) followed by that file.
  void Save(const Config& c) {
    std::vector<uint8_t> data(300 * kKiB + 5);
    FillSplitMix(data.data(), data.size(), 1, 2);
    auto client = Client::Open(c);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    ASSERT_TRUE((*client)->Protect(0, data.data(), data.size()).ok());
    ASSERT_TRUE((*client)->Checkpoint("sim", 1).ok());
    ASSERT_TRUE((*client)->Wait("sim", 1, Level::kLocal).ok());
    ASSERT_TRUE((*client)->Close().ok());
  }
  static std::vector<uint8_t> ReadAll(redundancy::BundleReader& r) {
    std::vector<uint8_t> all(r.size());
    EXPECT_TRUE(r.Read(0, all.data(), all.size()).ok());
    return all;
  }
  static constexpr uint64_t kHead = 3 * sizeof(int64_t);
};

TEST_F(BundleStreamTest, ViewGivesTheBytesReadGivesOrDeclines) {
  const Config c = MakeConfig();
  Save(c);
  auto reader = redundancy::BundleReader::Open(c, c.scratch_dir, "sim", 1);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  redundancy::BundleReader& r = **reader;
  const std::vector<uint8_t> all = ReadAll(r);
  ASSERT_GT(all.size(), kHead + 8192);
  // Inside the file, unaligned, and up to its last byte: in place.
  for (const auto& [at, n] : std::vector<std::pair<uint64_t, size_t>>{
           {kHead, 4096}, {kHead + 1000, 9000}, {all.size() - 700, 700}}) {
    const uint8_t* v = r.View(at, n);
    ASSERT_NE(v, nullptr) << at;
    EXPECT_EQ(std::memcmp(v, all.data() + at, n), 0) << at;
  }
  EXPECT_EQ(r.View(0, 8), nullptr) << "the heads are not in a file";
  EXPECT_EQ(r.View(kHead - 4, 8), nullptr) << "across the head and the file";
  EXPECT_EQ(r.View(all.size() - 10, 20), nullptr) << "past the end (XOR padding)";
  // A hint where View mapped, where it did not (the heads) and past the
  // end changes no byte.
  r.WillNeed(kHead + 4096, 8192);
  r.WillNeed(0, 16);
  r.WillNeed(all.size() - 10, 1 << 20);
  r.WillNeed(all.size() + 4096, 10);
  EXPECT_EQ(ReadAll(r), all);
  // Read pads past the end with zeros.
  std::vector<uint8_t> tail(20, 0xff);
  ASSERT_TRUE(r.Read(all.size() - 10, tail.data(), tail.size()).ok());
  EXPECT_EQ(std::memcmp(tail.data(), all.data() + all.size() - 10, 10), 0);
  EXPECT_EQ(tail[10], 0);
}

// FromCache asks the member's host cache (Checkpoints::CopyCached) for the
// file's part of a range, in the file's own offsets, and serves the heads
// itself: the same bytes as Read when the cache holds them all; false when
// it lacks any, or without a cache.
TEST_F(BundleStreamTest, FromCacheGivesTheBytesWhenTheCacheHoldsThemAll) {
  const Config c = MakeConfig();
  Save(c);
  const std::vector<uint8_t> file =
      Slurp(c.scratch_dir + "/sim/" + format::EntryFileName(format::EntryKind::kCheckpoint, 1));
  FakeCheckpoints cache;
  uint64_t asked = 0, held_from = 0;  // the cache holds the file from held_from on
  cache.copy_cached = [&](const std::string& name, int64_t number, uint64_t offset, uint64_t bytes,
                          uint8_t* dst) -> ExtentList {
    EXPECT_EQ(name, "sim");
    EXPECT_EQ(number, 1);
    asked += bytes;
    if (offset < held_from) return {{offset, bytes}};
    std::memcpy(dst, file.data() + offset, bytes);  // as committed
    return {};
  };
  auto reader = redundancy::BundleReader::Open(c, c.scratch_dir, "sim", 1, &cache);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  redundancy::BundleReader& r = **reader;
  const std::vector<uint8_t> all = ReadAll(r);
  ASSERT_EQ(all.size(), kHead + file.size());
  // The heads and the file's start, a range inside the file, past the end.
  for (const auto& [at, n] : std::vector<std::pair<uint64_t, size_t>>{
           {0, 9000}, {kHead + 1000, 9000}, {all.size() - 700, 1400}}) {
    std::vector<uint8_t> got(n, 0xee);
    asked = 0;
    ASSERT_TRUE(r.FromCache(at, got.data(), n)) << at;
    EXPECT_EQ(std::memcmp(got.data(), all.data() + at, std::min(n, all.size() - at)), 0) << at;
    if (at + n > all.size()) {
      EXPECT_EQ(got.back(), 0) << "zeros past the end";
    }
    EXPECT_EQ(asked, std::min<uint64_t>(at + n, all.size()) - std::max(at, kHead)) << at;
  }
  held_from = 4096;  // the cache lacks the file's first block
  std::vector<uint8_t> got(9000);
  EXPECT_FALSE(r.FromCache(0, got.data(), got.size()));
  EXPECT_TRUE(r.FromCache(kHead + 4096, got.data(), got.size()));
  auto uncached = redundancy::BundleReader::Open(c, c.scratch_dir, "sim", 1);
  ASSERT_TRUE(uncached.ok());
  EXPECT_FALSE((*uncached)->FromCache(kHead, got.data(), got.size())) << "no cache";
}

// Through a wrapper that cannot map (FaultFs: its injected faults apply to
// reads), View declines and Read serves the same bytes.
TEST_F(BundleStreamTest, AFileSystemThatCannotMapIsReadInstead) {
  const Config plain = MakeConfig();
  Save(plain);
  FaultFs fault;
  Config c = plain;
  c.fs = &fault;
  auto mapped = redundancy::BundleReader::Open(plain, plain.scratch_dir, "sim", 1);
  auto reader = redundancy::BundleReader::Open(c, c.scratch_dir, "sim", 1);
  ASSERT_TRUE(mapped.ok() && reader.ok());
  EXPECT_EQ((*reader)->View(kHead, 4096), nullptr);
  EXPECT_EQ((*reader)->View(kHead, 4096), nullptr) << "asked again: still declined";
  EXPECT_EQ(ReadAll(**reader), ReadAll(**mapped));
}

}  // namespace
}  // namespace cairn
