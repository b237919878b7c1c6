#include "engine/catalog.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "testing/entry_state.hpp"

namespace cairn::core {
namespace {

EntryPtr Make(format::EntryKind kind, const std::string& name, int64_t number) {
  auto e = std::make_shared<Entry>();
  e->kind = kind;
  e->name = name;
  e->number = number;
  return e;
}

constexpr auto kCkpt = format::EntryKind::kCheckpoint;
constexpr auto kStep = format::EntryKind::kHistoryStep;

TEST(CatalogTest, AddRanksInOrderAndFindsByKey) {
  Catalog c;
  auto a = Make(kCkpt, "x", 1), b = Make(kCkpt, "x", 2);
  c.Add(a);
  c.Add(b);
  EXPECT_LT(a->seq, b->seq);
  EXPECT_EQ(c.Find(kCkpt, "x", 1), a);
  EXPECT_EQ(c.Find(kCkpt, "x", 2), b);
  EXPECT_EQ(c.Find(kStep, "x", 1), nullptr);  // kind is part of the key
  EXPECT_EQ(c.Find(kCkpt, "y", 1), nullptr);
  c.Remove(*a);
  EXPECT_EQ(c.Find(kCkpt, "x", 1), nullptr);
  EXPECT_EQ(c.Find(kCkpt, "x", 2), b);
  c.ClearEntries();
  EXPECT_EQ(c.Find(kCkpt, "x", 2), nullptr);
}

// Settled (VELOC_Cleanup's wait): every checkpoint of the name committed
// locally and, with a persistent tier, persisted, skipped or failed there.
TEST(CatalogTest, SettledWaitsForTheLastTierOfEveryVersionOfTheName) {
  Catalog c;
  auto a = Make(kCkpt, "x", 1), b = Make(kCkpt, "x", 2), other = Make(kCkpt, "y", 1);
  c.Add(a);
  c.Add(b);
  c.Add(other);
  EXPECT_FALSE(c.Settled("x", false));
  test::StateOf(*a).local.committed = test::StateOf(*b).local.committed = true;
  EXPECT_TRUE(c.Settled("x", false));  // no persistent tier: local is the last
  EXPECT_FALSE(c.Settled("x", true));
  test::StateOf(*a).persist.committed = true;
  EXPECT_FALSE(c.Settled("x", true));
  test::StateOf(*b).persist.skipped = true;  // not an L4 turn
  EXPECT_TRUE(c.Settled("x", true));
  test::StateOf(*b).persist.skipped = false;
  test::StateOf(*b).persist.error =
      Status::Io("disk full");  // its copy failed: nothing more will come
  EXPECT_TRUE(c.Settled("x", true));
  auto d = Make(kCkpt, "x", 3);
  c.Add(d);
  test::StateOf(*d).local.error = Status::Io("write failed");  // failed: settled
  EXPECT_TRUE(c.Settled("x", true));
  EXPECT_TRUE(c.Settled("z", true));  // no version at all
  EXPECT_FALSE(c.Settled("y", false));  // other names count apart
}

TEST(CatalogTest, StepsJoinTheirHistoryUntilDropped) {
  Catalog c;
  EXPECT_FALSE(c.HasHistory("h"));
  c.OpenHistory("h");
  ASSERT_TRUE(c.HasHistory("h"));
  auto s1 = Make(kStep, "h", 1), s2 = Make(kStep, "h", 2);
  c.Add(s1);
  c.Add(s2);
  EXPECT_EQ(c.FindHistory("h")->steps, (std::set<int64_t>{1, 2}));
  c.Remove(*s1);  // consumed: the key goes, the step stays until dropped
  EXPECT_EQ(c.FindHistory("h")->steps.count(1), 1u);
  c.DropStep("h", 1);
  EXPECT_EQ(c.FindHistory("h")->steps, std::set<int64_t>{2});
  c.DropStep("gone", 1);  // no such history: nothing happens
  c.CloseHistory("h");
  EXPECT_FALSE(c.HasHistory("h"));
  EXPECT_EQ(c.FindHistory("h"), nullptr);
  EXPECT_EQ(c.Find(kStep, "h", 2), s2);  // entries outlive their history's listing
}

TEST(CatalogTest, RanksContinueAcrossKinds) {
  Catalog c;
  c.OpenHistory("h");
  auto a = Make(kStep, "h", 0), b = Make(kCkpt, "h", 0);
  c.Add(a);
  c.Add(b);
  EXPECT_EQ(b->seq, a->seq + 1);
  EXPECT_EQ(c.histories().size(), 1u);
}

}  // namespace
}  // namespace cairn::core
