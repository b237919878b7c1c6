// Behaviour of the C++ API (cairn::Client) on a temporary scratch directory:
// round trips, argument checking, retention, back-pressure, the persistent
// tier, restart and statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/naming.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/test_memory.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

// This file's data pattern.
constexpr uint64_t kPatternSalt = 0x632BE59BD9B4E019ull;
void Fill(void* p, size_t n, uint64_t seed) { FillSplitMix(p, n, seed, kPatternSalt); }
std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  return SplitMixPattern(n, seed, kPatternSalt);
}

class ClientTest : public ScratchDirTest {
 protected:
  ClientTest() : ScratchDirTest("client") {}

  std::string NameDir(const Config& c, const std::string& name) const {
    return c.scratch_dir + "/" + name;
  }
};

// The data-path tests run for every memory kind (testing/test_memory.hpp):
// instances .../host, .../device (through a device cache), .../managed.
class ClientKindTest : public KindTest<ClientTest> {};
INSTANTIATE_TEST_SUITE_P(Kinds, ClientKindTest, ::testing::ValuesIn(MemoryKindsUnderTest()),
                         MemoryKindTestName);

// Several regions of awkward sizes go through checkpoint / wait / restore.
TEST_P(ClientKindTest, RoundTripOddRegionSizes) {
  const uint64_t block = 64 * kKiB;
  Config c = MakeConfig(1 * kMiB, block);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  const std::vector<size_t> sizes{0, 1, block - 1, block + 1, 3 * block + 17};
  std::vector<TestBuffer> regions;
  for (size_t i = 0; i < sizes.size(); ++i) regions.emplace_back(kind(), Pattern(sizes[i], 100 + i));
  for (size_t i = 0; i < regions.size(); ++i) {
    ASSERT_OK(client->Protect(static_cast<int>(i) * 7 - 3, regions[i].data(), regions[i].size()));
  }
  ASSERT_OK(client->Checkpoint("odd", 5));
  Status w = client->Wait("odd", 5, Level::kLocal);
  ASSERT_TRUE(w.ok()) << w.ToString();
  EXPECT_TRUE(fs::exists(NameDir(c, "odd") + "/" + VersionFileName(5)));

  for (auto& r : regions) r.Fill(0xEE);
  Status s = client->Restore("odd", 5);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < regions.size(); ++i) {
    EXPECT_TRUE(SameBytes(regions[i].Read(), Pattern(sizes[i], 100 + i))) << "region " << i << " (cache)";
  }
  ASSERT_OK(client->Close());

  // Same from the file, in a new client.
  auto again = OpenClient(c);
  ASSERT_NE(again, nullptr);
  for (size_t i = 0; i < regions.size(); ++i) {
    regions[i].Fill(0x11);
    ASSERT_OK(again->Protect(static_cast<int>(i) * 7 - 3, regions[i].data(), regions[i].size()));
  }
  s = again->Restore("odd", 5);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < regions.size(); ++i) {
    EXPECT_TRUE(SameBytes(regions[i].Read(), Pattern(sizes[i], 100 + i))) << "region " << i << " (file)";
  }
}

// Checkpoint returns once the data is captured: the application may overwrite
// its buffer immediately and the version keeps the old content.
TEST_P(ClientKindTest, BufferReusableRightAfterCheckpoint) {
  Config c = MakeConfig(1 * kMiB, 64 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  TestBuffer buf(kind(), Pattern(700 * kKiB, 1));  // larger than half the cache
  ASSERT_OK(client->Protect(1, buf.data(), buf.size()));
  ASSERT_OK(client->Checkpoint("reuse", 1));
  buf.Write(Pattern(buf.size(), 2));  // the application moves on at once
  ASSERT_OK(client->Checkpoint("reuse", 2));
  buf.Fill(0x5A);
  ASSERT_OK(client->Wait("reuse", 1, Level::kLocal));
  ASSERT_OK(client->Wait("reuse", 2, Level::kLocal));

  Status s = client->Restore("reuse", 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 1)));
  s = client->Restore("reuse", 2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 2)));
  ASSERT_OK(client->Close());

  auto again = OpenClient(c);
  ASSERT_NE(again, nullptr);
  ASSERT_OK(again->Protect(1, buf.data(), buf.size()));
  s = again->Restore("reuse", 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 1)));
}

