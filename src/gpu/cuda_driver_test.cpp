// The runtime loader of the CUDA driver (gpu/cuda_driver.hpp), against the
// fake driver (testing/fake_cuda) and against libraries that are not drivers.
#include "gpu/cuda_driver.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "testing/fake_cuda/fake_cuda_fixture.hpp"

namespace cairn::gpu {
namespace {

using ::cairn::test::ScopedEnv;
#if CAIRN_TEST_FAKE_CUDA
using ::cairn::test::kFakeCudaLib;
#endif

#if !CAIRN_GPU_HAVE_CUDA

TEST(CudaDriverStubTest, LoadSaysBuiltWithoutCuda) {
  auto d = Driver::Load();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kUnsupported);
  EXPECT_NE(d.status().message().find("built without CUDA support"), std::string::npos);
  auto g = Driver::Get();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kUnsupported);
  EXPECT_FALSE(kBuiltWithCuda);
}

#else

TEST(CudaDriverTest, NonexistentPathIsAClearError) {
  auto d = Driver::Load("/nonexistent/dir/libcuda.so.1");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kUnsupported);
  const std::string m = d.status().message();
  EXPECT_NE(m.find("/nonexistent/dir/libcuda.so.1"), std::string::npos) << m;
  EXPECT_NE(m.find("from argument"), std::string::npos) << m;
  EXPECT_NE(m.find("cannot load"), std::string::npos) << m;
}

TEST(CudaDriverTest, EnvVarNamesTheLibrary) {
  ScopedEnv env(kDriverEnvVar, "/nonexistent/fake-driver.so");
  auto d = Driver::Load();
  ASSERT_FALSE(d.ok());
  const std::string m = d.status().message();
  EXPECT_NE(m.find("/nonexistent/fake-driver.so"), std::string::npos) << m;
  EXPECT_NE(m.find("from CAIRN_CUDA_DRIVER"), std::string::npos) << m;
}

TEST(CudaDriverTest, DefaultLibraryIsLibcudaSo1) {
  ScopedEnv env(kDriverEnvVar, nullptr);
  auto d = Driver::Load();
  if (d.ok()) {  // a machine with a real driver and a GPU
    EXPECT_EQ((*d)->path(), "libcuda.so.1");
    EXPECT_EQ((*d)->path_source(), "default");
    EXPECT_GT((*d)->device_count(), 0);
    return;
  }
  EXPECT_EQ(d.status().code(), Code::kUnsupported);
  const std::string m = d.status().message();
  EXPECT_NE(m.find("libcuda.so.1"), std::string::npos) << m;
  EXPECT_NE(m.find("CAIRN_CUDA_DRIVER"), std::string::npos) << m;  // tells how to override
}

TEST(CudaDriverTest, LibraryWithoutTheEntryPointsIsRejected) {
  auto d = Driver::Load("libm.so.6");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kUnsupported);
  const std::string m = d.status().message();
  EXPECT_NE(m.find("lacks cuGetErrorName"), std::string::npos) << m;
  EXPECT_NE(m.find("libm.so.6"), std::string::npos) << m;
}

#ifdef CAIRN_CUDA_STUB_LIB
// The toolkit's stub libcuda.so exports what the real driver exports, and its
// cuInit always fails: loading it proves that every ABI name the loader
// resolves is one NVIDIA's driver has.
TEST(CudaDriverTest, NvidiaStubLibraryHasEveryEntryPoint) {
  auto d = Driver::Load(CAIRN_CUDA_STUB_LIB);
  ASSERT_FALSE(d.ok());
  const std::string m = d.status().message();
  EXPECT_EQ(m.find("lacks"), std::string::npos) << m;
  EXPECT_NE(m.find("cuInit failed"), std::string::npos) << m;
}
#endif

TEST(CudaDriverTest, GetReturnsTheSameResultToEveryThread) {
  std::vector<Result<const Driver*>> results;
  results.reserve(8);
  for (int i = 0; i < 8; ++i) results.push_back(Status::Internal("unset"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&results, i] { results[static_cast<size_t>(i)] = Driver::Get(); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_EQ(r.ok(), results[0].ok());
    if (r.ok()) {
      EXPECT_EQ(r.value(), results[0].value());
    } else {
      EXPECT_EQ(r.status().message(), results[0].status().message());
      EXPECT_EQ(r.status().code(), Code::kUnsupported);
    }
  }
}

TEST(CudaDriverTest, CodeForCuResult) {
  EXPECT_EQ(CodeForCuResult(CUDA_SUCCESS), Code::kOk);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_OUT_OF_MEMORY), Code::kNoMemory);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_NO_DEVICE), Code::kUnsupported);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_INVALID_VALUE), Code::kInvalidArgument);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), Code::kExists);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED), Code::kNotFound);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_INVALID_CONTEXT), Code::kState);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_ILLEGAL_ADDRESS), Code::kIo);
  EXPECT_EQ(CodeForCuResult(CUDA_ERROR_LAUNCH_FAILED), Code::kIo);
}

