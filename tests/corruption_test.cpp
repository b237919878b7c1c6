// Damaged checkpoint files: flipped bits in the data, the tables, the footer
// and the header, truncation, a missing file. A damaged version is never
// restored (kCorrupt naming the file and the block), Latest() skips a version
// whose structure is damaged (it reads no data), RestoreLatest() falls back to
// the newest version that verifies, a good persistent copy is used instead,
// and `cairn verify` reports it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/block_reader.hpp"
#include "format/file_reader.hpp"
#include "os/fs/fs.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/test_memory.hpp"
#include "testing/test_paths.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using namespace test;

constexpr size_t kRegionA = 200 * kKiB + 7;  // 4 blocks of 64 KiB
constexpr size_t kRegionB = 5000;
const char* const kName = "cor";
constexpr uint64_t kLastByte = ~uint64_t{0};

// This file's data pattern.
std::vector<uint8_t> Pattern(size_t n, uint64_t seed) { return LcgPattern(n, seed, 17); }

// Flips bit `bit` of the byte at `offset`.
::testing::AssertionResult FlipBit(const std::string& path, uint64_t offset, int bit = 3) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0)
    return ::testing::AssertionFailure() << "open " << path << ": " << std::strerror(errno);
  uint8_t b = 0;
  bool ok = ::pread(fd, &b, 1, static_cast<off_t>(offset)) == 1;
  b ^= static_cast<uint8_t>(1u << bit);
  ok = ok && ::pwrite(fd, &b, 1, static_cast<off_t>(offset)) == 1;
  ::close(fd);
  if (!ok)
    return ::testing::AssertionFailure() << "flip at " << offset << " in " << path << " failed";
  return ::testing::AssertionSuccess();
}

uint64_t ReadU64(const std::string& path, uint64_t offset) {
  uint64_t v = 0;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    if (::pread(fd, &v, sizeof v, static_cast<off_t>(offset)) != sizeof v) v = 0;
    ::close(fd);
  }
  return v;  // little-endian host
}

struct CliRun {
  int code = -1;
  std::string out;
};

std::string CliPath() { return std::string(test::kBinDir) + "/cairn"; }

