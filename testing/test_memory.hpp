// Memory of each kind Cairn protects (host, CUDA device, CUDA managed), for
// tests that run the same checkpoint/restore/history scenario over every
// kind (TEST_P over MemoryKindsUnderTest()).
//
// Device and managed buffers come from the process-wide CUDA driver
// (gpu::Driver::Get(), the one the library itself uses): in cairn_tests that
// is the fake driver (testing/fake_cuda), which fake_cuda_driver_env.cpp
// names in CAIRN_CUDA_DRIVER before main() unless the environment already
// names a driver. Builds without the fake test the host kind only.
//
// Each parameterized test applies ConfigureFor(kind, config) to its Config:
// device regions go through a device cache half the size of the host cache
// (so that it fills, drains and evicts), managed regions go straight to the
// host cache (no device cache): both GPU paths of the pipeline are covered.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cairn/cairn.hpp"
#include "testing/test_util.hpp"

namespace cairn::test {

// Host always; device and managed when the build has the fake CUDA driver
// and it is the process-wide driver.
std::vector<MemoryKind> MemoryKindsUnderTest();

// "host", "device", "managed": names the instances (.../ClientTest.X/device).
std::string MemoryKindTestName(const ::testing::TestParamInfo<MemoryKind>& info);

// Sets the device-cache fields of c for regions of `kind` (see above).
void ConfigureFor(MemoryKind kind, Config& c);

// A ScratchDirTest-style fixture (one with MakeConfig(cache, block)) run over
// every memory kind: kind() is the parameter, MakeConfig applies
// ConfigureFor(kind()). Instantiate with
//   INSTANTIATE_TEST_SUITE_P(Kinds, MyKindTest,
//                            ::testing::ValuesIn(MemoryKindsUnderTest()), MemoryKindTestName);
template <typename Fixture>
class KindTest : public Fixture, public ::testing::WithParamInterface<MemoryKind> {
 protected:
  MemoryKind kind() const { return this->GetParam(); }
  Config MakeConfig(uint64_t cache = 1 * kMiB, uint64_t block = 64 * kKiB) const {
    Config c = Fixture::MakeConfig(cache, block);
    ConfigureFor(kind(), c);
    return c;
  }
};

// n bytes of `kind` memory, freed on destruction. Host memory is a plain
// heap allocation; device and managed memory come from cuMemAlloc /
// cuMemAllocManaged with device 0's primary context (retained for the
// buffer's life and made current on the calling thread). Reads and writes go
// through the driver's synchronous copies for device memory and plain memcpy
// otherwise (managed memory is host-accessible). An allocation failure is a
// test failure; data() is then nullptr and the other calls do nothing.
// Not thread-safe; call it from one thread at a time.
class TestBuffer {
 public:
  TestBuffer(MemoryKind kind, size_t bytes);
  // Allocated and filled with `bytes`.
  TestBuffer(MemoryKind kind, const std::vector<uint8_t>& bytes);
  ~TestBuffer();
  TestBuffer(TestBuffer&& other) noexcept;
  TestBuffer& operator=(TestBuffer&&) = delete;
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;

  MemoryKind kind() const { return kind_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }

  // Copies bytes to [data() + offset, ...); offset + bytes.size() <= size().
  void Write(const std::vector<uint8_t>& bytes, size_t offset = 0);
  // Sets every byte to `value`.
  void Fill(uint8_t value);
  // A copy of the whole buffer.
  std::vector<uint8_t> Read() const;

 private:
  MemoryKind kind_;
  size_t size_ = 0;
  void* data_ = nullptr;
  std::vector<uint8_t> host_;  // kHost storage
};

}  // namespace cairn::test
