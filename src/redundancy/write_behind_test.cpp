#include "redundancy/write_behind.hpp"

#include <gtest/gtest.h>

#include <atomic>

namespace cairn::redundancy {
namespace {

// Every pushed round is consumed once, in order, with the bytes it was
// filled with, although the producer refills slots while the consumer works.
TEST(WriteBehindTest, ConsumesEveryRoundInOrderWithItsBytes) {
  std::vector<uint64_t> seen;
  std::vector<uint8_t> firsts;
  {
    WriteBehind behind(3, [&](const WriteBehind::Round& round, uint64_t r) {
      seen.push_back(r);
      firsts.push_back(round.at(0).at(0));
    });
    for (uint64_t r = 1; r <= 50; ++r) {
      WriteBehind::Round* round = behind.Next();
      *round = {std::vector<uint8_t>(1000, static_cast<uint8_t>(r))};
      behind.Push(r);
    }
    behind.Finish();
    ASSERT_EQ(seen.size(), 50u);
  }
  for (uint64_t r = 1; r <= 50; ++r) {
    EXPECT_EQ(seen[r - 1], r);
    EXPECT_EQ(firsts[r - 1], static_cast<uint8_t>(r));
  }
}

// The producer never gets more than `depth` rounds ahead of the consumer:
// the consumer sees at most depth - 1 rounds pushed beyond the one it has.
TEST(WriteBehindTest, ProducerStaysWithinDepth) {
  std::atomic<uint64_t> pushed{0};
  uint64_t most_ahead = 0;
  WriteBehind behind(2, [&](const WriteBehind::Round&, uint64_t r) {
    most_ahead = std::max(most_ahead, pushed.load() - r);
  });
  for (uint64_t r = 1; r <= 200; ++r) {
    behind.Next();
    pushed = r;
    behind.Push(r);
  }
  behind.Finish();
  EXPECT_LE(most_ahead, 1u);
}

// Destroyed without Finish (a rebuild that failed mid-way): what was pushed
// is still consumed and the thread is joined.
TEST(WriteBehindTest, DestructorConsumesWhatWasPushed) {
  int consumed = 0;
  {
    WriteBehind behind(4, [&](const WriteBehind::Round&, uint64_t) { ++consumed; });
    for (uint64_t r = 1; r <= 3; ++r) {
      behind.Next();
      behind.Push(r);
    }
  }
  EXPECT_EQ(consumed, 3);
}

}  // namespace
}  // namespace cairn::redundancy
