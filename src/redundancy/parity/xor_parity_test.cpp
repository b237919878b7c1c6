// The XOR sets of docs/format.md 3.9 (xor_parity.hpp), which the mpirun
// tests reach only with one rank per node: several ranks per node, short
// last runs, uneven nodes and the configuration errors.
#include "redundancy/parity/xor_parity.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "redundancy/parity/rs_code.hpp"
#include "redundancy/parity/xor_parity_impl.hpp"

namespace cairn {
namespace {

std::vector<int> Nodes(int ranks, int per_node) {
  std::vector<int> node_of;
  for (int r = 0; r < ranks; ++r) node_of.push_back(r / per_node);
  return node_of;
}

TEST(XorSets, OneRankPerNodeCutIntoRunsOfG) {
  auto sets = parity::SetsFromNodes(Nodes(8, 1), 5, 4);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  EXPECT_EQ(sets->all, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(sets->members(), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(sets->position, 1);
}

TEST(XorSets, ColumnsOfNodesWithSeveralRanks) {
  // 4 nodes of 2 ranks, g = 2: rank r mod 2 + 2 * (2 * floor(n / 2) + j).
  auto sets = parity::SetsFromNodes(Nodes(8, 2), 3, 2);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  EXPECT_EQ(sets->all, (std::vector<std::vector<int>>{{0, 2}, {4, 6}, {1, 3}, {5, 7}}));
  EXPECT_EQ(sets->members(), (std::vector<int>{1, 3}));
}

TEST(XorSets, AShortLastRunJoinsTheOneBefore) {
  auto sets = parity::SetsFromNodes(Nodes(5, 1), 0, 2);
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(sets->all, (std::vector<std::vector<int>>{{0, 1}, {2, 3, 4}}));
}

TEST(XorSets, DefaultIsFourOrTheNodes) {
  auto three = parity::SetsFromNodes(Nodes(3, 1), 0, 0);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->all, (std::vector<std::vector<int>>{{0, 1, 2}}));
  auto nine = parity::SetsFromNodes(Nodes(9, 1), 0, 0);
  ASSERT_TRUE(nine.ok());
  EXPECT_EQ(nine->all, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7, 8}}));
}

TEST(XorSets, UnevenNodesKeepMembersOnDistinctNodes) {
  // Node 0 has ranks 0, 1, 2; nodes 1 and 2 one rank each: column 1 is rank
  // 1 alone -> an error naming it.
  auto sets = parity::SetsFromNodes({0, 0, 1, 2}, 0, 2);
  ASSERT_FALSE(sets.ok());
  EXPECT_EQ(sets.status().code(), Code::kConfig);
  EXPECT_NE(sets.status().message().find("rank 1 would be in a XOR set (L3) of 1 member(s)"),
            std::string::npos);
  // Nodes of 2, 2 and 1 ranks: column 1 has two ranks on distinct nodes.
  auto ok = parity::SetsFromNodes({0, 0, 1, 1, 2}, 4, 3);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->all, (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3}}));
}

TEST(XorSets, ConfigErrorsSayWhy) {
  auto big = parity::SetsFromNodes(Nodes(4, 1), 0, 5);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::kConfig);
  EXPECT_NE(big.status().message().find("must not exceed the number of nodes"), std::string::npos);
  auto one = parity::SetsFromNodes(Nodes(4, 1), 0, 1);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("more members than the 1 lost ones"), std::string::npos);
  auto single = parity::SetsFromNodes(Nodes(4, 4), 0, 0);
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.status().code(), Code::kConfig);
}

// Reed-Solomon sets: e = 2 by default, more members than e on distinct
// nodes, and xor's limits apply with e in place of 1.
TEST(RsSets, MoreMembersThanTheLostOnesTheyRebuild) {
  if (!parity::impl::HaveReedSolomon()) GTEST_SKIP() << "built without ISA-L (CAIRN_WITH_ISAL)";
  auto sets = parity::SetsFromNodes(Nodes(8, 1), 6, 4, L3Code::kRs);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  EXPECT_EQ(sets->all, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(sets->parity, 2u);
  EXPECT_EQ(sets->stripes().k(), 2u);
  auto three = parity::SetsFromNodes(Nodes(8, 1), 0, 4, L3Code::kRs, 3);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->parity, 3u);
  auto small = parity::SetsFromNodes(Nodes(4, 1), 0, 2, L3Code::kRs);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), Code::kConfig);
  EXPECT_NE(small.status().message().find(
                "Reed-Solomon sets (L3) need more members than the 2 lost ones"),
            std::string::npos)
      << small.status().ToString();
  // Nodes of 2, 2, 1 and 1 ranks: column 1 has two ranks, too few for e = 2.
  auto column = parity::SetsFromNodes({0, 0, 1, 1, 2, 3}, 0, 3, L3Code::kRs);
  ASSERT_FALSE(column.ok());
  EXPECT_NE(column.status().message().find("set (L3) of 2 member(s)"), std::string::npos)
      << column.status().ToString();
}

// XorOf: the XOR of any number of sources in one pass, the destination
// among them or not, the tail past the last full vector included.
TEST(XorOf, XorsEverySourceIntoTheDestination) {
  constexpr size_t kN = 1000;  // not a multiple of the 32-byte vector
  std::vector<uint8_t> a(kN), b(kN), c(kN), dst(kN, 0xee);
  for (size_t i = 0; i < kN; ++i) {
    a[i] = static_cast<uint8_t>(i * 3);
    b[i] = static_cast<uint8_t>(i * 7 + 1);
    c[i] = static_cast<uint8_t>(i * 11 + 2);
  }
  const uint8_t* three[3] = {a.data(), b.data(), c.data()};
  parity::impl::XorOf(dst.data(), three, 3, kN);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(dst[i], a[i] ^ b[i] ^ c[i]) << i;
  // dst among the sources: dst ^= b (XorInto).
  parity::impl::XorInto(dst.data(), b.data(), kN);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(dst[i], a[i] ^ c[i]) << i;
  const uint8_t* one[1] = {c.data()};
  parity::impl::XorOf(dst.data(), one, 1, kN);
  EXPECT_EQ(dst, c);
  parity::impl::XorOf(dst.data(), nullptr, 0, kN);
  EXPECT_EQ(dst, std::vector<uint8_t>(kN, 0));
}

}  // namespace
}  // namespace cairn
