// Captures that write layered versions (checkpoint.changes = hash, pages,
// auto; docs/design.md "Layered captures"), end to end through the client:
// random change sequences over chains up to max_layers, every version
// restored byte-exact (from the cache's files, after a restart, from the
// persistent tier), what each version stores, region changes forcing full
// versions, untrackable memory falling back to hashing, retention with
// chains.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/cairn.hpp"
#include "format/file_reader.hpp"
#include "format/naming.hpp"
#include "os/fs/fs.hpp"
#include "testing/fs/fault_fs.hpp"
#include "testing/fs/gate_fs.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;
namespace stdfs = std::filesystem;

constexpr size_t kPage = 4096;
constexpr size_t kBytes = 64 * kPage;  // 256 KiB: 4 hash chunks of 64 KiB
const char* const kName = "layers";

class LayeredCaptureTest : public ScratchDirTest, public ::testing::WithParamInterface<ChangeDetection> {
 protected:
  LayeredCaptureTest() : ScratchDirTest("layered_capture") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    config_ = MakeConfig(4 * kMiB, 64 * kKiB);
    config_.changes = GetParam();
    config_.max_layers = 3;
    config_.keep_versions = 100;
    auto b = TrackedBuffer::Create(kBytes);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    buf_ = std::move(*b);
    mem_ = static_cast<uint8_t*>(buf_.data());
  }

  std::string Path(const std::string& dir, int64_t v) const {
    return format::EntryPath(dir, kName, format::EntryKind::kCheckpoint, v);
  }
  // The version record and stored bytes of v's local file.
  std::pair<format::VersionRecord, uint64_t> FileOf(int64_t v) const {
    auto r = format::FileReader::Open(os::FileSystem::Default(), Path(config_.scratch_dir, v));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    return {(*r)->record(), (*r)->layout().stored_bytes};
  }

  Config config_;
  TrackedBuffer buf_;
  uint8_t* mem_ = nullptr;
};

// Writes one byte in each of `pages` random pages (a change of `pages`
// pages; 0: none).
void TouchPages(uint8_t* mem, std::mt19937_64& rng, int pages) {
  for (int i = 0; i < pages; ++i) {
    const size_t page = rng() % (kBytes / kPage);
    mem[page * kPage + rng() % kPage] ^= static_cast<uint8_t>(1 + rng() % 255);
  }
}

TEST_P(LayeredCaptureTest, RandomChangeSequencesRestoreEveryVersionByteExact) {
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < kBytes; ++i) mem_[i] = static_cast<uint8_t>(rng());
  std::map<int64_t, std::vector<uint8_t>> content;
  const int changes[] = {0, 1, 3, 0, 64, 2, 1, 1, 5, 0, 2, 1, 8, 1};
  for (int64_t v = 1; v <= 14; ++v) {
    if (v > 1) TouchPages(mem_, rng, changes[v - 1]);
    content[v].assign(mem_, mem_ + kBytes);
    ASSERT_OK(c->Checkpoint(kName, v));
    // Every other version runs ahead of the commits: it is layered on the
    // version before it, still in flight.
    if (v % 2 == 0) ASSERT_OK(c->Wait(kName, v, Level::kLocal));
  }
  ASSERT_OK(c->Wait(kName, 14, Level::kLocal));
  const Stats s = c->GetStats();
  EXPECT_GT(s.changes.layered_versions, 4u);
  EXPECT_EQ(s.changes.layered_versions + s.changes.full_versions, 14u);
  EXPECT_EQ(s.changes.mode, ChangeDetectionName(GetParam()));
  if (GetParam() != ChangeDetection::kHash) {
    EXPECT_FALSE(s.changes.tracker.empty());
  }
  EXPECT_EQ(s.changes.fallbacks, 0u) << s.changes.fallback_note;
  // Chains stay within max_layers, and a version with few changes stores
  // less than the region.
  int layered_small = 0;
  for (int64_t v = 1; v <= 14; ++v) {
    const auto [rec, stored] = FileOf(v);
    EXPECT_LE(rec.depth, 3u) << "version " << v;
    if (rec.layered()) {
      EXPECT_LT(rec.base_version, v);
      EXPECT_GT(rec.base_content_id, 0u);
      if (stored < kBytes) ++layered_small;
    } else {
      EXPECT_EQ(stored, kBytes) << "version " << v;
    }
  }
  EXPECT_GT(layered_small, 3);
  EXPECT_EQ(FileOf(1).first.depth, 0u);  // the first version is full
  for (int64_t v = 14; v >= 1; --v) {
    std::memset(mem_, 0, kBytes);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  ASSERT_OK(c->Close());
  // A restart reads the chains too; its first version is full again.
  c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::memset(mem_, 0, kBytes);
  auto got = c->RestoreLatest(kName);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 14);
  EXPECT_EQ(std::memcmp(mem_, content[14].data(), kBytes), 0);
  ASSERT_OK(c->Checkpoint(kName, 15));
  ASSERT_OK(c->Wait(kName, 15, Level::kLocal));
  EXPECT_FALSE(FileOf(15).first.layered());
  ASSERT_OK(c->Close());
}

