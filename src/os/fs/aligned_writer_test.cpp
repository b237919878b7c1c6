#include "os/fs/aligned_writer.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace cairn::os {
namespace {

class AlignedWriterTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "cairn_aligned_writer_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << std::strerror(errno);
    dir_ = templ;
    auto f = FileSystem::Default()->Open(Path(), OpenOptions{.write = true, .direct = GetParam()});
    if (!f.ok() && f.status().code() == Code::kUnsupported) {
      GTEST_SKIP() << "O_DIRECT unsupported here: " << f.status().message();
    }
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    file_ = std::move(*f);
    ASSERT_EQ(file_->direct(), GetParam());
  }
  void TearDown() override {
    file_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path() const { return dir_ + "/f"; }
  std::vector<uint8_t> Contents() {
    EXPECT_TRUE(file_->Close().ok());
    std::ifstream in(Path(), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 12));
    return v;
  }

  std::string dir_;
  std::unique_ptr<File> file_;
};

// A parity file's shape: a short header written last, rows of a size that
// is no multiple of a block written window by window, rows interleaved, a
// 4-byte trailer; every byte once, the order shuffled besides.
TEST_P(AlignedWriterTest, PiecesInAnyOrderMakeTheFileThatBufferedWritesWould) {
  const size_t head = 136, row = 1048576 + 1234, rows = 2, total = head + rows * row + 4;
  const std::vector<uint8_t> want = Pattern(total, 9);
  struct Piece {
    size_t at, n;
  };
  std::vector<Piece> pieces;
  for (size_t t = 0; t < rows; ++t) {
    for (size_t off = 0; off < row; off += 262144)
      pieces.push_back({head + t * row + off, std::min<size_t>(262144, row - off)});
  }
  std::mt19937 rng(7);
  std::shuffle(pieces.begin(), pieces.end(), rng);
  pieces.push_back({0, head});
  pieces.push_back({total - 4, 4});
  AlignedWriter w(file_.get());
  for (const Piece& p : pieces) ASSERT_TRUE(w.WriteAt(want.data() + p.at, p.n, p.at).ok());
  if (!GetParam()) {
    EXPECT_EQ(w.held(), 0u);
  }
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_EQ(w.held(), 0u);
  EXPECT_TRUE(Contents() == want);
}

// A partial write into blocks that already reached the file keeps their
// other bytes; a hole left inside the file reads as zeros.
TEST_P(AlignedWriterTest, ARewriteKeepsTheBytesAroundItAndAHoleIsZero) {
  std::vector<uint8_t> want = Pattern(5 * 4096, 3);
  AlignedWriter w(file_.get());
  ASSERT_TRUE(w.WriteAt(want.data(), 3 * 4096, 0).ok());
  const std::vector<uint8_t> patch = Pattern(5000, 77);
  ASSERT_TRUE(w.WriteAt(patch.data(), patch.size(), 1000).ok());
  std::copy(patch.begin(), patch.end(), want.begin() + 1000);
  ASSERT_TRUE(w.WriteAt(want.data() + 4 * 4096 + 100, 50, 4 * 4096 + 100).ok());
  std::fill(want.begin() + 3 * 4096, want.begin() + 4 * 4096 + 100, 0);
  want.resize(4 * 4096 + 150);
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_TRUE(Contents() == want);
}

TEST_P(AlignedWriterTest, NoWriteFollowsFinish) {
  AlignedWriter w(file_.get());
  const uint8_t byte = 1;
  ASSERT_TRUE(w.WriteAt(&byte, 1, 0).ok());
  ASSERT_TRUE(w.Finish().ok());
  if (GetParam()) {
    EXPECT_EQ(w.WriteAt(&byte, 1, 1).code(), Code::kInternal);
  }
}

INSTANTIATE_TEST_SUITE_P(DirectAndBuffered, AlignedWriterTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "direct" : "buffered"; });

}  // namespace
}  // namespace cairn::os
