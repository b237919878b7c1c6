#include "core/catalog.hpp"

#include <memory>

#include <gtest/gtest.h>

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
