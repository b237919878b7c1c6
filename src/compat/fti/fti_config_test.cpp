// The pure parts of libcairn_fti: FTI_Snapshot's schedule and the
// configuration parser (src/compat/fti/fti_snapshot.hpp, fti_config.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compat/fti/fti_config.hpp"
#include "compat/fti/fti_snapshot.hpp"

namespace cairn::fti {
namespace {

std::vector<int> Levels(Schedule s, int64_t upto) {
  std::vector<int> out;
  for (int64_t c = 1; c <= upto; ++c) out.push_back(s.Due(c));
  return out;
}

TEST(FtiSchedule, HighestDueLevelWins) {
  Schedule s;
  s.interval = {2, 0, 0, 3};
  EXPECT_EQ(Levels(s, 7), (std::vector<int>{0, 1, 4, 1, 0, 4, 0}));
}

TEST(FtiSchedule, OffLevelsNeverDue) {
  Schedule s;
  EXPECT_EQ(Levels(s, 5), (std::vector<int>{0, 0, 0, 0, 0}));
}

TEST(FtiSchedule, SkipsMissedIntervals) {
  Schedule s;
  s.interval = {5, 0, 0, 0};
  EXPECT_EQ(s.Due(3), 0);
  EXPECT_EQ(s.Due(17), 1);  // 5, 10, 15 missed: one checkpoint
  EXPECT_EQ(s.next[0], 20);
  EXPECT_EQ(s.Due(19), 0);
  EXPECT_EQ(s.Due(20), 1);
}

const char* kGood =
    "[Basic]\nHead = 0\nNode_size = 2\nCkpt_dir = ./Local\t#/path/to/local/storage/\n"
    "Glbl_dir = ./Global ; comment\nCkpt_L1 = 3\nckpt_l4 = 11\nenable_dcp = 1\n"
    "dcp_block_size = 4096\nmeta_dir = ./Meta\n[restart]\nfailure = 0\n[advanced]\nlocal_test = 1\n";

TEST(FtiConfig, ParsesFtisExample) {
  auto c = ParseConfig(kGood, "config.fti");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ckpt_dir, "./Local");
  EXPECT_EQ(c->glbl_dir, "./Global");
  EXPECT_EQ(c->node_size, 2);
  EXPECT_EQ(c->interval[0], 3);
  EXPECT_EQ(c->interval[3], 11);
  EXPECT_TRUE(c->dcp);
  EXPECT_EQ(c->dcp_block_size, 4096);
  EXPECT_TRUE(c->local_test);
  ASSERT_EQ(c->notes.size(), 2u);  // meta_dir, failure
  EXPECT_NE(c->notes[0].find("meta_dir has no effect"), std::string::npos);
}

void ExpectError(const std::string& text, const std::string& want) {
  auto c = ParseConfig(text, "f.fti");
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
}

TEST(FtiConfig, RejectsWhatCairnCannotDo) {
  ExpectError(std::string(kGood) + "[basic]\nhead = 1\n", "dedicated FTI head rank");
  ExpectError(std::string(kGood) + "[basic]\nenable_staging = 1\n", "staging");
  ExpectError(std::string(kGood) + "[basic]\nckpt_l9 = 1\n", "f.fti:16: unknown key 'ckpt_l9' in [basic]");
  ExpectError(std::string(kGood) + "[basic]\nverbosity = 7\n", "from 1 to 4");
  ExpectError("[basic]\nckpt_dir = a\n", "glbl_dir is missing");
  ExpectError("ckpt_dir = a\n", "key before any [section]");
  ExpectError("[basic\n", "is not a [section] line");
}

// kGood with `from` replaced by `to`.
std::string Good(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

TEST(FtiConfig, RejectsBadFilesNamingTheProblem) {
  ExpectError(std::string(kGood) + "[extra]\nx = 1\n", "unknown section [extra]");
  ExpectError(Good("Ckpt_L1 = 3", "Ckpt_L1 = often"), "ckpt_l1 is 'often'; it must be a whole number");
  ExpectError(Good("dcp_block_size = 4096", "dcp_block_size = 100"),
              "dcp_block_size is '100'; it must be a whole number from 512");
  ExpectError(std::string(kGood) + "[basic]\nckpt_l2\n", "'ckpt_l2' is not 'key = value'");
}

TEST(FtiConfig, CairnSectionAsksForTheOptimalInterval) {
  auto off = ParseConfig(kGood, "config.fti");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->auto_level, 0);  // FTI's own files keep FTI's fixed intervals
  auto c = ParseConfig(std::string(kGood) + "[cairn]\nauto_level = 2\nmtbf_s = 3600\n", "config.fti");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->auto_level, 2);
  EXPECT_EQ(c->mtbf_s, 3600);
  ExpectError(std::string(kGood) + "[cairn]\nauto_level = 5\n", "from 0 to 4");
  ExpectError(std::string(kGood) + "[cairn]\nmtbf_s = 0\n", "from 1 to");
  ExpectError(std::string(kGood) + "[cairn]\nmtbf = 10\n", "unknown key 'mtbf' in [cairn]");
}

// dcp_stack_size as FTI reads it (its examples set 10): a stack of n dCP
// checkpoints per file is a full version and n - 1 layers; above 10 FTI
// warns and takes 5.
TEST(FtiConfig, DcpStackSizeAsFtiReadsIt) {
  const std::string head = "[basic]\nckpt_dir = /l\nglbl_dir = /g\nenable_dcp = 1\n";
  auto ten = ParseConfig(head + "dcp_stack_size = 10\n", "c.fti");
  ASSERT_TRUE(ten.ok()) << ten.status().ToString();
  EXPECT_EQ(ten->dcp_stack_size, 10);
  auto big = ParseConfig(head + "dcp_stack_size = 12\n", "c.fti");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->dcp_stack_size, 5);
  ASSERT_FALSE(big->notes.empty());
  EXPECT_NE(big->notes.back().find("5 is used"), std::string::npos) << big->notes.back();
  auto zero = ParseConfig(head + "dcp_stack_size = 0\n", "c.fti");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("c.fti:5"), std::string::npos) << zero.status().ToString();
}

}  // namespace
}  // namespace cairn::fti