// One changed byte: `pages` stores its page, `hash` its 64 KiB chunk, and
// nothing changed stores nothing at all (a layered version of 0 bytes).
TEST_P(LayeredCaptureTest, StoresTheChangedGranule) {
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::memset(mem_, 7, kBytes);
  ASSERT_OK(c->Checkpoint(kName, 1));
  ASSERT_OK(c->Wait(kName, 1, Level::kLocal));
  mem_[5 * kPage + 17] = 9;
  ASSERT_OK(c->Checkpoint(kName, 2));
  ASSERT_OK(c->Wait(kName, 2, Level::kLocal));
  ASSERT_OK(c->Checkpoint(kName, 3));
  ASSERT_OK(c->Wait(kName, 3, Level::kLocal));
  const auto [rec2, stored2] = FileOf(2);
  ASSERT_TRUE(rec2.layered());
  EXPECT_EQ(rec2.base_version, 1);
  EXPECT_EQ(rec2.base_content_id, FileOf(1).first.content_id);
  EXPECT_EQ(stored2, GetParam() == ChangeDetection::kHash ? 64 * kKiB : kPage);
  const auto [rec3, stored3] = FileOf(3);
  ASSERT_TRUE(rec3.layered());
  EXPECT_EQ(rec3.base_version, 2);
  EXPECT_EQ(stored3, 0u);
  std::memset(mem_, 0, kBytes);
  ASSERT_OK(c->Restore(kName, 3));
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(mem_[i], i == 5 * kPage + 17 ? 9 : 7) << "byte " << i;
  }
  ASSERT_OK(c->Close());
}

// A region of another size, or one more region: that version is full.
TEST_P(LayeredCaptureTest, RegionSetOrSizeChangeForcesAFullVersion) {
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::memset(mem_, 1, kBytes);
  for (int64_t v = 1; v <= 2; ++v) {
    ASSERT_OK(c->Checkpoint(kName, v));
    ASSERT_OK(c->Wait(kName, v, Level::kLocal));
  }
  EXPECT_TRUE(FileOf(2).first.layered());
  ASSERT_OK(c->Protect(1, mem_, kBytes / 2));  // re-protected smaller
  ASSERT_OK(c->Checkpoint(kName, 3));
  ASSERT_OK(c->Wait(kName, 3, Level::kLocal));
  EXPECT_FALSE(FileOf(3).first.layered());
  ASSERT_OK(c->Checkpoint(kName, 4));
  ASSERT_OK(c->Wait(kName, 4, Level::kLocal));
  EXPECT_TRUE(FileOf(4).first.layered());
  std::memset(mem_, 0, kBytes);
  ASSERT_OK(c->Restore(kName, 4));
  EXPECT_EQ(mem_[kBytes / 2 - 1], 1);
  uint64_t extra = 0x1234;
  ASSERT_OK(c->Protect(2, &extra, sizeof extra));
  ASSERT_OK(c->Checkpoint(kName, 5));
  ASSERT_OK(c->Wait(kName, 5, Level::kLocal));
  EXPECT_FALSE(FileOf(5).first.layered());
  ASSERT_OK(c->Checkpoint(kName, 6));
  ASSERT_OK(c->Wait(kName, 6, Level::kLocal));
  EXPECT_TRUE(FileOf(6).first.layered());
  extra = 0;
  std::memset(mem_, 0, kBytes);
  ASSERT_OK(c->Restore(kName, 6));
  EXPECT_EQ(mem_[kBytes / 2 - 1], 1);
  EXPECT_EQ(extra, 0x1234u);
  ASSERT_OK(c->Close());
}