TEST_P(ClientKindTest, LatestReturnsNewestAndOlderKeptVersionRestores) {
  Config c = MakeConfig();
  c.keep_versions = 2;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto r0 = client->Latest("lat");
  EXPECT_EQ(r0.status().code(), Code::kNotFound) << r0.status().ToString();

  TestBuffer buf(kind(), 100 * kKiB + 3);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  for (int64_t v : {3, 7, 12}) {
    buf.Write(Pattern(buf.size(), static_cast<uint64_t>(v)));
    ASSERT_OK(client->Checkpoint("lat", v));
    ASSERT_OK(client->Wait("lat", v, Level::kLocal));
    auto latest = client->Latest("lat");
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    EXPECT_EQ(*latest, v);
  }
  // The older kept version (7) restores, in this client...
  Status s = client->Restore("lat", 7);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 7)));
  ASSERT_OK(client->Close());
  // ... and after a restart (from its file).
  auto again = OpenClient(c);
  ASSERT_NE(again, nullptr);
  ASSERT_OK(again->Protect(0, buf.data(), buf.size()));
  auto latest = again->Latest("lat");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 12);
  s = again->Restore("lat", 7);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 7)));
  s = again->Restore("lat", 12);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 12)));
}

// Latest(name, at_most): the newest kept version <= the bound (VELOC's
// Restart_test bound, docs/veloc.md); kNotFound below the oldest.
TEST_F(ClientTest, LatestAtMostPicksNewestVersionUnderTheBound) {
  Config c = MakeConfig();
  c.keep_versions = 4;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(10000, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  for (int64_t v : {10, 20, 30, 40}) {
    ASSERT_OK(client->Checkpoint("bnd", v));
    ASSERT_OK(client->Wait("bnd", v, Level::kLocal));
  }
  for (auto [bound, want] : std::vector<std::pair<int64_t, int64_t>>{{40, 40}, {1000, 40}, {39, 30}, {30, 30}, {25, 20}, {20, 20}, {19, 10}, {10, 10}}) {
    auto v = client->Latest("bnd", bound);
    ASSERT_TRUE(v.ok()) << bound << ": " << v.status().ToString();
    EXPECT_EQ(*v, want) << "bound " << bound;
  }
  EXPECT_EQ(client->Latest("bnd", 9).status().code(), Code::kNotFound);
  EXPECT_EQ(client->Latest("bnd", 0).status().code(), Code::kNotFound);
  EXPECT_EQ(client->Latest("bnd", -1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(client->Latest("none", 100).status().code(), Code::kNotFound);
}

// BeginRestore/EndRestore count as a restore the application waits on
// (init.restores_now, which pauses the cache's background touch: the
// initializer's own tests show the pause), nest, and refuse an end with none
// begun; Close ends those left open, and a restore inside one counts once
// more for its own length.
TEST_F(ClientTest, BeginRestoreCountsAsARestoreUntilItsEnd) {
  Config c = MakeConfig();
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(10000, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  ASSERT_OK(client->Checkpoint("rs", 1));
  ASSERT_OK(client->Wait("rs", 1, Level::kLocal));
  EXPECT_EQ(client->GetStats().init.restores_now, 0u);
  ASSERT_OK(client->BeginRestore());
  EXPECT_EQ(client->GetStats().init.restores_now, 1u);
  ASSERT_OK(client->BeginRestore());
  EXPECT_EQ(client->GetStats().init.restores_now, 2u);
  ASSERT_OK(client->Restore("rs", 1));
  EXPECT_EQ(client->GetStats().init.restores_now, 2u) << "the restore's own count ended with it";
  ASSERT_OK(client->EndRestore());
  EXPECT_EQ(client->GetStats().init.restores_now, 1u);
  ASSERT_OK(client->EndRestore());
  EXPECT_EQ(client->GetStats().init.restores_now, 0u);
  Status s = client->EndRestore();
  EXPECT_EQ(s.code(), Code::kState) << s.ToString();
  EXPECT_NE(s.message().find("no restore begun"), std::string::npos) << s.ToString();
  ASSERT_OK(client->BeginRestore());
  ASSERT_OK(client->Close());
  EXPECT_EQ(client->BeginRestore().code(), Code::kState) << "closed";
  EXPECT_EQ(client->EndRestore().code(), Code::kState) << "closed";
}

// A size mismatch (or a region missing from the version) is detected before
// anything is copied: every region keeps its content.
TEST_P(ClientKindTest, SizeMismatchAndMissingRegionLeaveRegionsUntouched) {
  Config c = MakeConfig();
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart ? "from file (new client)" : "from cache");
    const std::string name = restart ? "mm_file" : "mm_cache";
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    TestBuffer a(kind(), Pattern(70 * kKiB, 1)), b(kind(), Pattern(5000, 2));
    ASSERT_OK(client->Protect(1, a.data(), a.size()));
    ASSERT_OK(client->Protect(2, b.data(), b.size()));
    ASSERT_OK(client->Checkpoint(name, 0));
    ASSERT_OK(client->Wait(name, 0, Level::kLocal));
    if (restart) {
      ASSERT_OK(client->Close());
      client = OpenClient(c);
      ASSERT_NE(client, nullptr);
      ASSERT_OK(client->Protect(1, a.data(), a.size()));
    }
    // Region 2 grows by one byte; region 1 (restored first) must stay intact.
    a.Write(Pattern(a.size(), 51));
    TestBuffer b_big(kind(), Pattern(b.size() + 1, 52));
    ASSERT_OK(client->Protect(2, b_big.data(), b_big.size()));
    Status s = client->Restore(name, 0);
    EXPECT_EQ(s.code(), Code::kSizeMismatch) << s.ToString();
    EXPECT_TRUE(SameBytes(a.Read(), Pattern(a.size(), 51))) << "region 1 was modified";
    EXPECT_TRUE(SameBytes(b_big.Read(), Pattern(b_big.size(), 52))) << "region 2 was modified";

    // Smaller is a mismatch too.
    TestBuffer b_small(kind(), Pattern(b.size() - 1, 53));
    ASSERT_OK(client->Protect(2, b_small.data(), b_small.size()));
    s = client->Restore(name, 0);
    EXPECT_EQ(s.code(), Code::kSizeMismatch) << s.ToString();
    EXPECT_TRUE(SameBytes(a.Read(), Pattern(a.size(), 51)));
    EXPECT_TRUE(SameBytes(b_small.Read(), Pattern(b_small.size(), 53)));

    // Correct sizes again plus an id the version does not have -> kNotFound.
    ASSERT_OK(client->Protect(2, b.data(), b.size()));
    b.Write(Pattern(b.size(), 54));
    TestBuffer extra(kind(), Pattern(100, 55));
    ASSERT_OK(client->Protect(9, extra.data(), extra.size()));
    s = client->Restore(name, 0);
    EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find('9'), std::string::npos) << s.message();
    EXPECT_TRUE(SameBytes(a.Read(), Pattern(a.size(), 51)));
    EXPECT_TRUE(SameBytes(b.Read(), Pattern(b.size(), 54)));
    EXPECT_TRUE(SameBytes(extra.Read(), Pattern(extra.size(), 55)));

    // Without the extra region it restores.
    ASSERT_OK(client->Unprotect(9));
    s = client->Restore(name, 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(SameBytes(a.Read(), Pattern(a.size(), 1)));
    EXPECT_TRUE(SameBytes(b.Read(), Pattern(b.size(), 2)));
  }
}

TEST_F(ClientTest, BadNamesAreInvalidArguments) {
  Config c = MakeConfig();
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(1000, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  const std::vector<std::string> bad{"",
                                     "a/b",
                                     "..",
                                     ".",
                                     "x\n",
                                     std::string(200, 'n'),
                                     std::string(129, 'n'),
                                     ".hidden",
                                     "a..b",
                                     std::string("nul\0x", 5),
                                     "del\x7f"};
  for (const auto& name : bad) {
    SCOPED_TRACE("name '" + name + "' (" + std::to_string(name.size()) + " bytes)");
    EXPECT_EQ(client->Checkpoint(name, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(client->Wait(name, 1, Level::kLocal).code(), Code::kInvalidArgument);
    EXPECT_EQ(client->Latest(name).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(client->Restore(name, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(client->OpenHistory(name).status().code(), Code::kInvalidArgument);
  }
  // Nothing was created for them.
  EXPECT_TRUE(Files(c.scratch_dir).empty()) << Join(Files(c.scratch_dir));
  // The longest valid name works.
  const std::string longest(128, 'L');
  ASSERT_OK(client->Checkpoint(longest, 1));
  ASSERT_OK(client->Wait(longest, 1, Level::kLocal));
  auto latest = client->Latest(longest);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 1);
}

TEST_F(ClientTest, NegativeVersionIsInvalid) {
  auto client = OpenClient(MakeConfig());
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(1000, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  EXPECT_EQ(client->Checkpoint("neg", -1).code(), Code::kInvalidArgument);
  EXPECT_EQ(client->Checkpoint("neg", INT64_MIN).code(), Code::kInvalidArgument);
  // Reading a negative version can never succeed.
  Code wc = client->Wait("neg", -1, Level::kLocal).code();
  EXPECT_TRUE(wc == Code::kInvalidArgument || wc == Code::kNotFound) << CodeName(wc);
  Code rc = client->Restore("neg", -1).code();
  EXPECT_TRUE(rc == Code::kInvalidArgument || rc == Code::kNotFound) << CodeName(rc);
  // Version 0 is fine.
  ASSERT_OK(client->Checkpoint("neg", 0));
  ASSERT_OK(client->Wait("neg", 0, Level::kLocal));
}

TEST_F(ClientTest, SameVersionTwiceInPipelineIsExists) {
  auto client = OpenClient(MakeConfig());
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(200 * kKiB, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  ASSERT_OK(client->Checkpoint("dup", 4));
  Fill(buf.data(), buf.size(), 2);
  EXPECT_EQ(client->Checkpoint("dup", 4).code(), Code::kExists);
  ASSERT_OK(client->Wait("dup", 4, Level::kLocal));
  // The first capture is what version 4 holds.
  ASSERT_OK(client->Restore("dup", 4));
  EXPECT_TRUE(SameBytes(buf, Pattern(buf.size(), 1)));
  // Another name with the same number is independent.
  EXPECT_OK(client->Checkpoint("dup2", 4));
  EXPECT_OK(client->Wait("dup2", 4, Level::kLocal));
}

// keep_versions = 2: after the last commit only the 2 newest files remain.
TEST_P(ClientKindTest, RetentionKeepsNewestVersions) {
  Config c = MakeConfig();
  c.keep_versions = 2;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  TestBuffer buf(kind(), 100 * kKiB);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  for (int64_t v = 1; v <= 6; ++v) {
    buf.Write(Pattern(buf.size(), static_cast<uint64_t>(v)));
    ASSERT_OK(client->Checkpoint("ret", v));
  }
  ASSERT_OK(client->Wait("ret", 6, Level::kLocal));
  const std::vector<std::string> want{VersionFileName(5), VersionFileName(6)};
  std::vector<std::string> files;
  PollUntil(
      [&] {
        files = Files(NameDir(c, "ret"));
        return files == want;
      },
      std::chrono::seconds(5), std::chrono::milliseconds(10));
  EXPECT_EQ(files, want) << Join(files);
  // Both kept versions restore, and Close leaves the same two files.
  for (int64_t v : {5, 6}) {
    Status s = client->Restore("ret", v);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), static_cast<uint64_t>(v))));
  }
  // Retired versions are gone for good.
  EXPECT_EQ(client->Restore("ret", 1).code(), Code::kNotFound);
  EXPECT_EQ(client->Restore("ret", 4).code(), Code::kNotFound);
  ASSERT_OK(client->Close());
  EXPECT_EQ(Files(NameDir(c, "ret")), want) << Join(Files(NameDir(c, "ret")));
}

// Retention applies per tier: the persistent directory keeps the newest too.
TEST_F(ClientTest, RetentionInPersistentTier) {
  Config c = MakeConfig();
  c.keep_versions = 2;
  c.persistent_dir = tmp_.path() + "/persistent";
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf(50 * kKiB);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  for (int64_t v = 1; v <= 5; ++v) {
    Fill(buf.data(), buf.size(), static_cast<uint64_t>(v));
    ASSERT_OK(client->Checkpoint("pret", v));
  }
  Status s = client->Wait("pret", 5, Level::kPersistent);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::vector<std::string> want{VersionFileName(4), VersionFileName(5)};
  const std::string pdir = c.persistent_dir + "/pret";
  PollUntil([&] { return Files(pdir) == want && Files(NameDir(c, "pret")) == want; },
            std::chrono::seconds(5), std::chrono::milliseconds(10));
  EXPECT_EQ(Files(pdir), want) << Join(Files(pdir));
  EXPECT_EQ(Files(NameDir(c, "pret")), want) << Join(Files(NameDir(c, "pret")));
  ASSERT_OK(client->Close());
}

// After a restart a version number that exists on disk may be written again:
// the new file replaces the old one atomically.
TEST_P(ClientKindTest, RewritingAVersionAfterRestartReplacesIt) {
  Config c = MakeConfig();
  TestBuffer buf(kind(), Pattern(90 * kKiB, 1));
  {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
    ASSERT_OK(client->Checkpoint("rw", 3));
    ASSERT_OK(client->Wait("rw", 3, Level::kLocal));
    ASSERT_OK(client->Close());
  }
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  buf.Write(Pattern(buf.size(), 2));
  Status s = client->Checkpoint("rw", 3);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_OK(client->Wait("rw", 3, Level::kLocal));
  ASSERT_OK(client->Close());
  EXPECT_EQ(Files(NameDir(c, "rw")), std::vector<std::string>{VersionFileName(3)})
      << Join(Files(NameDir(c, "rw")));
  auto again = OpenClient(c);
  ASSERT_NE(again, nullptr);
  buf.Fill(0);
  ASSERT_OK(again->Protect(0, buf.data(), buf.size()));
  s = again->Restore("rw", 3);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 2)));
}

// A checkpoint larger than the whole host cache streams through it.
TEST_P(ClientKindTest, CheckpointLargerThanCache) {
  Config c = MakeConfig(4 * kMiB, 256 * kKiB);
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  TestBuffer big(kind(), Pattern(10 * kMiB + 12345, 77));
  TestBuffer small(kind(), Pattern(3000, 78));
  ASSERT_OK(client->Protect(1, big.data(), big.size()));
  ASSERT_OK(client->Protect(2, small.data(), small.size()));
  Status s = client->Checkpoint("big", 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = client->Wait("big", 1, Level::kLocal);
  ASSERT_TRUE(s.ok()) << s.ToString();
  big.Fill(0);
  small.Fill(0);
  s = client->Restore("big", 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(big.Read(), Pattern(big.size(), 77)));
  EXPECT_TRUE(SameBytes(small.Read(), Pattern(small.size(), 78)));
  Stats st = client->GetStats();
  EXPECT_EQ(st.cache_capacity_bytes, 4 * kMiB);
  EXPECT_LE(st.cache_used_bytes, st.cache_capacity_bytes);
  EXPECT_EQ(st.cache_dirty_bytes, 0u);
  EXPECT_GE(st.flush_local.bytes, big.size() + small.size());
}

// host_cache.grow: protecting more than the cache holds grows it at Protect
// to one version and one block more, so the checkpoint never waits for the
// flush; a pinned cache keeps its size.
TEST_F(ClientTest, HostCacheGrowsAtProtectToHoldOneVersion) {
  Config c = MakeConfig(4 * kMiB, 256 * kKiB);
  c.host_cache_grow = true;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> big = Pattern(10 * kMiB + 12345, 79);
  std::vector<uint8_t> small = Pattern(3000, 80);
  ASSERT_OK(client->Protect(1, big.data(), big.size()));
  ASSERT_OK(client->Protect(2, small.data(), small.size()));
  const uint64_t block = 256 * kKiB;
  const uint64_t want = ((big.size() + small.size() + block - 1) / block + 1) * block;
  EXPECT_EQ(client->GetStats().cache_capacity_bytes, want);
  ASSERT_OK(client->Checkpoint("grown", 1));
  ASSERT_OK(client->Wait("grown", 1, Level::kLocal));
  Stats st = client->GetStats();
  // The capture's own layout (each region starts a block) may add one more.
  EXPECT_GE(st.cache_capacity_bytes, want);
  EXPECT_LE(st.cache_capacity_bytes, want + 2 * block);
  EXPECT_EQ(st.capture_blocked_s, 0.0) << "the capture waited for room in a cache that holds it";
  EXPECT_EQ(st.evictions, 0u);
  std::fill(big.begin(), big.end(), 0);
  ASSERT_OK(client->Restore("grown", 1));
  EXPECT_TRUE(SameBytes(big, Pattern(big.size(), 79)));
  ASSERT_OK(client->Unprotect(1));
  EXPECT_EQ(client->GetStats().cache_capacity_bytes, st.cache_capacity_bytes) << "it never shrinks";

  c.pin = true;
  c.scratch_dir += "-pinned";
  auto pinned = OpenClient(c);
  ASSERT_NE(pinned, nullptr);
  ASSERT_OK(pinned->Protect(1, big.data(), big.size()));
  EXPECT_EQ(pinned->GetStats().cache_capacity_bytes, 4 * kMiB) << "a pinned cache keeps its size";
}

// A region protected only to be restored into (a load into fresh memory)
// leaves the cache at its size; a version that other processes of the node
// read too is read through the page cache, any other as it was written.
TEST_F(ClientTest, RestoreTargetsNeedNoCacheAndSharedReadsAreBuffered) {
  Config c = MakeConfig(4 * kMiB, 256 * kKiB);
  c.host_cache_grow = true;
  c.direct_io = true;
  const std::vector<uint8_t> saved = Pattern(10 * kMiB + 4096, 81);
  {
    auto writer = OpenClient(c);
    ASSERT_NE(writer, nullptr);
    ASSERT_OK(writer->Protect(1, const_cast<uint8_t*>(saved.data()), saved.size()));
    ASSERT_OK(writer->Checkpoint("loaded", 1));
    ASSERT_OK(writer->Close());
  }
  GateFs gate("", /*gate_reads=*/false, /*armed=*/false);  // records the opens only
  c.fs = &gate;
  auto reader = OpenClient(c);
  ASSERT_NE(reader, nullptr);
  std::vector<uint8_t> into(saved.size());
  ASSERT_OK(reader->Protect(1, into.data(), into.size(), ProtectOptions{.reserve_cache = false}));
  EXPECT_EQ(reader->GetStats().cache_capacity_bytes, 4 * kMiB) << "grew for a restore target";

  ASSERT_OK(reader->Restore("loaded", 1));
  EXPECT_TRUE(SameBytes(into, saved));
  const std::string file = format::EntryFileName(format::EntryKind::kCheckpoint, 1);
  // The chain's structure is read buffered, the blocks direct.
  const int opens = gate.read_opens(file, /*direct_only=*/false);
  const int direct = gate.read_opens(file, /*direct_only=*/true);
  EXPECT_GT(direct, 0) << "storage.direct_io reads the blocks direct";

  std::fill(into.begin(), into.end(), 0);
  ASSERT_OK(reader->Restore("loaded", 1, RestoreOptions{.shared_on_node = true}));
  EXPECT_TRUE(SameBytes(into, saved));
  EXPECT_GT(gate.read_opens(file, /*direct_only=*/false), opens);
  EXPECT_EQ(gate.read_opens(file, /*direct_only=*/true), direct) << "a shared read went direct";
  EXPECT_EQ(reader->GetStats().cache_capacity_bytes, 4 * kMiB);

  std::vector<uint8_t> small(3000);
  ASSERT_OK(reader->Protect(2, small.data(), small.size()));  // checkpoints follow for it
  EXPECT_GT(reader->GetStats().cache_capacity_bytes, 4 * kMiB);
  ASSERT_OK(reader->Close());
}

// Many checkpoints through a tiny cache (back-pressure) all restore exactly.
TEST_P(ClientKindTest, ManyCheckpointsThroughTinyCache) {
  Config c = MakeConfig(512 * kKiB, 64 * kKiB);  // 8 chunks
  c.keep_versions = 100;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  TestBuffer a(kind(), 300 * kKiB + 1), b(kind(), 10 * kKiB);
  ASSERT_OK(client->Protect(0, a.data(), a.size()));
  ASSERT_OK(client->Protect(1, b.data(), b.size()));
  constexpr int kVersions = 24;
  for (int v = 0; v < kVersions; ++v) {
    a.Write(Pattern(a.size(), 1000 + v));
    b.Write(Pattern(b.size(), 2000 + v));
    Status s = client->Checkpoint("many", v);
    ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
  }
  ASSERT_OK(client->Wait("many", kVersions - 1, Level::kLocal));
  for (int v = 0; v < kVersions; ++v) {
    Status s = client->Wait("many", v, Level::kLocal);
    ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
  }
  for (int v = kVersions - 1; v >= 0; --v) {
    Status s = client->Restore("many", v);
    ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
    EXPECT_TRUE(SameBytes(a.Read(), Pattern(a.size(), 1000 + v))) << "version " << v;
    EXPECT_TRUE(SameBytes(b.Read(), Pattern(b.size(), 2000 + v))) << "version " << v;
  }
  Stats st = client->GetStats();
  EXPECT_EQ(st.capture.ops, static_cast<uint64_t>(kVersions));
  EXPECT_EQ(st.flush_local.ops, static_cast<uint64_t>(kVersions));
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GT(st.cache_misses, 0u);
  EXPECT_EQ(st.failed_flushes, 0u);
  EXPECT_EQ(Files(NameDir(c, "many")).size(), static_cast<size_t>(kVersions));
}

TEST_P(ClientKindTest, PersistentTier) {
  Config c = MakeConfig();
  c.persistent_dir = tmp_.path() + "/persistent";
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  TestBuffer buf(kind(), Pattern(150 * kKiB + 9, 31));
  ASSERT_OK(client->Protect(3, buf.data(), buf.size()));
  ASSERT_OK(client->Checkpoint("per", 8));
  Status s = client->Wait("per", 8, Level::kPersistent);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string persistent_file = c.persistent_dir + "/per/" + VersionFileName(8);
  const std::string local_file = c.scratch_dir + "/per/" + VersionFileName(8);
  EXPECT_TRUE(fs::exists(persistent_file)) << persistent_file;
  EXPECT_TRUE(fs::exists(local_file)) << local_file;
  EXPECT_GE(client->GetStats().flush_persistent.bytes, buf.size());
  ASSERT_OK(client->Close());

  ASSERT_TRUE(fs::remove(local_file));
  auto again = OpenClient(c);
  ASSERT_NE(again, nullptr);
  buf.Fill(0);
  ASSERT_OK(again->Protect(3, buf.data(), buf.size()));
  auto latest = again->Latest("per");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 8);
  s = again->Restore("per", 8);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 31)));
}

