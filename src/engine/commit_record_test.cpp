#include "engine/commit_record.hpp"

#include <gtest/gtest.h>

namespace cairn::core {
namespace {

TEST(CommitRecordTest, NothingRecordedReadsMinusOne) {
  CommitRecord r;
  EXPECT_EQ(r.NewestLocal("a").version, -1);
  EXPECT_EQ(r.NewestLocal("a").realtime_ns, -1);
  EXPECT_EQ(r.Global("a"), -1);
  EXPECT_EQ(r.Common("a"), -1);
}

TEST(CommitRecordTest, TheNewestLocalCommitOnlyRises) {
  CommitRecord r;
  r.NoteLocal("a", 3, 300);
  r.NoteLocal("a", 2, 400);  // committed later, but older: the newest stays
  EXPECT_EQ(r.NewestLocal("a").version, 3);
  EXPECT_EQ(r.NewestLocal("a").realtime_ns, 300);
  r.NoteLocal("a", 5, 500);
  EXPECT_EQ(r.NewestLocal("a").version, 5);
  EXPECT_EQ(r.NewestLocal("a").realtime_ns, 500);
  EXPECT_EQ(r.NewestLocal("b").version, -1);  // per name
}

TEST(CommitRecordTest, GlobalAndCommonRiseApartAndSayWhenGlobalRose) {
  CommitRecord r;
  EXPECT_TRUE(r.RaiseGlobal("a", 2, 3));
  EXPECT_FALSE(r.RaiseGlobal("a", 2, 4));  // global the same: no retention pass
  EXPECT_EQ(r.Common("a"), 4);             // common rose all the same
  EXPECT_FALSE(r.RaiseGlobal("a", 1, 1));  // lower values change nothing
  EXPECT_EQ(r.Global("a"), 2);
  EXPECT_EQ(r.Common("a"), 4);
  EXPECT_TRUE(r.RaiseGlobal("a", 4, 4));
  EXPECT_EQ(r.Global("a"), 4);
  EXPECT_EQ(r.Global("b"), -1);
}

}  // namespace
}  // namespace cairn::core