// keep_versions = 2 over chains of up to 3 layers: the newest two versions
// and every base they read stay, the rest goes; what stays restores.
TEST_P(LayeredCaptureTest, RetentionKeepsTheChainsOfKeptVersions) {
  config_.keep_versions = 2;
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(7);
  std::map<int64_t, std::vector<uint8_t>> content;
  for (int64_t v = 1; v <= 11; ++v) {
    TouchPages(mem_, rng, 2);
    content[v].assign(mem_, mem_ + kBytes);
    ASSERT_OK(c->Checkpoint(kName, v));
    ASSERT_OK(c->Wait(kName, v, Level::kLocal));
  }
  ASSERT_OK(c->Close());  // retention has run for every commit
  // Each version committed before the next: chains 1-4, 5-8, 9-11. v10 and
  // v11 are kept, and so is v9, their base.
  EXPECT_EQ(FileOf(11).first.depth, 2u);
  for (int64_t v = 1; v <= 11; ++v) {
    EXPECT_EQ(stdfs::exists(Path(config_.scratch_dir, v)), v >= 9) << "version " << v;
  }
  c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  for (int64_t v : {10, 11}) {
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  ASSERT_OK(c->Close());
}

// Layered versions reach the persistent tier with their bases; with the
// local tier gone, each restores from there.
TEST_P(LayeredCaptureTest, PersistentTierHoldsWholeChains) {
  config_.persistent_dir = tmp_.path() + "/persistent";
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(9);
  std::map<int64_t, std::vector<uint8_t>> content;
  for (int64_t v = 1; v <= 6; ++v) {
    TouchPages(mem_, rng, 3);
    content[v].assign(mem_, mem_ + kBytes);
    ASSERT_OK(c->Checkpoint(kName, v));
  }
  ASSERT_OK(c->Wait(kName, 6, Level::kPersistent));
  ASSERT_OK(c->Close());
  stdfs::remove_all(config_.scratch_dir + "/" + kName);
  c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  for (int64_t v = 6; v >= 1; --v) {
    std::memset(mem_, 0, kBytes);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  ASSERT_OK(c->Close());
}

// A layered version whose flush fails (EIO at its file's fsync) is never a
// base: the next version is layered on the last committed one, and every
// committed version restores byte-exact, in this client and the next.
TEST_P(LayeredCaptureTest, AFailedLayerIsNeverABase) {
  test::FaultFs faults;
  config_.fs = &faults;
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(3);
  std::map<int64_t, std::vector<uint8_t>> content;
  for (int64_t v = 1; v <= 5; ++v) {
    TouchPages(mem_, rng, 2);
    content[v].assign(mem_, mem_ + kBytes);
    if (v == 3) {
      faults.Inject({.op = test::FaultOp::kSync, .err = EIO, .nth = 1, .times = 1,
                     .path_filter = format::EntryFileName(format::EntryKind::kCheckpoint, 3)});
    }
    ASSERT_OK(c->Checkpoint(kName, v));
    const Status s = c->Wait(kName, v, Level::kLocal);
    EXPECT_EQ(s.ok(), v != 3) << "version " << v << ": " << s.ToString();
  }
  EXPECT_FALSE(stdfs::exists(Path(config_.scratch_dir, 3)));
  EXPECT_EQ(FileOf(4).first.base_version, 2);
  EXPECT_EQ(FileOf(5).first.base_version, 4);
  for (int64_t v : {5, 4, 2, 1}) {
    std::memset(mem_, 0, kBytes);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  (void)c->Close();  // reports version 3's failure again, or not: either way
  faults.Reset();
}

// Checkpoints faster than the flush: the flusher is held at version 1's file
// while 1-5 are captured. Each version is layered on the one before it,
// still in flight, and stores only its own changes, not those of every
// version since the last commit. Version 3's flush then fails: 4 and 5,
// layered on it, fail with it (never committed over a missing base), and
// the next version is layered on 2, the newest still standing.
TEST_P(LayeredCaptureTest, VersionsInFlightStoreOnlyTheirChangesAndFallWithTheirBase) {
  test::GateFs gate(format::EntryFileName(format::EntryKind::kCheckpoint, 1));
  test::FaultFs faults(&gate);
  config_.fs = &faults;
  config_.max_layers = 10;  // 2-5 in one chain
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::mt19937_64 rng(5);
  std::map<int64_t, std::vector<uint8_t>> content;
  faults.Inject({.op = test::FaultOp::kSync, .err = EIO, .nth = 1, .times = 1,
                 .path_filter = format::EntryFileName(format::EntryKind::kCheckpoint, 3)});
  {
    test::GateRelease release{&gate};
    for (int64_t v = 1; v <= 5; ++v) {
      TouchPages(mem_, rng, 2);
      content[v].assign(mem_, mem_ + kBytes);
      ASSERT_OK(c->Checkpoint(kName, v));
      if (v == 1) {
        ASSERT_TRUE(gate.WaitBlocked(std::chrono::seconds(60)));
      }
    }
  }
  for (int64_t v = 1; v <= 5; ++v) {
    const Status s = c->Wait(kName, v, Level::kLocal);
    EXPECT_EQ(s.ok(), v <= 2) << "version " << v << ": " << s.ToString();
    if (v > 3) {
      EXPECT_NE(s.message().find("layered on version 3"), std::string::npos) << s.ToString();
    }
  }
  // Two pages changed per version: at most two hash chunks or two pages.
  const uint64_t granule = GetParam() == ChangeDetection::kHash ? 64 * kKiB : kPage;
  const auto [rec2, stored2] = FileOf(2);
  EXPECT_EQ(rec2.base_version, 1);
  EXPECT_LE(stored2, 2 * granule);
  for (int64_t v : {3, 4, 5}) EXPECT_FALSE(stdfs::exists(Path(config_.scratch_dir, v))) << "version " << v;
  TouchPages(mem_, rng, 2);
  content[6].assign(mem_, mem_ + kBytes);
  ASSERT_OK(c->Checkpoint(kName, 6));
  ASSERT_OK(c->Wait(kName, 6, Level::kLocal));
  EXPECT_EQ(FileOf(6).first.base_version, 2);
  for (int64_t v : {6, 2, 1}) {
    std::memset(mem_, 0, kBytes);
    ASSERT_OK(c->Restore(kName, v));
    EXPECT_EQ(std::memcmp(mem_, content[v].data(), kBytes), 0) << "version " << v;
  }
  (void)c->Close();  // reports the failures again, or not: either way
  faults.Reset();
}

// Another thread writes while versions are captured: a write that races with
// a capture may or may not be in that version, but it is never lost: once
// the writer stops, the next version equals memory byte for byte.
TEST_P(LayeredCaptureTest, WritesRacingCapturesAreNeverLost) {
#if defined(__SANITIZE_THREAD__)
  // The capture's memcpy against the writer's stores is the data race this
  // test is about (the application's, by contract): TSan rightly flags it.
  GTEST_SKIP() << "a deliberate race between the application and a capture";
#endif
  auto c = OpenClient(config_);
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Protect(1, mem_, kBytes));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    std::mt19937_64 rng(11);
    auto* words = reinterpret_cast<std::atomic<uint64_t>*>(mem_);
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t n = writes.fetch_add(1, std::memory_order_relaxed) + 1;
      words[rng() % (kBytes / sizeof(uint64_t))].store(n, std::memory_order_relaxed);
    }
  });
  int64_t v = 1;
  // A gate, not a time: enough captures overlap enough writes.
  for (; v <= 40 || writes.load() < 100000; ++v) {
    ASSERT_OK(c->Checkpoint(kName, v));
    if (v % 4 == 0) ASSERT_OK(c->Wait(kName, v, Level::kLocal));
    if (v > 400) break;
  }
  stop = true;
  writer.join();
  ASSERT_OK(c->Checkpoint(kName, v));
  ASSERT_OK(c->Wait(kName, v, Level::kLocal));
  const std::vector<uint8_t> expect(mem_, mem_ + kBytes);
  std::memset(mem_, 0, kBytes);
  ASSERT_OK(c->Restore(kName, v));
  EXPECT_EQ(std::memcmp(mem_, expect.data(), kBytes), 0) << "version " << v << " after " << writes.load()
                                                          << " racing writes";
  EXPECT_GT(c->GetStats().changes.layered_versions, 0u);
  ASSERT_OK(c->Close());
}

