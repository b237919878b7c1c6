// The global manifest (manifest.hpp; docs/format.md 3.6): the two slots
// written in turn, records that change nothing write nothing, a torn or
// damaged newer slot falls back to the older one, a crash at any step of a
// record leaves a valid manifest, and version 1 files are read and replaced.
#include "redundancy/manifest.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "testing/fs/fault_fs.hpp"
#include "testing/test_util.hpp"

namespace cairn::collective {
namespace {

using test::FaultFs;
using test::FaultOp;

constexpr Manifest kShape{.ranks = 4, .ranks_per_node = 2};

class GlobalManifestTest : public test::ScratchDirTest {
 protected:
  GlobalManifestTest() : ScratchDirTest("manifest") {}

  std::string root() const { return tmp_.path() + "/root"; }
  std::string path() const { return root() + "/sim/global"; }

  Status Record(int64_t committed, int64_t persistent = -1, const Manifest& shape = kShape) {
    return RecordGlobal(&fs_, config_, root(), "sim", shape, committed, persistent);
  }
  Result<Manifest> Read() { return ReadManifest(&fs_, root(), "sim"); }

  std::string Bytes() const {
    std::ifstream in(path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void SetBytes(const std::string& bytes) const {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  std::string Slot(const std::string& bytes, int i) const {
    return bytes.substr(static_cast<size_t>(i) * kManifestSlotBytes, kManifestSlotBytes);
  }

  FaultFs fs_;
  Config config_ = MakeConfig();
};

TEST_F(GlobalManifestTest, RecordsAlternateBetweenTheSlotsInPlace) {
  ASSERT_OK(Record(1));
  std::string b1 = Bytes();
  ASSERT_EQ(b1.size(), kManifestBytes);
  EXPECT_EQ(b1.substr(0, 8), "CAIRNGLB");
  EXPECT_EQ(Slot(b1, 1), std::string(kManifestSlotBytes, '\0'));  // created: slot 1 empty

  fs_.Reset();
  ASSERT_OK(Record(2, 1));
  // In place: one write and one fdatasync, no rename, no directory fsync,
  // and the newer record went to the other slot (slot 0 untouched).
  EXPECT_EQ(fs_.calls(FaultOp::kWrite), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kSync), 1u);
  EXPECT_EQ(fs_.calls(FaultOp::kRename), 0u);
  EXPECT_EQ(fs_.calls(FaultOp::kSyncDir), 0u);
  const std::string b2 = Bytes();
  ASSERT_EQ(b2.size(), kManifestBytes);
  EXPECT_EQ(Slot(b2, 0), Slot(b1, 0));
  EXPECT_NE(Slot(b2, 1), Slot(b1, 1));

  ASSERT_OK(Record(3));
  const std::string b3 = Bytes();
  EXPECT_EQ(Slot(b3, 1), Slot(b2, 1));  // the older slot 0 took it
  auto m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->ranks, 4);
  EXPECT_EQ(m->committed, 3);
  EXPECT_EQ(m->persistent, 1);  // values only grow
  EXPECT_EQ(m->ranks_per_node, 2);
}

TEST_F(GlobalManifestTest, ARecordOfValuesAlreadyThereWritesNothing) {
  ASSERT_OK(Record(5, 3));
  fs_.Reset();
  ASSERT_OK(Record(5, -1));
  ASSERT_OK(Record(4, 3));
  ASSERT_OK(Record(5, 3));
  EXPECT_EQ(fs_.calls(FaultOp::kWrite), 0u);
  EXPECT_EQ(fs_.calls(FaultOp::kSync), 0u);
  EXPECT_EQ(fs_.calls(FaultOp::kRename), 0u);
  ASSERT_OK(Record(5, 4));
  EXPECT_EQ(fs_.calls(FaultOp::kWrite), 1u);
}

TEST_F(GlobalManifestTest, ATornOrDamagedNewerSlotFallsBackToTheOlderOne) {
  ASSERT_OK(Record(1));  // slot 0, sequence 1
  const std::string one = Bytes();
  ASSERT_OK(Record(2));  // slot 1, sequence 2
  ASSERT_OK(Record(3));  // slot 0, sequence 3
  const std::string three = Bytes();
  // Slot 0 torn: the start of record 3 over the rest of record 1.
  std::string torn = three;
  torn.replace(24, 40, one.substr(24, 40));
  SetBytes(torn);
  auto m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->committed, 2);
  // One damaged byte (the committed field) does the same.
  std::string flipped = three;
  flipped[32] = static_cast<char>(flipped[32] ^ 0x01);
  SetBytes(flipped);
  m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->committed, 2);
  // The next record overwrites the invalid slot, never the valid one.
  ASSERT_OK(Record(4));
  const std::string four = Bytes();
  EXPECT_EQ(Slot(four, 1), Slot(three, 1));
  m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->committed, 4);
  // Both slots damaged: kCorrupt naming the file; a record starts afresh.
  std::string both = four;
  both[60] = static_cast<char>(both[60] ^ 0x01);
  both[kManifestSlotBytes + 60] = static_cast<char>(both[kManifestSlotBytes + 60] ^ 0x01);
  SetBytes(both);
  m = Read();
  EXPECT_EQ(m.status().code(), Code::kCorrupt);
  EXPECT_NE(m.status().message().find(path()), std::string::npos) << m.status().ToString();
  EXPECT_NE(m.status().message().find("neither of its two slots"), std::string::npos);
  ASSERT_OK(Record(5));
  m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->committed, 5);
}