#if CAIRN_TEST_FAKE_CUDA

class CudaDriverFakeTest : public test::FakeCudaTest {};

TEST_F(CudaDriverFakeTest, LoadsTheFakeByPath) {
  EXPECT_EQ(d().path(), kFakeCudaLib);
  EXPECT_EQ(d().path_source(), "argument");
  EXPECT_EQ(d().version(), CUDA_VERSION);
  EXPECT_EQ(d().device_count(), 1);
  // Every entry point was resolved.
#define CAIRN_EXPECT_RESOLVED(name) EXPECT_NE(d().name, nullptr) << #name;
  CAIRN_CUDA_DRIVER_ENTRY_POINTS(CAIRN_EXPECT_RESOLVED)
#undef CAIRN_EXPECT_RESOLVED
  CUdeviceptr p = 0;
  ASSERT_EQ(d().cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  EXPECT_EQ(d().cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(CudaDriverFakeTest, LoadsTheFakeFromTheEnvironment) {
  ScopedEnv env(kDriverEnvVar, kFakeCudaLib);
  auto d2 = Driver::Load();
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  EXPECT_EQ((*d2)->path(), kFakeCudaLib);
  EXPECT_EQ((*d2)->path_source(), "CAIRN_CUDA_DRIVER");
  // The same library: both tables call the same functions.
  EXPECT_EQ((*d2)->cuMemAlloc, d().cuMemAlloc);
}

TEST_F(CudaDriverFakeTest, EntryPointsAreTheVersionedAbiNames) {
  void* h = dlopen(kFakeCudaLib, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(reinterpret_cast<void*>(d().cuMemAlloc), dlsym(h, "cuMemAlloc_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(d().cuMemcpyDtoHAsync), dlsym(h, "cuMemcpyDtoHAsync_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(d().cuStreamDestroy), dlsym(h, "cuStreamDestroy_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(d().cuEventDestroy), dlsym(h, "cuEventDestroy_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(d().cuMemHostRegister), dlsym(h, "cuMemHostRegister_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(d().cuDevicePrimaryCtxRelease),
            dlsym(h, "cuDevicePrimaryCtxRelease_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(d().cuMemsetD8), dlsym(h, "cuMemsetD8_v2"));
  dlclose(h);
}

TEST_F(CudaDriverFakeTest, CuInitFailureNamesTheError) {
  ResetFake();  // back to "before cuInit"
  ASSERT_EQ(ctl_.set_fail("cuInit:1:CUDA_ERROR_NO_DEVICE"), 0);
  auto d2 = Driver::Load(kFakeCudaLib);
  ASSERT_FALSE(d2.ok());
  EXPECT_EQ(d2.status().code(), Code::kUnsupported);
  const std::string m = d2.status().message();
  EXPECT_NE(m.find("cuInit failed"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"), std::string::npos)
      << m;
  // Not sticky: the next load initializes.
  auto d3 = Driver::Load(kFakeCudaLib);
  EXPECT_TRUE(d3.ok()) << d3.status().ToString();
}

TEST_F(CudaDriverFakeTest, NoDeviceIsAClearError) {
  ScopedEnv env("CAIRN_FAKE_CUDA_DEVICES", "0");
  ResetFake();
  auto d2 = Driver::Load(kFakeCudaLib);
  ASSERT_FALSE(d2.ok());
  EXPECT_EQ(d2.status().code(), Code::kUnsupported);
  EXPECT_NE(d2.status().message().find("no CUDA device"), std::string::npos)
      << d2.status().message();
}

TEST_F(CudaDriverFakeTest, CheckNamesTheCallAndTheError) {
  EXPECT_TRUE(d().Check(CUDA_SUCCESS, "cuMemAlloc").ok());
  Status s = d().Check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
  EXPECT_EQ(s.code(), Code::kNoMemory);
  EXPECT_EQ(s.message(), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  EXPECT_EQ(d().ErrorText(static_cast<CUresult>(12345)), "CUresult 12345");

  // CAIRN_CU names the API by its cuda.h name, not the ABI name.
  CUdeviceptr p = 0;
  Status z = CAIRN_CU(d(), cuMemAlloc, &p, 0);
  EXPECT_EQ(z.code(), Code::kInvalidArgument);
  EXPECT_EQ(z.message(), "cuMemAlloc: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_TRUE(CAIRN_CU(d(), cuCtxSynchronize).ok());
}

#endif  // CAIRN_TEST_FAKE_CUDA
#endif  // CAIRN_GPU_HAVE_CUDA

}  // namespace
}  // namespace cairn::gpu