INSTANTIATE_TEST_SUITE_P(Modes, LayeredCaptureTest,
                         ::testing::Values(ChangeDetection::kHash, ChangeDetection::kPages, ChangeDetection::kAuto),
                         [](const auto& p) { return std::string(ChangeDetectionName(p.param)); });

// Memory that cannot be tracked page by page (not page-aligned): `pages`
// hashes it instead, says so once in the stats, and still stores changes only.
TEST(LayeredCaptureFallbackTest, UnalignedMemoryIsHashedUnderPages) {
  TempDir tmp("layered_fallback");
  Config config = ScratchConfig(tmp.path(), 4 * kMiB, 64 * kKiB);
  config.changes = ChangeDetection::kPages;
  std::vector<uint8_t> storage(kBytes + 1, 3);
  uint8_t* mem = storage.data() + (reinterpret_cast<uintptr_t>(storage.data()) % kPage == 0 ? 1 : 0);
  auto c = Client::Open(config);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_OK((*c)->Protect(7, mem, kBytes));
  ASSERT_OK((*c)->Checkpoint(kName, 1));
  ASSERT_OK((*c)->Wait(kName, 1, Level::kLocal));
  mem[3] = 4;
  ASSERT_OK((*c)->Checkpoint(kName, 2));
  ASSERT_OK((*c)->Wait(kName, 2, Level::kLocal));
  const Stats s = (*c)->GetStats();
  EXPECT_EQ(s.changes.fallbacks, 1u);
  EXPECT_NE(s.changes.fallback_note.find("region 7"), std::string::npos) << s.changes.fallback_note;
  EXPECT_NE(s.changes.fallback_note.find("hashed instead"), std::string::npos) << s.changes.fallback_note;
  EXPECT_EQ(s.changes.layered_versions, 1u);
  EXPECT_GT(s.changes.bytes_hashed, 0u);
  mem[3] = 0;
  ASSERT_OK((*c)->Restore(kName, 2));
  EXPECT_EQ(mem[3], 4);
  ASSERT_OK((*c)->Close());
}