CliRun RunCli(const std::string& args) {
  CliRun r;
  // Appended piecewise: GCC 12's -Wstringop-overflow misfires on the chained
  // operator+ form here (GCC bug 105651).
  std::string cmd = "'";
  cmd += CliPath();
  cmd += "' ";
  cmd += args;
  cmd += " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class CorruptionTest : public ScratchDirTest {
 protected:
  CorruptionTest() : ScratchDirTest("corruption") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    if (HasFatalFailure()) return;
    config_ = MakeConfig(2 * kMiB, 64 * kKiB);
    config_.keep_versions = 5;
    ConfigureFor(kind_, config_);
  }

  // Writes versions 1..3 (waiting for `level`) and closes the client.
  void WriteVersions(Level level = Level::kLocal) {
    auto client = Client::Open(config_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    TestBuffer a(kind_, kRegionA), b(kind_, kRegionB);
    ASSERT_OK((*client)->Protect(1, a.data(), a.size()));
    ASSERT_OK((*client)->Protect(2, b.data(), b.size()));
    for (int64_t v = 1; v <= 3; ++v) {
      a.Write(Pattern(kRegionA, 10 * v));  // the protected buffers stay in place
      b.Write(Pattern(kRegionB, 10 * v + 1));
      ASSERT_OK((*client)->Checkpoint(kName, v));
      Status s = (*client)->Wait(kName, v, level);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    ASSERT_OK((*client)->Close());
  }

  std::string LocalFile(int64_t v) const { return FileIn(config_.scratch_dir, v); }
  static std::string FileIn(const std::string& dir, int64_t v) {
    return dir + "/" + kName + "/" + VersionFileName(v);
  }

  // File offset of byte `pos % length` of block `index` of a (good) file.
  uint64_t BlockByte(const std::string& path, uint32_t index, uint64_t pos = 0) {
    auto reader = format::FileReader::Open(os::FileSystem::Default(), path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return 0;
    EXPECT_LT(index, (*reader)->layout().blocks.size());
    const auto& blk = (*reader)->layout().blocks.at(index);
    if (pos == kLastByte) return blk.offset + blk.length - 1;
    return blk.offset + pos % blk.length;
  }
  uint32_t BlockCount(const std::string& path) {
    auto reader = format::FileReader::Open(os::FileSystem::Default(), path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    return reader.ok() ? static_cast<uint32_t>((*reader)->layout().blocks.size()) : 0;
  }

  // A fresh client with both regions protected.
  struct Restarted {
    explicit Restarted(MemoryKind kind) : a(kind, kRegionA), b(kind, kRegionB) {}
    TestBuffer a, b;  // declared first: the client goes before its regions
    std::unique_ptr<Client> client;
  };
  std::unique_ptr<Restarted> Restart() {
    auto r = std::make_unique<Restarted>(kind_);
    auto client = Client::Open(config_);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return nullptr;
    r->client = std::move(client).value();
    EXPECT_OK(r->client->Protect(1, r->a.data(), r->a.size()));
    EXPECT_OK(r->client->Protect(2, r->b.data(), r->b.size()));
    return r;
  }

  // Version v restores with exactly its content.
  void ExpectRestores(Restarted& r, int64_t v) {
    Status s = r.client->Restore(kName, v);
    ASSERT_TRUE(s.ok()) << "version " << v << ": " << s.ToString();
    EXPECT_TRUE(r.a.Read() == Pattern(kRegionA, 10 * v)) << "version " << v << " region 1";
    EXPECT_TRUE(r.b.Read() == Pattern(kRegionB, 10 * v + 1)) << "version " << v << " region 2";
  }

  // RestoreLatest gives `v`, whose content is then in the regions.
  void ExpectRestoreLatest(Restarted& r, int64_t v) {
    r.a.Write(Pattern(kRegionA, 999));  // scribbled over, as after a crash
    auto got = r.client->RestoreLatest(kName);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, v);
    EXPECT_TRUE(r.a.Read() == Pattern(kRegionA, 10 * v)) << "version " << v << " region 1";
    EXPECT_TRUE(r.b.Read() == Pattern(kRegionB, 10 * v + 1)) << "version " << v << " region 2";
  }

  // The common verdict on a damaged v3: kCorrupt naming the file (and
  // `detail`), RestoreLatest falls back to 2. Latest names 3 when only its
  // data is damaged (Latest reads no data), else 2.
  void ExpectV3Damaged(const std::string& detail, bool data_only = false) {
    auto r = Restart();
    ASSERT_NE(r, nullptr);
    Status s = r->client->Restore(kName, 3);
    EXPECT_EQ(s.code(), Code::kCorrupt) << s.ToString();
    EXPECT_NE(s.message().find(LocalFile(3)), std::string::npos)
        << "does not name the file: " << s.message();
    if (!detail.empty()) {
      EXPECT_NE(s.message().find(detail), std::string::npos)
          << "does not say '" << detail << "': " << s.message();
    }
    EXPECT_NE(s.message().find("version 3 of 'cor' is damaged"), std::string::npos)
        << s.message();
    auto latest = r->client->Latest(kName);
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    EXPECT_EQ(*latest, data_only ? 3 : 2);
    ExpectRestoreLatest(*r, 2);
    ExpectRestores(*r, 2);
    ExpectRestores(*r, 1);
    // Damage is never repaired or removed behind the user's back.
    ASSERT_OK(r->client->Close());
    EXPECT_TRUE(fs::exists(LocalFile(3)));
  }

  MemoryKind kind_ = MemoryKind::kHost;  // of the protected regions
  Config config_;
};

// Damage found while restoring into host, device or managed regions
// (testing/test_memory.hpp): the same verdicts and the same fallbacks.
class CorruptionKindTest : public CorruptionTest, public ::testing::WithParamInterface<MemoryKind> {
 protected:
  CorruptionKindTest() { kind_ = GetParam(); }
};
INSTANTIATE_TEST_SUITE_P(Kinds, CorruptionKindTest, ::testing::ValuesIn(MemoryKindsUnderTest()),
                         MemoryKindTestName);

TEST_P(CorruptionKindTest, FlippedDataBit) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t off = BlockByte(LocalFile(3), 1, 1234);
  ASSERT_GT(off, 4096u);
  ASSERT_TRUE(FlipBit(LocalFile(3), off));
  ExpectV3Damaged("block 1", /*data_only=*/true);
}

TEST_F(CorruptionTest, FlippedBitInLastShortBlock) {
  WriteVersions();
  if (HasFatalFailure()) return;
  // The last payload byte of the last block.
  const uint32_t last = BlockCount(LocalFile(3)) - 1;
  ASSERT_EQ(last, 4u);  // 4 blocks for region 1, 1 for region 2
  ASSERT_TRUE(FlipBit(LocalFile(3), BlockByte(LocalFile(3), last, kLastByte), 0));
  ExpectV3Damaged("block 4", /*data_only=*/true);
}

TEST_F(CorruptionTest, Truncated) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t size = fs::file_size(LocalFile(3));
  fs::resize_file(LocalFile(3), size / 2);
  ExpectV3Damaged("");
}

