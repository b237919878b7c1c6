#include "tiers/clean_list.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "testing/entry_state.hpp"

namespace cairn::core {
namespace {

Entry MakeEntry(uint64_t seq, size_t blocks) {
  Entry e;
  e.seq = seq;
  test::StateOf(e).blocks.resize(blocks);
  return e;
}

bool NeverBusy(const Entry&) { return false; }

TEST(CleanListTest, AddRemoveMirrorTheFlag) {
  CleanList list(&BlockState::clean);
  Entry e = MakeEntry(1, 3);
  list.Add(e, 1);
  list.Add(e, 1);  // no-op
  EXPECT_TRUE(e.blocks()[1].clean);
  EXPECT_FALSE(e.blocks()[1].dclean);  // only its own flag
  EXPECT_EQ(list.size(), 1u);
  list.Remove(e, 1);
  list.Remove(e, 1);  // no-op
  EXPECT_FALSE(e.blocks()[1].clean);
  EXPECT_EQ(list.size(), 0u);
}

TEST(CleanListTest, TakeOldestEntryLowestBlockFirst) {
  CleanList list(&BlockState::dclean);
  Entry young = MakeEntry(7, 2), old = MakeEntry(3, 4);
  list.Add(young, 0);
  list.Add(old, 2);
  list.Add(old, 1);
  std::vector<std::pair<uint64_t, uint32_t>> taken;
  while (auto v = list.Take(UINT64_MAX, NeverBusy)) {
    EXPECT_FALSE(v->first->blocks()[v->second].dclean) << "taken blocks are unlisted";
    taken.emplace_back(v->first->seq, v->second);
  }
  const std::vector<std::pair<uint64_t, uint32_t>> want{{3, 1}, {3, 2}, {7, 0}};
  EXPECT_EQ(taken, want);
}

TEST(CleanListTest, TakeStopsAtBelowSeqAndSkipsBusyEntries) {
  CleanList list(&BlockState::clean);
  Entry a = MakeEntry(1, 1), b = MakeEntry(2, 1), c = MakeEntry(5, 1);
  list.Add(a, 0);
  list.Add(b, 0);
  list.Add(c, 0);
  test::StateOf(a).pins = 1;
  auto busy = [](const Entry& e) { return e.pins() > 0; };
  auto v = list.Take(5, busy);  // a is busy, c is not older than 5
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->first, &b);
  EXPECT_FALSE(list.Take(5, busy).has_value());
  EXPECT_TRUE(a.blocks()[0].clean);  // still listed, for later
  test::StateOf(a).pins = 0;
  v = list.Take(5, busy);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->first, &a);
  EXPECT_EQ(list.size(), 1u);
}

TEST(CleanListTest, CountEvictableForSkipsOwnBusyAndYoungerBlocks) {
  CleanList list(&BlockState::clean);
  Entry a = MakeEntry(1, 2), busy_one = MakeEntry(2, 1), self = MakeEntry(3, 2), young = MakeEntry(9, 1);
  list.Add(a, 0);
  list.Add(a, 1);
  list.Add(busy_one, 0);
  list.Add(self, 0);
  list.Add(young, 0);
  test::StateOf(busy_one).reads.prefetching = true;
  auto busy = [](const Entry& e) { return e.reads().prefetching; };
  EXPECT_EQ(list.CountEvictableFor(self, 10, busy), 2u);  // a's two blocks only
  EXPECT_EQ(list.CountEvictableFor(self, 1, busy), 1u);   // stops once enough
  EXPECT_EQ(list.CountEvictableFor(young, 10, busy), 3u);  // a x2 + self's block
  EXPECT_EQ(list.size(), 5u);                              // counting takes nothing
}

}  // namespace
}  // namespace cairn::core
