#include "os/sched/slice.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace cairn::os {
namespace {

// On its own thread: the slice is the thread's, and the test's thread
// keeps the default.
TEST(SliceTest, AThreadGetsTheSliceItAsksForOrIsToldWhyNot) {
  Status s;
  std::chrono::microseconds got{0};
  std::thread([&] {
    s = RequestSlice(std::chrono::microseconds(200));
    got = CurrentSlice();
  }).join();
  if (s.code() == Code::kUnsupported) GTEST_SKIP() << s.ToString();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got.count(), 200);
}

TEST(SliceTest, TheKernelClampsTooShortASlice) {
  Status s;
  std::chrono::microseconds got{0};
  std::thread([&] {
    s = RequestSlice(std::chrono::microseconds(1));
    got = CurrentSlice();
  }).join();
  if (s.code() == Code::kUnsupported) GTEST_SKIP() << s.ToString();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got.count(), 100);  // the kernel's floor, 100 us
}

}  // namespace
}  // namespace cairn::os
