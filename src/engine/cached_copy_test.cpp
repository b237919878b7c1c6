// Pipeline::CopyCached: a committed version's file bytes from the host
// cache: the blocks' payload and padding exactly as in the file, the header
// and the tables left to the caller, nothing for a version not in the cache.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "engine/pipeline.hpp"
#include "format/naming.hpp"
#include "testing/test_util.hpp"

namespace cairn::core {
namespace {

std::vector<uint8_t> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class CachedCopyTest : public test::ScratchDirTest {
 protected:
  CachedCopyTest() : ScratchDirTest("cached_copy") {}
};

TEST_F(CachedCopyTest, BlocksComeFromTheCacheAndTheRestIsLeftToTheCaller) {
  Config config = MakeConfig(4 * test::kMiB, 64 * test::kKiB);
  auto p = Pipeline::Start(config);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // Two regions whose sizes are not whole blocks: padding inside the data.
  std::vector<uint8_t> a(200 * 1024 + 13), b(70 * 1024 + 1);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 5);
  const std::vector<CaptureSource> sources{
      {.spec = {.id = 1, .bytes = a.size()}, .data = a.data()},
      {.spec = {.id = 2, .bytes = b.size()}, .data = b.data()}};
  ASSERT_TRUE((*p)->Capture(format::EntryKind::kCheckpoint, "s", 1, sources).ok());
  ASSERT_TRUE((*p)->Wait(format::EntryKind::kCheckpoint, "s", 1, Level::kLocal).ok());
  const std::vector<uint8_t> file =
      Slurp(config.scratch_dir + "/s/" + format::EntryFileName(format::EntryKind::kCheckpoint, 1));
  ASSERT_GT(file.size(), a.size() + b.size());

  // Any range: what it fills equals the file, and its gaps (ordered, inside
  // the range) cover exactly what it did not fill.
  for (const auto& [offset, bytes] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, file.size()}, {4096, 100 * 1024}, {5000, 3}, {file.size() - 8192, 8192}}) {
    SCOPED_TRACE(std::to_string(offset) + "+" + std::to_string(bytes));
    std::vector<uint8_t> got(bytes, 0xEE);
    const ExtentList gaps = (*p)->CopyCached("s", 1, offset, bytes, got.data());
    std::vector<bool> in_gap(bytes, false);
    uint64_t last = offset;
    for (const Extent& g : gaps) {
      ASSERT_GE(g.offset, last);
      ASSERT_LE(g.end(), offset + bytes);
      last = g.end();
      for (uint64_t i = g.offset; i < g.end(); ++i) in_gap[i - offset] = true;
    }
    uint64_t filled = 0;
    for (uint64_t i = 0; i < bytes; ++i) {
      if (in_gap[i]) continue;
      ++filled;
      ASSERT_EQ(got[i], file[offset + i]) << "at " << offset + i;
    }
    if (offset == 0) {
      EXPECT_GE(filled, a.size() + b.size());  // every payload byte, and padding
      EXPECT_FALSE(gaps.empty());              // the header and the tables
      EXPECT_EQ(gaps.front().offset, 0u);
    }
  }
  // Not in the cache (no such version): the whole range is the caller's.
  std::vector<uint8_t> got(4096);
  const ExtentList none = (*p)->CopyCached("s", 2, 0, 4096, got.data());
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0], (Extent{0, 4096}));
  ASSERT_TRUE((*p)->Shutdown().ok());
}

}  // namespace
}  // namespace cairn::core
