// Client::CheckpointDue (cairn_checkpoint_due): what the client measures for
// the interval model (models/interval_model.hpp, tested there) and the stats it
// reports. Time is injected (Config::now): every reading advances it by g_step
// (one second), so each timed call lasts exactly that.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cairn/cairn.hpp"
#include "models/interval_model.hpp"
#include "testing/test_util.hpp"

namespace cairn {
namespace {

using namespace test;

std::atomic<int64_t> g_seconds{1000};
std::atomic<int64_t> g_step{1};

std::chrono::steady_clock::time_point TickingClock() {
  const int64_t step = g_step.load();
  return std::chrono::steady_clock::time_point{} + std::chrono::seconds(g_seconds.fetch_add(step) + step);
}

void Advance(int64_t seconds) { g_seconds.fetch_add(seconds); }

// The decision, failing the test on an error.
bool Due(Client& client, const char* name) {
  auto due = client.CheckpointDue(name);
  EXPECT_TRUE(due.ok()) << due.status().ToString();
  return due.ok() && *due;
}

class CheckpointDueTest : public ScratchDirTest {
 protected:
  CheckpointDueTest() : ScratchDirTest("due") {}
};

TEST_F(CheckpointDueTest, WithoutAnMtbfItIsAConfigError) {
  Config c = MakeConfig();
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  auto due = client->CheckpointDue("x");
  ASSERT_FALSE(due.ok());
  EXPECT_EQ(due.status().code(), Code::kConfig);
  EXPECT_NE(due.status().message().find("checkpoint.mtbf_s (CAIRN_MTBF) is not set"), std::string::npos)
      << due.status().ToString();
}

TEST_F(CheckpointDueTest, MeasuresCheckpointsWaitsAndRestores) {
  Config c = MakeConfig();
  c.mtbf_s = 3600;
  c.now = &TickingClock;
  auto client = OpenClient(c);
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> data(64 * kKiB, 7);
  ASSERT_OK(client->Protect(1, data.data(), data.size()));

  // Nothing measured: due, and the stats are still zero.
  auto due = client->CheckpointDue("x");
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  EXPECT_TRUE(*due);
  EXPECT_EQ(client->GetStats().interval.period_s, 0);

  // C = 1 s; R estimated from 64 KiB at 1 GB/s: T = sqrt(2 (3600 - R)) ~ 84.85 s.
  ASSERT_OK(client->Checkpoint("x", 1));
  due = client->CheckpointDue("x");  // 1 s after the checkpoint returned
  ASSERT_TRUE(due.ok());
  EXPECT_FALSE(*due);
  IntervalStats st = client->GetStats().interval;
  const double r = 64.0 * 1024 / core::IntervalModel::kDefaultReadBytesPerS;
  EXPECT_DOUBLE_EQ(st.checkpoint_s, 1);
  EXPECT_DOUBLE_EQ(st.restore_s, r);
  EXPECT_DOUBLE_EQ(st.period_s, std::sqrt(2 * (3600 - r)));
  EXPECT_DOUBLE_EQ(st.waste, core::ExpectedWaste(1, r, 3600, st.period_s));
  EXPECT_TRUE(Due(*client, "other"));  // each name on its own
  Advance(84);
  EXPECT_TRUE(Due(*client, "x"));

  // The wait on version 1 blocked 1 s more: C = 2 s, T = sqrt(4 (3600 - R)),
  // counted from the wait's end.
  ASSERT_OK(client->Wait("x", 1, Level::kLocal));
  EXPECT_FALSE(Due(*client, "x"));
  st = client->GetStats().interval;
  EXPECT_DOUBLE_EQ(st.checkpoint_s, 2);
  EXPECT_DOUBLE_EQ(st.period_s, std::sqrt(4 * (3600 - r)));

  // A restore measures R (1 s).
  ASSERT_OK(client->Restore("x", 1));
  EXPECT_FALSE(Due(*client, "x"));
  st = client->GetStats().interval;
  EXPECT_DOUBLE_EQ(st.restore_s, 1);
  EXPECT_DOUBLE_EQ(st.period_s, std::sqrt(4 * 3599.0));
  auto latest = client->RestoreLatest("x");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_DOUBLE_EQ(client->GetStats().interval.restore_s, 1);

  // Failed calls measure nothing (they would last 5 s).
  g_step = 5;
  EXPECT_FALSE(client->Checkpoint("x", -1).ok());
  EXPECT_FALSE(client->Wait("x", 99, Level::kLocal).ok());
  EXPECT_FALSE(client->Restore("x", 99).ok());
  g_step = 1;
  EXPECT_FALSE(Due(*client, "x"));
  st = client->GetStats().interval;
  EXPECT_DOUBLE_EQ(st.checkpoint_s, 2);
  EXPECT_DOUBLE_EQ(st.restore_s, 1);

  ASSERT_OK(client->Close());
  EXPECT_EQ(client->CheckpointDue("x").status().code(), Code::kState);
}

}  // namespace
}  // namespace cairn