// Two clients in one process checkpoint the same tracked memory: the second
// cannot track what the first tracks (one userfaultfd per range) and hashes
// it; both store changes only and restore byte-exact.
TEST(LayeredCaptureFallbackTest, TwoClientsOverTheSameTrackedMemory) {
  TempDir tmp("layered_two_clients");
  auto b = TrackedBuffer::Create(kBytes);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto* mem = static_cast<uint8_t*>(b->data());
  std::vector<std::unique_ptr<Client>> clients;
  for (const char* dir : {"/one", "/two"}) {
    Config config = ScratchConfig(tmp.path() + dir, 4 * kMiB, 64 * kKiB);
    config.changes = ChangeDetection::kPages;
    auto c = Client::Open(config);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_OK((*c)->Protect(1, mem, kBytes));
    clients.push_back(std::move(*c));
  }
  std::vector<std::vector<uint8_t>> content;
  for (int64_t v = 1; v <= 3; ++v) {
    mem[v * kPage] = static_cast<uint8_t>(v);
    content.emplace_back(mem, mem + kBytes);
    for (auto& c : clients) {
      ASSERT_OK(c->Checkpoint(kName, v));
      ASSERT_OK(c->Wait(kName, v, Level::kLocal));
    }
  }
  for (auto& c : clients) {
    EXPECT_EQ(c->GetStats().changes.layered_versions, 2u);
    std::memset(mem, 0, kBytes);
    ASSERT_OK(c->Restore(kName, 2));
    EXPECT_EQ(std::memcmp(mem, content[1].data(), kBytes), 0);
  }
  const Stats first = clients[0]->GetStats();
  const Stats second = clients[1]->GetStats();
  if (first.changes.fallbacks > 0) GTEST_SKIP() << "no page tracking here: " << first.changes.fallback_note;
  if (first.changes.tracker != "mprotect") {  // one process-wide handler tracks for both
    EXPECT_EQ(second.changes.fallbacks, 1u) << second.changes.fallback_note;
  }
  for (auto& c : clients) ASSERT_OK(c->Close());
}

}  // namespace
}  // namespace cairn
