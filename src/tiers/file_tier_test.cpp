#include "tiers/file_tier.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "format/naming.hpp"
#include "testing/test_util.hpp"

namespace cairn::tiers {
namespace {

using format::EntryKind;

class FileTierTest : public ::testing::Test {
 protected:
  void Touch(const std::string& path) { std::ofstream(path) << "x"; }
  test::TempDir dir_{"file-tier"};
};

TEST_F(FileTierTest, ListsOnlyCommittedEntriesOfTheAskedKindInOrder) {
  FileTier tier(Level::kLocal, dir_.path(), os::FileSystem::Default(), {});
  ASSERT_TRUE(tier.EnsureNameDir("sim").ok());
  Touch(tier.EntryPath("sim", EntryKind::kCheckpoint, 12));
  Touch(tier.EntryPath("sim", EntryKind::kCheckpoint, 3));
  Touch(tier.EntryPath("sim", EntryKind::kHistoryStep, 7));
  Touch(tier.NameDir("sim") + "/." + format::EntryFileName(EntryKind::kCheckpoint, 20) + ".123.tmp");
  Touch(tier.NameDir("sim") + "/notes.txt");

  auto versions = tier.ListCommitted("sim", EntryKind::kCheckpoint);
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(*versions, (std::vector<int64_t>{3, 12}));  // no temp, no step, no foreign file
  auto steps = tier.ListCommitted("sim", EntryKind::kHistoryStep);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<int64_t>{7}));
}

TEST_F(FileTierTest, MissingNameDirectoryIsAnEmptyList) {
  FileTier tier(Level::kLocal, dir_.path(), os::FileSystem::Default(), {});
  auto versions = tier.ListCommitted("never", EntryKind::kCheckpoint);
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_TRUE(versions->empty());
  EXPECT_FALSE(tier.Exists("never", EntryKind::kCheckpoint, 1));
}

TEST_F(FileTierTest, RemoveEntryIsIdempotent) {
  FileTier tier(Level::kPersistent, dir_.path(), os::FileSystem::Default(), {});
  ASSERT_TRUE(tier.EnsureNameDir("a").ok());
  Touch(tier.EntryPath("a", EntryKind::kCheckpoint, 1));
  EXPECT_TRUE(tier.Exists("a", EntryKind::kCheckpoint, 1));
  EXPECT_TRUE(tier.RemoveEntry("a", EntryKind::kCheckpoint, 1).ok());
  EXPECT_FALSE(tier.Exists("a", EntryKind::kCheckpoint, 1));
  EXPECT_TRUE(tier.RemoveEntry("a", EntryKind::kCheckpoint, 1).ok());  // absent: still ok
  EXPECT_EQ(tier.level(), Level::kPersistent);
}

TEST_F(FileTierTest, PathsFollowTheStoreLayout) {
  FileTier tier(Level::kLocal, "/scratch", os::FileSystem::Default(), {});
  EXPECT_EQ(tier.NameDir("sim"), "/scratch/sim");
  EXPECT_EQ(tier.EntryPath("sim", EntryKind::kCheckpoint, 42),
            "/scratch/sim/v00000000000000000042.cairn");
  EXPECT_EQ(tier.EntryPath("sim", EntryKind::kHistoryStep, 7),
            "/scratch/sim/h00000000000000000007.cairn");
}

}  // namespace
}  // namespace cairn::tiers
