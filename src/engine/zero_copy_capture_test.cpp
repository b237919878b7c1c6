// ZeroCopyCapture: the pipeline's zero-copy epochs, without the pipeline:
// an epoch begun, read on its own thread, waited for, and the fallback to a
// copy with its reason.
#include "engine/zero_copy_capture.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <vector>

#include "os/mem/memory.hpp"

namespace cairn::core {
namespace {

constexpr uint64_t kBytes = 64 * 4096;

class ZeroCopyEpochsTest : public ::testing::Test {
 protected:
  ZeroCopyEpochsTest() : data_(kBytes / 8, 7) {
    config_ = DefaultConfig();
    config_.capture = CaptureMode::kZeroCopy;
    config_.block_bytes = 64 << 10;
  }
  // One region of `memory` over data_ (host memory, 8-byte aligned).
  void Plan(MemoryKind memory) {
    sources_ = {{.spec = {.id = 0, .memory = memory, .bytes = kBytes}, .data = data_.data()}};
    layout_ = format::Layout::Make(SpecsOf(sources_), static_cast<uint32_t>(config_.block_bytes));
  }

  Mutex mu_, capture_mu_;
  std::condition_variable_any idle_;
  Config config_;
  ZeroCopyStats stats_ CAIRN_GUARDED_BY(mu_);
  std::vector<uint64_t> data_;
  std::vector<CaptureSource> sources_;
  format::Layout layout_;
};

TEST_F(ZeroCopyEpochsTest, AnEpochIsReadOnItsOwnThreadAndWaitedFor) {
  Plan(MemoryKind::kHost);
  ZeroCopyCapture zc(&mu_, &capture_mu_, &idle_, config_, &stats_);
  MutexLock capture(&capture_mu_);
  bool read = false;
  {
    MutexLock lock(&mu_);
    if (!zc.Begin(layout_, sources_, "z", 1, std::chrono::steady_clock::now())) {
      GTEST_SKIP() << "no write protection here: " << stats_.note;
    }
    EXPECT_EQ(stats_.versions, 1u);
    zc.Read(layout_, sources_, [&](ZeroCopy* engine, const std::vector<CaptureSource>& lent) {
      MutexLock l(&mu_);
      read = engine != nullptr && lent.size() == sources_.size() && lent[0].data == sources_[0].data;
      zc.EndEpoch();
      zc.EndRead();
    });
  }
  zc.WaitIdle();  // returns once the reader called EndRead
  {
    MutexLock lock(&mu_);
    EXPECT_TRUE(read);
    ZeroCopyStats counted;
    zc.AddCounters(&counted);
    EXPECT_GT(counted.protected_bytes, 0u);
  }
  zc.Join();
  data_[0] = 9;  // no protection is left on the memory
}

TEST_F(ZeroCopyEpochsTest, MemoryThatIsNotHostIsCopiedAndTheFirstCopySaysWhy) {
  Plan(MemoryKind::kDevice);
  ZeroCopyCapture zc(&mu_, &capture_mu_, &idle_, config_, &stats_);
  MutexLock capture(&capture_mu_);
  MutexLock lock(&mu_);
  EXPECT_FALSE(zc.Begin(layout_, sources_, "z", 3, std::chrono::steady_clock::now()));
  EXPECT_FALSE(zc.Begin(layout_, sources_, "z", 4, std::chrono::steady_clock::now()));
  EXPECT_EQ(stats_.fallbacks, 2u);
  EXPECT_EQ(stats_.versions, 0u);
  EXPECT_NE(
      stats_.note.find("checkpoint 'z' 3 was copied, not zero-copy: region 0 is not host memory"),
      std::string::npos)
      << stats_.note;
  EXPECT_EQ(stats_.note.find("'z' 4"), std::string::npos) << "only the first copy is noted";
}

}  // namespace
}  // namespace cairn::core