TEST_F(ClientTest, WaitPersistentWithoutPersistentDirIsInvalid) {
  Config c = MakeConfig();
  ASSERT_TRUE(c.persistent_dir.empty());
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(1000, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  ASSERT_OK(client->Checkpoint("np", 1));
  Status s = client->Wait("np", 1, Level::kPersistent);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_OK(client->Wait("np", 1, Level::kCache));
  EXPECT_OK(client->Wait("np", 1, Level::kLocal));
  EXPECT_FALSE(client->Wait("np", 1, static_cast<Level>(7)).ok());
}

// Restart: a new client on the same directories finds and restores the data;
// restores of resident versions are cache hits, after a restart misses.
TEST_P(ClientKindTest, RestartAndCacheStats) {
  Config c = MakeConfig(2 * kMiB, 64 * kKiB);
  TestBuffer buf(kind(), Pattern(200 * kKiB + 5, 61));
  {
    auto client = OpenClient(c);
    ASSERT_NE(client, nullptr);
    ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
    ASSERT_OK(client->Checkpoint("rs", 1));
    buf.Write(Pattern(buf.size(), 62));
    ASSERT_OK(client->Checkpoint("rs", 2));
    ASSERT_OK(client->Wait("rs", 2, Level::kLocal));
    Stats before = client->GetStats();
    EXPECT_EQ(before.cache_hits, 0u);
    EXPECT_EQ(before.cache_misses, 0u);
    buf.Fill(0);
    ASSERT_OK(client->Restore("rs", 1));
    EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 61)));
    Stats after = client->GetStats();
    EXPECT_EQ(after.cache_hits, 1u);
    EXPECT_EQ(after.cache_misses, 0u);
    EXPECT_EQ(after.restore.ops, 1u);
    EXPECT_EQ(after.restore.bytes, buf.size());
    EXPECT_EQ(after.capture.ops, 2u);
    EXPECT_EQ(after.capture.bytes, 2 * buf.size());
    ASSERT_OK(client->Close());
  }
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  buf.Fill(0);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  auto latest = client->Latest("rs");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 2);
  Status s = client->Restore("rs", *latest);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(buf.Read(), Pattern(buf.size(), 62)));
  Stats st = client->GetStats();
  EXPECT_EQ(st.cache_hits, 0u);
  EXPECT_EQ(st.cache_misses, 1u);
  // Wait on a version committed by the earlier run answers from the files.
  EXPECT_OK(client->Wait("rs", 2, Level::kLocal));
  EXPECT_EQ(client->Wait("rs", 99, Level::kLocal).code(), Code::kNotFound);
  EXPECT_EQ(client->Restore("rs", 99).code(), Code::kNotFound);
}

