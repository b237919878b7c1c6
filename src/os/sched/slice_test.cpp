#include "os/sched/slice.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace cairn::os {
namespace {

// Asks for `slice` on a thread of its own (the slice is the thread's; the
// test's thread keeps the default) and reads back what the kernel kept.
struct Asked {
  Status status;
  std::chrono::microseconds kept{0};
};
Asked AskOnAThread(std::chrono::microseconds slice) {
  Asked a;
  std::thread([&] {
    a.status = RequestSlice(slice);
    a.kept = CurrentSlice();
  }).join();
  return a;
}

TEST(SliceTest, AThreadGetsTheSliceItAsksForOrIsToldWhyNot) {
  const Asked a = AskOnAThread(std::chrono::microseconds(200));
  if (a.status.code() == Code::kUnsupported) GTEST_SKIP() << a.status.ToString();
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.kept.count(), 200);
}

TEST(SliceTest, TheKernelClampsTooShortASlice) {
  const Asked a = AskOnAThread(std::chrono::microseconds(1));
  if (a.status.code() == Code::kUnsupported) GTEST_SKIP() << a.status.ToString();
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.kept.count(), 100);  // the kernel's floor, 100 us
}

}  // namespace
}  // namespace cairn::os
