// DeviceIo against the fake CUDA driver: streams made once, the copies on
// each stream, the drain through a bounce buffer with the tail zeroed.
#include "engine/stages/device_io.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "testing/fake_cuda/fake_cuda_fixture.hpp"

namespace cairn::core {
namespace {

TEST(DeviceIoTest, WithoutARuntimeEveryUseSaysWhy) {
  DeviceIo io(nullptr, Status::Unsupported("no GPU here"), 4096, 2);
  const Status s = io.Ensure();
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("no GPU here"), std::string::npos) << s.ToString();
  uint8_t a = 1, b = 0;
  const CopySegment seg{.dst = &b, .src = &a, .bytes = 1};
  EXPECT_EQ(io.RestoreCopy({&seg, 1}).code(), Code::kUnsupported);
  EXPECT_EQ(b, 0);
}

#if CAIRN_TEST_FAKE_CUDA

class DeviceIoFakeTest : public test::FakeCudaTest {
 protected:
  std::unique_ptr<gpu::Runtime> OpenRuntime() {
    auto rt = gpu::Runtime::Open(d(), -1);
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();
    return rt.ok() ? std::move(rt).value() : nullptr;
  }
  void* DeviceAlloc(size_t n) {
    CUdeviceptr p = 0;
    EXPECT_EQ(d().cuMemAlloc(&p, n), CUDA_SUCCESS);
    allocs_.push_back(p);
    return reinterpret_cast<void*>(p);
  }
  void TearDown() override {
    for (CUdeviceptr p : allocs_) d().cuMemFree(p);
    test::FakeCudaTest::TearDown();
  }
  std::vector<CUdeviceptr> allocs_;
};

TEST_F(DeviceIoFakeTest, EnsureMakesTheStreamsOnceAndEachStreamCopies) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  {
    DeviceIo io(rt.get(), Status::Ok(), 4096, 2);
    ASSERT_TRUE(io.Ensure().ok());
    const auto streams = ctl_.call_count("cuStreamCreate");
    ASSERT_TRUE(io.Ensure().ok());
    EXPECT_EQ(ctl_.call_count("cuStreamCreate"), streams);  // made once

    std::vector<uint8_t> in(3000), out(3000, 0);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
    void* dev = DeviceAlloc(4096);
    const CopySegment up{.dst = dev, .src = in.data(), .bytes = in.size()};
    ASSERT_TRUE(io.CaptureCopy({&up, 1}).ok());
    const CopySegment down{.dst = out.data(), .src = dev, .bytes = out.size()};
    ASSERT_TRUE(io.RestoreCopy({&down, 1}).ok());
    EXPECT_EQ(out, in);

    std::fill(out.begin(), out.end(), 0);
    const CopySegment back{.dst = dev, .src = in.data(), .bytes = in.size()};
    ASSERT_TRUE(io.BackgroundCopy({&back, 1}).ok());
    ASSERT_TRUE(io.RestoreCopy({&down, 1}).ok());
    EXPECT_EQ(out, in);
  }
}

TEST_F(DeviceIoFakeTest, DrainZeroesTheTailWithOrWithoutABounceBuffer) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  DeviceIo io(rt.get(), Status::Ok(), 4096, 1);
  ASSERT_TRUE(io.Ensure().ok());
  std::vector<uint8_t> in(1000, 0x3c);
  void* dev = DeviceAlloc(4096);
  const CopySegment up{.dst = dev, .src = in.data(), .bytes = in.size()};
  ASSERT_TRUE(io.CaptureCopy({&up, 1}).ok());
  for (bool registered : {false, true}) {
    std::vector<uint8_t> chunk(4096, 0xff);  // stale bytes of an older block
    ASSERT_TRUE(io.Drain(chunk.data(), dev, 1000, 4096, registered).ok()) << registered;
    EXPECT_TRUE(std::equal(in.begin(), in.end(), chunk.begin())) << registered;
    EXPECT_TRUE(std::all_of(chunk.begin() + 1000, chunk.end(), [](uint8_t c) { return c == 0; }))
        << registered;
  }
}

// Several pieces alternating over 1, 2 and 3 bounce buffers (a piece is a
// quarter of the buffer): every byte lands at its offset, whichever buffer
// carried it, and the tail is zeroed.
TEST_F(DeviceIoFakeTest, DrainThroughSeveralBounceBuffersKeepsEveryPieceInPlace) {
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  constexpr uint32_t kBlock = 64 * 1024, kLength = kBlock - 1000;  // 4 pieces, the last partial
  std::vector<uint8_t> in(kLength);
  for (uint32_t i = 0; i < kLength; ++i) in[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  void* dev = DeviceAlloc(kBlock);
  for (int buffers : {1, 2, 3}) {
    DeviceIo io(rt.get(), Status::Ok(), kBlock, buffers);
    ASSERT_TRUE(io.Ensure().ok());
    const CopySegment up{.dst = dev, .src = in.data(), .bytes = in.size()};
    ASSERT_TRUE(io.CaptureCopy({&up, 1}).ok());
    std::vector<uint8_t> chunk(kBlock, 0xff);
    ASSERT_TRUE(io.Drain(chunk.data(), dev, kLength, kBlock, /*registered=*/false).ok()) << buffers;
    EXPECT_TRUE(std::equal(in.begin(), in.end(), chunk.begin())) << buffers << " buffers";
    EXPECT_TRUE(std::all_of(chunk.begin() + kLength, chunk.end(), [](uint8_t c) { return c == 0; })) << buffers;
  }
}

#endif  // CAIRN_TEST_FAKE_CUDA

}  // namespace
}  // namespace cairn::core
