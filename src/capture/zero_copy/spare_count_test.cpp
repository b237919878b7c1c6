#include "capture/zero_copy/spare_count.hpp"

#include <gtest/gtest.h>

namespace cairn::core {
namespace {

TEST(SpareCountTest, StartsAtAQuarterAndNoneInATinyCache) {
  SpareCount s;
  EXPECT_EQ(s.Keep(16), 4u);
  EXPECT_EQ(s.Keep(4), 1u);
  EXPECT_EQ(s.Keep(3), 0u);
  s.Short(3);  // nothing to learn there
  EXPECT_EQ(s.Keep(3), 0u);
  EXPECT_EQ(s.Keep(16), 4u);
}

TEST(SpareCountTest, GrowsWhenShortUpToHalfAndShrinksAfterQuietEpochsDownToOne) {
  SpareCount s;
  s.Short(16);
  EXPECT_EQ(s.Keep(16), 5u);
  for (int i = 0; i < 10; ++i) s.Short(16);
  EXPECT_EQ(s.Keep(16), 8u);  // half at most
  s.EndEpoch(16);             // an epoch that ran short keeps its count
  EXPECT_EQ(s.Keep(16), 8u);
  s.EndEpoch(16);             // a quiet one gives one back
  EXPECT_EQ(s.Keep(16), 7u);
  for (int i = 0; i < 20; ++i) s.EndEpoch(16);
  EXPECT_EQ(s.Keep(16), 1u);  // one at least
  s.Short(16);
  EXPECT_EQ(s.Keep(16), 2u);
}

}  // namespace
}  // namespace cairn::core
