// Test support for code that runs against the fake CUDA driver
// (libcairn_fake_cuda.so, whose path is test::kFakeCudaLib, testing/test_paths.hpp).
//
// FakeCudaTest resets the fake (fresh state, environment re-read), loads it
// through cairn::gpu::Driver, retains device 0's primary context and makes it
// current; TearDown releases it and resets the fake again, so that no stream
// worker outlives a test. Tests skip in builds without CUDA.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda_driver.hpp"
#include "testing/test_paths.hpp"

#if CAIRN_GPU_HAVE_CUDA && defined(CAIRN_HAVE_FAKE_CUDA)
#define CAIRN_TEST_FAKE_CUDA 1
#include "testing/fake_cuda/fake_cuda_control.h"
#else
#define CAIRN_TEST_FAKE_CUDA 0
#endif

namespace cairn::test {

// Sets (or, with nullptr, unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

#if CAIRN_TEST_FAKE_CUDA

// The fake's control functions (dlsym'ed once; the library stays loaded).
inline const cairn_fake_cuda::Control& FakeControl() {
  static const cairn_fake_cuda::Control control = [] {
    auto c = cairn_fake_cuda::Control::Open(kFakeCudaLib);
    if (!c) {
      ADD_FAILURE() << "cannot load the fake CUDA driver " << kFakeCudaLib;
      return cairn_fake_cuda::Control{};
    }
    return *c;
  }();
  return control;
}

class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctl_ = FakeControl();
    ASSERT_NE(ctl_.reset, nullptr);
    ctl_.reset();
    auto loaded = gpu::Driver::Load(kFakeCudaLib);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    driver_ = std::move(loaded).value();
    if (retain_context_) {
      ASSERT_EQ(d().cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
      ASSERT_EQ(d().cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    }
  }
  void TearDown() override {
    if (driver_ && ctx_ != nullptr) {
      d().cuCtxSetCurrent(nullptr);
      d().cuDevicePrimaryCtxRelease(0);
    }
    if (ctl_.pause_streams != nullptr) ctl_.pause_streams(0);
    if (ctl_.reset != nullptr) ctl_.reset();
  }

  const gpu::Driver& d() const { return *driver_; }

  // Reloads the fake after changing the environment (reset re-reads it).
  void ResetFake() {
    if (driver_ && ctx_ != nullptr) {
      d().cuCtxSetCurrent(nullptr);
      ctx_ = nullptr;
    }
    ctl_.reset();
  }

  bool retain_context_ = true;  // set false in a constructor to start without
  cairn_fake_cuda::Control ctl_;
  std::unique_ptr<gpu::Driver> driver_;
  CUcontext ctx_ = nullptr;
};

#endif  // CAIRN_TEST_FAKE_CUDA

}  // namespace cairn::test