TEST_F(CorruptionTest, TruncatedByOnePage) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t size = fs::file_size(LocalFile(3));
  fs::resize_file(LocalFile(3), size - 4096);
  ExpectV3Damaged("");
}

TEST_F(CorruptionTest, FlippedFooterBit) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t size = fs::file_size(LocalFile(3));
  ASSERT_TRUE(FlipBit(LocalFile(3), size - 64 + 16));  // table_crc, covered by footer_crc
  ExpectV3Damaged("");
}

TEST_F(CorruptionTest, FlippedTableBit) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t size = fs::file_size(LocalFile(3));
  const uint64_t table_offset = ReadU64(LocalFile(3), size - 64);
  ASSERT_GE(table_offset, 4096u);
  ASSERT_LT(table_offset, size - 64);
  ASSERT_TRUE(FlipBit(LocalFile(3), table_offset + 8));  // region 0's byte count
  ExpectV3Damaged("");
}

TEST_F(CorruptionTest, FlippedBlockCrcInTable) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t size = fs::file_size(LocalFile(3));
  const uint64_t table_offset = ReadU64(LocalFile(3), size - 64);
  // Block table starts after 2 region entries of 32 bytes; block 2's crc.
  ASSERT_TRUE(FlipBit(LocalFile(3), table_offset + 2 * 32 + 2 * 8));
  ExpectV3Damaged("");
}

TEST_F(CorruptionTest, FlippedHeaderBit) {
  WriteVersions();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(FlipBit(LocalFile(3), 24));  // the version number
  ExpectV3Damaged("");
}

TEST_F(CorruptionTest, MissingFile) {
  WriteVersions();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(fs::remove(LocalFile(3)));
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  auto latest = r->client->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 2);
  Status s = r->client->Restore(kName, 3);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  ExpectRestores(*r, 2);
}

// A damaged local copy with a good persistent copy: the persistent one is used.
TEST_P(CorruptionKindTest, DamagedLocalFallsBackToPersistent) {
  config_.persistent_dir = tmp_.path() + "/persistent";
  WriteVersions(Level::kPersistent);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(fs::exists(FileIn(config_.persistent_dir, 3)));
  ASSERT_TRUE(FlipBit(LocalFile(3), BlockByte(LocalFile(3), 2, 99)));
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  ExpectRestores(*r, 3);
  auto latest = r->client->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 3);
  // Truncated local copy: same.
  fs::resize_file(LocalFile(2), 8192);
  ExpectRestores(*r, 2);
  // Both copies damaged: kCorrupt, and Latest still finds 3 (persistent ok).
  ASSERT_TRUE(FlipBit(FileIn(config_.persistent_dir, 1),
                      BlockByte(FileIn(config_.persistent_dir, 1), 0, 5)));
  ASSERT_TRUE(FlipBit(LocalFile(1), BlockByte(LocalFile(1), 0, 5)));
  EXPECT_EQ(r->client->Restore(kName, 1).code(), Code::kCorrupt);
}

TEST_P(CorruptionKindTest, AllVersionsDamaged) {
  WriteVersions();
  if (HasFatalFailure()) return;
  for (int64_t v = 1; v <= 3; ++v) {
    ASSERT_TRUE(FlipBit(LocalFile(v), BlockByte(LocalFile(v), static_cast<uint32_t>(v), 77)));
  }
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  // The structure is fine everywhere: Latest names 3 without reading data.
  auto latest = r->client->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 3);
  auto restored = r->client->RestoreLatest(kName);
  ASSERT_FALSE(restored.ok()) << "RestoreLatest gave " << *restored;
  EXPECT_EQ(restored.status().code(), Code::kNotFound) << restored.status().ToString();
  const std::string m = restored.status().message();
  EXPECT_NE(m.find(kName), std::string::npos) << m;
  EXPECT_NE(m.find("all 3 committed versions are damaged"), std::string::npos) << m;
  for (int64_t v = 1; v <= 3; ++v) {
    EXPECT_NE(m.find(LocalFile(v)), std::string::npos) << m;  // each damage is listed
    EXPECT_EQ(r->client->Restore(kName, v).code(), Code::kCorrupt) << "version " << v;
  }
  // A new version still commits and is found.
  ASSERT_OK(r->client->Checkpoint(kName, 4));
  ASSERT_OK(r->client->Wait(kName, 4, Level::kLocal));
  latest = r->client->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 4);
}