TEST_F(GlobalManifestTest, AShortOrForeignFileIsCorrupt) {
  ASSERT_OK(Record(1));
  SetBytes(Bytes().substr(0, 100));
  auto m = Read();
  EXPECT_EQ(m.status().code(), Code::kCorrupt);
  EXPECT_NE(m.status().message().find("100 bytes"), std::string::npos) << m.status().ToString();
}

// A crash at every mutating step of a creation and of an in-place record,
// losing, tearing or keeping what was not synced: the manifest then reads,
// and holds the old record or the new one; once a record returned OK, the
// new one.
TEST_F(GlobalManifestTest, ACrashAtAnyStepLeavesAValidRecord) {
  for (auto unsynced : {test::Unsynced::kDrop, test::Unsynced::kTear, test::Unsynced::kKeep}) {
    for (int64_t old_value : {int64_t{-1}, int64_t{1}, int64_t{2}}) {  // -1: no file yet
      for (uint64_t k = 1;; ++k) {
        SCOPED_TRACE("unsynced " + std::to_string(static_cast<int>(unsynced)) + ", old " +
                     std::to_string(old_value) + ", cut at " + std::to_string(k));
        std::filesystem::remove_all(root());
        // The name's directory exists (its versions are there) and is durable.
        std::filesystem::create_directories(root() + "/sim");
        for (int64_t v = 1; v <= old_value; ++v) ASSERT_OK(Record(v));
        ASSERT_OK(fs_.TrackPowerLoss(root()));
        fs_.ArmPowerCut(k);
        const Status s = Record(old_value + 1);
        const bool cut = fs_.power_cut();
        ASSERT_OK(fs_.PowerLoss(unsynced));
        auto m = Read();
        if (old_value < 0 && m.status().code() == Code::kNotFound) {
          EXPECT_FALSE(s.ok());
        } else {
          ASSERT_OK(m.status());
          if (s.ok()) {
            EXPECT_EQ(m->committed, old_value + 1);
          }
          EXPECT_TRUE(m->committed == old_value || m->committed == old_value + 1) << m->committed;
        }
        if (!cut) break;
      }
    }
  }
}

TEST_F(GlobalManifestTest, AVersion1FileIsReadAndReplacedByTheNextRecord) {
  std::filesystem::create_directories(root() + "/sim");
  SetBytes("cairn-global 1\nranks 4\ncommitted 3\npersistent 2\nranks_per_node 2\n");
  auto m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->committed, 3);
  EXPECT_EQ(m->persistent, 2);
  ASSERT_OK(Record(3, 1));  // nothing new: stays version 1
  EXPECT_EQ(Bytes().substr(0, 14), "cairn-global 1");
  ASSERT_OK(Record(4));
  const std::string b = Bytes();
  ASSERT_EQ(b.size(), kManifestBytes);
  m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->committed, 4);
  EXPECT_EQ(m->persistent, 2);  // carried over
}

TEST_F(GlobalManifestTest, AJobOfAnotherShapeStartsAfresh) {
  ASSERT_OK(Record(7, 7));
  ASSERT_OK(Record(2, -1, Manifest{.ranks = 3, .ranks_per_node = 0}));
  auto m = Read();
  ASSERT_OK(m.status());
  EXPECT_EQ(m->ranks, 3);
  EXPECT_EQ(m->committed, 2);
  EXPECT_EQ(m->persistent, -1);
  EXPECT_EQ(m->ranks_per_node, 0);
}

}  // namespace
}  // namespace cairn::collective
