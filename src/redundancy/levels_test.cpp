// The redundancy levels' owner (levels.hpp) on a group of one member: whose
// turn a wait is, the settings' errors and the restore counts. The levels'
// transfers between members are tested under mpirun (tests/mpi) and with the
// in-process group of partner_transfer_test.cpp.
#include "redundancy/levels.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "redundancy/solo_group.hpp"
#include "testing/group/fake_checkpoints.hpp"

namespace cairn {
namespace {

// Clears the levels' environment variables a test set.
class LevelsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"CAIRN_L2_EVERY", "CAIRN_L3_EVERY", "CAIRN_L3_GROUP", "CAIRN_L4_EVERY"})
      unsetenv(v);
  }
  SoloGroup group_;  // one process: no partner, no exchange
};

TEST_F(LevelsTest, L4TurnsAreEveryNthCheckpointAndOnlyTheyArePersisted) {
  Config config;
  config.l4_every = 2;
  config.persistent_dir = "/nonexistent-persistent";
  auto plan = redundancy::AgreePlan(group_, config);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<int64_t> persisted;
  std::vector<std::pair<int64_t, int64_t>> records;
  test::FakeCheckpoints local;
  local.wait_persistent = [&](const std::string&, int64_t v) {
    persisted.push_back(v);
    return Status::Ok();
  };
  local.record_global = [&](const std::string&, int64_t c, int64_t p) {
    records.push_back({c, p});
    return Status::Ok();
  };
  redundancy::Levels levels(&group_, config, *plan, &local);
  EXPECT_FALSE(levels.redundant());
  // Every 2nd checkpoint (over all names) goes to the persistent tier.
  std::vector<bool> turns;
  for (int64_t v = 1; v <= 6; ++v) turns.push_back(levels.PersistTurn("s", v));
  EXPECT_EQ(turns, (std::vector<bool>{false, true, false, true, false, true}));
  ASSERT_TRUE(levels.AfterWait("s", 1, Level::kLocal).ok());
  ASSERT_TRUE(levels.AfterWait("s", 2, Level::kLocal).ok());
  ASSERT_TRUE(levels.AfterWait("s", 3, Level::kLocal).ok());
  // Version 4 is L4's turn, but its wait was for kPersistent itself.
  ASSERT_TRUE(levels.AfterWait("s", 4, Level::kPersistent).ok());
  ASSERT_TRUE(levels.AfterWait("s", 5, Level::kLocal).ok());
  ASSERT_TRUE(levels.AfterWait("s", 6, Level::kLocal).ok());
  EXPECT_EQ(persisted, (std::vector<int64_t>{2, 6}));
  // Each wait records once: persistent too on an L4 turn or a persistent
  // wait (after the persistent copies, never a second record).
  EXPECT_EQ(records, (std::vector<std::pair<int64_t, int64_t>>{
                         {1, -1}, {2, 2}, {3, -1}, {4, 4}, {5, -1}, {6, 6}}));
  EXPECT_EQ(levels.stats().l4_waits, 2u);
}

TEST_F(LevelsTest, WithL4OffEveryCheckpointGoesToThePersistentTierAndNoWaitIsAnL4Turn) {
  Config config;
  config.persistent_dir = "/nonexistent-persistent";
  auto plan = redundancy::AgreePlan(group_, config);
  ASSERT_TRUE(plan.ok());
  int persisted = 0;
  test::FakeCheckpoints local;
  local.wait_persistent = [&](const std::string&, int64_t) {
    ++persisted;
    return Status::Ok();
  };
  redundancy::Levels levels(&group_, config, *plan, &local);
  for (int64_t v = 1; v <= 3; ++v) {
    EXPECT_TRUE(levels.PersistTurn("s", v));
    ASSERT_TRUE(levels.AfterWait("s", v, Level::kLocal).ok());
  }
  EXPECT_EQ(persisted, 0);
  EXPECT_EQ(levels.stats().l4_waits, 0u);
}

TEST_F(LevelsTest, AFailedPersistentWaitFailsTheWait) {
  Config config;
  config.l4_every = 1;
  config.persistent_dir = "/nonexistent-persistent";
  auto plan = redundancy::AgreePlan(group_, config);
  ASSERT_TRUE(plan.ok());
  test::FakeCheckpoints local;
  local.wait_persistent = [](const std::string&, int64_t) { return Status::Io("disk gone"); };
  redundancy::Levels levels(&group_, config, *plan, &local);
  ASSERT_TRUE(levels.PersistTurn("s", 1));
  Status s = levels.AfterWait("s", 1, Level::kLocal);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find("persistent (CAIRN_L4_EVERY)"), std::string::npos) << s.ToString();
  EXPECT_EQ(levels.stats().l4_waits, 0u);
}

TEST_F(LevelsTest, SettingsErrorsSayWhy) {
  Config config;
  config.l4_every = 1;
  auto no_dir = redundancy::AgreePlan(group_, config);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), Code::kConfig);
  EXPECT_NE(no_dir.status().message().find("no persistent directory"), std::string::npos);
  EXPECT_NE(no_dir.status().message().find("mpi.l4_every (CAIRN_L4_EVERY)"), std::string::npos);
  config.l4_every = 0;
  config.l2_every = 1;
  auto one_node = redundancy::AgreePlan(group_, config);
  ASSERT_FALSE(one_node.ok());
  EXPECT_NE(one_node.status().message().find("at least two nodes"), std::string::npos);
}

// The settings are configuration keys: from the file ([mpi]) or the
// environment (the same variables as before), a bad value named.
TEST_F(LevelsTest, SettingsAreConfigurationKeys) {
  auto file = LoadConfigFromString("[mpi]\nl2_every = 2\nl3_every = 3\nl3_group = 4\nl4_every = 5\n", "cairn.toml",
                                   /*apply_environment=*/false);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->l2_every, 2);
  EXPECT_EQ(file->l3_every, 3);
  EXPECT_EQ(file->l3_group, 4);
  EXPECT_EQ(file->l4_every, 5);
  setenv("CAIRN_L2_EVERY", "7", 1);
  auto env = LoadConfigFromString("[mpi]\nl2_every = 2\n", "cairn.toml", /*apply_environment=*/true);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->l2_every, 7);  // the environment wins
  setenv("CAIRN_L2_EVERY", "often", 1);
  auto bad = LoadConfigFromString("", "cairn.toml", /*apply_environment=*/true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kConfig);
  EXPECT_NE(bad.status().message().find("CAIRN_L2_EVERY='often'"), std::string::npos) << bad.status().ToString();
  unsetenv("CAIRN_L2_EVERY");
  auto negative = LoadConfigFromString("[mpi]\nl3_every = -1\n", "cairn.toml", false);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("'mpi.l3_every'"), std::string::npos) << negative.status().ToString();
}

TEST_F(LevelsTest, ARestoreWithoutLocalFileCountsAsPersistent) {
  Config config;
  config.scratch_dir = ::testing::TempDir() + "/levels-test-empty";
  auto plan = redundancy::AgreePlan(group_, config);
  ASSERT_TRUE(plan.ok());
  redundancy::Levels levels(&group_, config, *plan, {});
  levels.CountRestore("s", 3);
  const MpiStats st = levels.stats();
  EXPECT_EQ(st.restored_l4, 1u);
  EXPECT_EQ(st.restored_local, 0u);
}

}  // namespace
}  // namespace cairn