// Reads through a file system that silently corrupts data: caught by the CRCs.
TEST_P(CorruptionKindTest, SilentReadCorruptionIsCaught) {
  WriteVersions();
  if (HasFatalFailure()) return;
  test::FaultFs faults;
  faults.CorruptReads("v00000000000000000003");
  config_.fs = &faults;
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  Status s = r->client->Restore(kName, 3);
  EXPECT_EQ(s.code(), Code::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find(LocalFile(3)), std::string::npos) << s.message();
  auto latest = r->client->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 2);
  ExpectRestoreLatest(*r, 2);
  ExpectRestores(*r, 2);
  ASSERT_OK(r->client->Close());
}

// Damaged data in the local copy, a good persistent copy: RestoreLatest
// restores the newest version from the persistent tier.
TEST_P(CorruptionKindTest, RestoreLatestUsesTheGoodPersistentCopy) {
  config_.persistent_dir = tmp_.path() + "/persistent";
  WriteVersions(Level::kPersistent);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(FlipBit(LocalFile(3), BlockByte(LocalFile(3), 3, 11)));
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  ExpectRestoreLatest(*r, 3);
}

// The restart reads each byte once: Latest reads no data, RestoreLatest reads
// the newest file once (structure, then every block, verified as it lands).
TEST_P(CorruptionKindTest, RestoreLatestReadsEachByteOnce) {
  WriteVersions();
  if (HasFatalFailure()) return;
  const uint64_t file_bytes = fs::file_size(LocalFile(3));
  const uint64_t payload = kRegionA + kRegionB;
  test::FaultFs counting;
  config_.fs = &counting;
  // The placement record (docs/format.md 5) is another, small file that a
  // restore with placement also reads: keep reads only the data file.
  config_.placement = "keep";
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  counting.Reset();
  auto latest = r->client->Latest(kName);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, 3);
  // Header, footer and tables only: less than one 64 KiB block.
  EXPECT_LT(counting.bytes_read(), 64 * kKiB) << "Latest read data";
  counting.Reset();
  ExpectRestoreLatest(*r, 3);
  EXPECT_GE(counting.bytes_read(), payload);
  EXPECT_LE(counting.bytes_read(), file_bytes) << "some bytes were read twice";
  ASSERT_OK(r->client->Close());
}