TEST_F(ClientTest, CloseIsIdempotentAndLaterCallsAreState) {
  Config c = MakeConfig();
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> buf = Pattern(1000, 1);
  ASSERT_OK(client->Protect(0, buf.data(), buf.size()));
  ASSERT_OK(client->Checkpoint("cl", 1));
  EXPECT_OK(client->Close());  // drains: version 1 is committed
  EXPECT_OK(client->Close());
  EXPECT_TRUE(fs::exists(NameDir(c, "cl") + "/" + VersionFileName(1)));

  EXPECT_EQ(client->Protect(1, buf.data(), buf.size()).code(), Code::kState);
  EXPECT_EQ(client->Unprotect(0).code(), Code::kState);
  EXPECT_EQ(client->Checkpoint("cl", 2).code(), Code::kState);
  EXPECT_EQ(client->Wait("cl", 1, Level::kLocal).code(), Code::kState);
  EXPECT_EQ(client->Latest("cl").status().code(), Code::kState);
  EXPECT_EQ(client->Restore("cl", 1).code(), Code::kState);
  EXPECT_EQ(client->OpenHistory("h").status().code(), Code::kState);
  (void)client->GetStats();  // no crash
  EXPECT_EQ(client->config().scratch_dir, c.scratch_dir);
  EXPECT_OK(client->Close());
}

}  // namespace
}  // namespace cairn
