// A redundancy level's bundle read piecewise (bundle_stream.hpp): Read and
// the in-place View give the same bytes; View declines what it cannot hand
// out in place (the heads, a range past a file's end, a file system that
// cannot map), and Read serves those.
#include "redundancy/bundle_stream.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cairn/cairn.hpp"
#include "testing/fs/fault_fs.hpp"
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