// format::ReadBlocks, the reader of every restore from a file: O_DIRECT or
// buffered, 1 to 8 reads in flight, destinations 4 KiB-aligned (full blocks
// read straight into them) or not (staged): the same bytes as ReadBlock, each
// block read once; a damaged block is named and stops the read.
TEST_F(CorruptionTest, ReadBlocksDirectAndBuffered) {
  WriteVersions();
  if (HasFatalFailure()) return;
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  const std::string path = LocalFile(3);
  test::FaultFs counting;
  auto reader = format::FileReader::Open(&counting, path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const format::Layout& layout = (*reader)->layout();
  const uint64_t span = layout.blocks.back().offset + layout.blocks.back().length;
  std::vector<uint8_t> want(span);
  for (uint32_t b = 0; b < layout.blocks.size(); ++b) {
    ASSERT_OK((*reader)->ReadBlock(b, want.data() + layout.blocks[b].offset));
  }
  for (bool direct : {true, false}) {
    for (unsigned depth : {1u, 3u, 8u}) {
      // Aligned (straight in), unaligned (staged), aligned but marked stage
      // (small pages: staged).
      const std::pair<size_t, bool> kCases[] = {{0, false}, {16, false}, {0, true}};
      for (auto [shift, stage] : kCases) {
        SCOPED_TRACE(::testing::Message() << "direct " << direct << " depth " << depth
                                          << " shift " << shift << " stage " << stage);
        std::unique_ptr<uint8_t, Free> mem(
            static_cast<uint8_t*>(std::aligned_alloc(4096, (span + shift + 4095) / 4096 * 4096)));
        ASSERT_TRUE(mem);
        uint8_t* base = mem.get() + shift;
        std::vector<format::BlockRead> plan;
        for (uint32_t b = 0; b < layout.blocks.size(); ++b) {
          plan.push_back({.block = b, .dst = base + layout.blocks[b].offset, .stage = stage});
        }
        counting.Reset();
        ASSERT_OK(format::ReadBlocks(&counting, **reader, plan, {},
                                     {.queue_depth = depth, .direct = direct}));
        EXPECT_EQ(counting.calls(FaultOp::kOpen), std::min<size_t>(depth, plan.size()));
        EXPECT_GE(counting.bytes_read(), kRegionA + kRegionB);
        EXPECT_LT(counting.bytes_read(), span) << "a block was read twice";
        for (const auto& blk : layout.blocks) {
          ASSERT_EQ(std::memcmp(base + blk.offset, want.data() + blk.offset, blk.length), 0)
              << "block at " << blk.offset;
        }
      }
    }
  }
  // Staged through copy_out (as for device memory).
  std::vector<uint8_t> out(span);
  std::vector<format::BlockRead> plan;
  for (uint32_t b = 0; b < layout.blocks.size(); ++b) {
    plan.push_back({.block = b, .dst = out.data() + layout.blocks[b].offset, .host = false});
  }
  int copies = 0;
  auto copy_out = [&copies](void* dst, const void* src, size_t n) {
    ++copies;  // copy_out calls are serialized
    std::memcpy(dst, src, n);
    return Status::Ok();
  };
  ASSERT_OK(format::ReadBlocks(&counting, **reader, plan, copy_out, {.direct = true}));
  EXPECT_EQ(copies, static_cast<int>(plan.size()));
  for (const auto& blk : layout.blocks) {
    ASSERT_EQ(std::memcmp(out.data() + blk.offset, want.data() + blk.offset, blk.length), 0);
  }
  // Damage in block 2: kCorrupt naming the file and the block, direct or not.
  ASSERT_TRUE(FlipBit(path, BlockByte(path, 2, 500)));
  for (bool direct : {true, false}) {
    Status s = format::ReadBlocks(&counting, **reader, plan, copy_out, {.direct = direct});
    EXPECT_EQ(s.code(), Code::kCorrupt) << s.ToString();
    EXPECT_NE(s.message().find(path + ": block 2 (region id 1"), std::string::npos) << s.message();
  }
}

// No version at all: kNotFound, regions untouched.
TEST_F(CorruptionTest, RestoreLatestWithoutVersions) {
  auto r = Restart();
  ASSERT_NE(r, nullptr);
  r->a.Write(Pattern(kRegionA, 5));
  auto got = r->client->RestoreLatest(kName);
  EXPECT_EQ(got.status().code(), Code::kNotFound) << got.status().ToString();
  EXPECT_TRUE(r->a.Read() == Pattern(kRegionA, 5));
  EXPECT_EQ(r->client->RestoreLatest("bad/name").status().code(), Code::kInvalidArgument);
}

// A region of another size is the caller's problem: no fallback.
TEST_F(CorruptionTest, RestoreLatestSizeMismatchStops) {
  WriteVersions();
  if (HasFatalFailure()) return;
  TestBuffer small(kind_, 100);
  auto client = Client::Open(config_);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_OK((*client)->Protect(1, small.data(), small.size()));
  auto got = (*client)->RestoreLatest(kName);
  EXPECT_EQ(got.status().code(), Code::kSizeMismatch) << got.status().ToString();
  ASSERT_OK((*client)->Close());
}

TEST_F(CorruptionTest, CliVerifyNamesTheDamagedBlock) {
  if (!fs::exists(CliPath())) GTEST_SKIP() << CliPath() << " is not built";
  WriteVersions();
  if (HasFatalFailure()) return;
  CliRun good = RunCli("verify '" + config_.scratch_dir + "'");
  EXPECT_EQ(good.code, 0) << good.out;
  ASSERT_TRUE(FlipBit(LocalFile(3), BlockByte(LocalFile(3), 1, 4321)));
  CliRun bad = RunCli("verify '" + config_.scratch_dir + "'");
  EXPECT_NE(bad.code, 0) << bad.out;
  EXPECT_NE(bad.out.find(LocalFile(3)), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("block 1"), std::string::npos) << bad.out;
  // Truncation is reported too.
  fs::resize_file(LocalFile(2), fs::file_size(LocalFile(2)) / 2);
  CliRun trunc = RunCli("verify '" + config_.scratch_dir + "'");
  EXPECT_NE(trunc.code, 0) << trunc.out;
  EXPECT_NE(trunc.out.find(LocalFile(2)), std::string::npos) << trunc.out;
}

}  // namespace
}  // namespace cairn
