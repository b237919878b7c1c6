// The pipeline over layered versions (format v2 chains, docs/design.md
// "Chains"): chains written with the format's writer into the client's tier
// directories, as a capture that writes layered versions would, then read by
// a client: every version restores byte-exact, a missing or damaged link
// makes its tips unrestorable with an error naming the link, Latest and
// RestoreLatest fall back to an older version, and restore falls back to the
// persistent tier's chain.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "testing/chain_files.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

constexpr uint64_t kBytes = 200 * kKiB + 7;
const char* const kName = "chain";

class ChainPipelineTest : public ScratchDirTest {
 protected:
  ChainPipelineTest() : ScratchDirTest("chain_pipeline") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    config_ = MakeConfig(2 * kMiB, 64 * kKiB);
    config_.keep_versions = 10;
  }

  ChainFiles In(const std::string& dir) const {
    return {.fs = os::FileSystem::Default(), .dir = dir, .name = kName, .bytes = kBytes,
            .block_bytes = 8192};
  }
  std::string Path(const std::string& dir, int64_t v) const {
    return format::EntryPath(dir, kName, format::EntryKind::kCheckpoint, v);
  }

  // A client with region 1 (kBytes) protected at buf.
  std::unique_ptr<Client> Open(std::vector<uint8_t>* buf) {
    buf->assign(kBytes, 0xEE);
    auto c = OpenClient(config_);
    if (c) EXPECT_OK(c->Protect(1, buf->data(), buf->size()));
    return c;
  }

  Config config_;
};

TEST_F(ChainPipelineTest, EveryVersionOfAChainRestoresByteExact) {
  const auto written = In(config_.scratch_dir).WriteChain(1, 5);  // v1 full, v2..v6 layered
  std::vector<uint8_t> buf;
  auto c = Open(&buf);
  ASSERT_NE(c, nullptr);
  for (int64_t v = 1; v <= 6; ++v) {
    std::fill(buf.begin(), buf.end(), 0xEE);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_TRUE(buf == written[v - 1].content) << "version " << v;
  }
  auto latest = c->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 6);
  std::fill(buf.begin(), buf.end(), 0xEE);
  auto got = c->RestoreLatest(kName);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 6);
  EXPECT_TRUE(buf == written[5].content);
  EXPECT_OK(c->Close());
}

// v1 full, v2..v3 on it; v4 full, v5..v6 on it. v5 goes missing: v6 cannot
// be restored and says which link is broken; Latest and RestoreLatest give v4.
TEST_F(ChainPipelineTest, AMissingBaseBreaksItsTipsAndLatestFallsBack) {
  const ChainFiles files = In(config_.scratch_dir);
  const auto a = files.WriteChain(1, 2);
  const auto b = files.WriteChain(4, 2);
  ASSERT_TRUE(std::filesystem::remove(Path(config_.scratch_dir, 5)));
  std::vector<uint8_t> buf;
  auto c = Open(&buf);
  ASSERT_NE(c, nullptr);
  Status s = c->Restore(kName, 6);
  EXPECT_EQ(s.code(), Code::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("v6 -> base v5: missing"), std::string::npos) << s.ToString();
  auto latest = c->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 4);
  auto got = c->RestoreLatest(kName);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 4);
  EXPECT_TRUE(buf == b[0].content);
  ASSERT_OK(c->Restore(kName, 3));
  EXPECT_TRUE(buf == a[2].content);
  EXPECT_OK(c->Close());
}

// A base replaced by another version of the same number (another content id)
// is a broken link too; when nothing is left, the error names every link.
TEST_F(ChainPipelineTest, AReplacedBaseIsABrokenLinkAndTheErrorNamesIt) {
  const ChainFiles files = In(config_.scratch_dir);
  files.WriteChain(1, 1);
  files.WriteFull(1);  // same number, new content id
  std::vector<uint8_t> buf;
  auto c = Open(&buf);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(std::filesystem::remove(Path(config_.scratch_dir, 1)));
  auto latest = c->Latest(kName);
  EXPECT_EQ(latest.status().code(), Code::kNotFound);
  EXPECT_NE(latest.status().message().find("v2 -> base v1: missing"), std::string::npos)
      << latest.status().ToString();
  files.WriteFull(1);
  Status s = c->Restore(kName, 2);
  EXPECT_EQ(s.code(), Code::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("v2 -> base v1: content id"), std::string::npos) << s.ToString();
  auto got = c->RestoreLatest(kName);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 1);
  EXPECT_OK(c->Close());
}

// The local chain lacks a link; the persistent tier's chain of the same
// version is whole and is read instead (a chain never mixes tiers).
TEST_F(ChainPipelineTest, RestoreFallsBackToThePersistentChain) {
  config_.persistent_dir = tmp_.path() + "/persistent";
  In(config_.scratch_dir).WriteChain(1, 3);
  const auto written = In(config_.persistent_dir).WriteChain(1, 3);
  ASSERT_TRUE(std::filesystem::remove(Path(config_.scratch_dir, 2)));
  std::vector<uint8_t> buf;
  auto c = Open(&buf);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Restore(kName, 4));
  EXPECT_TRUE(buf == written[3].content);
  auto latest = c->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 4);
  EXPECT_OK(c->Close());
}

}  // namespace
}  // namespace cairn
