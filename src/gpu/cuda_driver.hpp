// The CUDA driver API, loaded at run time (docs/gpu.md).
//
// Cairn never links libcuda: Driver::Load dlopen()s the driver library
// ("libcuda.so.1", or $CAIRN_CUDA_DRIVER, or an explicit path), resolves every
// entry point Cairn uses with dlsym, calls cuInit(0) and counts the devices.
// Each entry point is resolved under the exported ABI name that cuda.h binds
// its API name to (cuMemAlloc -> cuMemAlloc_v2, cuStreamDestroy ->
// cuStreamDestroy_v2, ...), i.e. exactly what a program linked against
// libcuda would call, and each pointer has the type of the cuda.h declaration.
//
// Built without cuda.h (CAIRN_WITH_CUDA=OFF, or no toolkit found), the class
// is a stub: Load and Get return kUnsupported "built without CUDA support" and
// there are no entry points. Code that calls the driver is guarded by
// `#if CAIRN_HAVE_CUDA`; code that only asks whether a GPU is usable is not.
//
// Errors are values: a missing library, a missing symbol, a failed cuInit or
// no device each give kUnsupported with a message saying what and where.
// Nothing here aborts or exits.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cairn/status.hpp"

#if defined(CAIRN_HAVE_CUDA) && CAIRN_HAVE_CUDA
#include <cuda.h>
#define CAIRN_GPU_HAVE_CUDA 1
#else
#define CAIRN_GPU_HAVE_CUDA 0
#endif

namespace cairn::gpu {

// True when this build has the CUDA backend (cuda.h was found at build time).
inline constexpr bool kBuiltWithCuda = CAIRN_GPU_HAVE_CUDA;

// The library dlopen()ed when no path is given and $CAIRN_CUDA_DRIVER is unset
// or empty.
inline constexpr const char* kDefaultDriverLibrary = "libcuda.so.1";
// The environment variable naming another driver library (the fake one in
// tests: testing/fake_cuda).
inline constexpr const char* kDriverEnvVar = "CAIRN_CUDA_DRIVER";

#if CAIRN_GPU_HAVE_CUDA
// Every driver entry point Cairn uses, by its cuda.h API name. Keep in sync
// with testing/fake_cuda (which implements at least these).
#define CAIRN_CUDA_DRIVER_ENTRY_POINTS(X)                                         \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion)          \
  X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName)  \
  X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)   \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize)    \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)   \
  X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)   \
  X(cuEventQuery) X(cuEventDestroy) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree)   \
  X(cuMemAllocManaged) X(cuMemGetAddressRange) X(cuMemAllocHost) X(cuMemFreeHost) \
  X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemcpy) X(cuMemcpyHtoD)        \
  X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyAsync) X(cuMemcpyHtoDAsync)          \
  X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD8Async)     \
  X(cuPointerGetAttribute) X(cuPointerGetAttributes) X(cuMemAddressReserve)      \
  X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)   \
  X(cuMemSetAccess) X(cuMemGetAllocationGranularity)
#endif

// A loaded driver: the library handle, facts read at load, and (with CUDA)
// one function pointer per entry point, named like the cuda.h API:
//
//   const gpu::Driver& d = ...;
//   CUdeviceptr p;
//   CAIRN_RETURN_IF_ERROR(CAIRN_CU(d, cuMemAlloc, &p, bytes));
//
// (cuda.h's macros rename both the member and the call, e.g. to
// cuMemAlloc_v2, consistently.) The pointers never change after Load, so a
// const Driver may be used from any thread.
class Driver {
 public:
  // Loads the driver library at `path`; an empty path means $CAIRN_CUDA_DRIVER
  // when set and non-empty, else "libcuda.so.1" (found by the dynamic loader's
  // search path). Then resolves every entry point, calls cuInit(0), reads the
  // driver version and the device count. kUnsupported when the library cannot
  // be loaded, lacks a symbol, cuInit fails, or there is no device; always
  // kUnsupported "built without CUDA support" in a build without cuda.h.
  static Result<std::unique_ptr<Driver>> Load(std::string_view path = {});

  // The process-wide driver, loaded by the first call (from $CAIRN_CUDA_DRIVER
  // or libcuda.so.1) and kept for the life of the process; later calls return
  // the same pointer, or the same error. Thread-safe.
  static Result<const Driver*> Get();

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  ~Driver();

  // The path passed to dlopen, and where it came from ("argument",
  // "CAIRN_CUDA_DRIVER" or "default").
  const std::string& path() const { return path_; }
  const std::string& path_source() const { return path_source_; }
  // cuDriverGetVersion: 1000 * major + 10 * minor (13000 for CUDA 13.0).
  int version() const { return version_; }
  // cuDeviceGetCount at load (> 0).
  int device_count() const { return device_count_; }

#if CAIRN_GPU_HAVE_CUDA
#define CAIRN_CUDA_DRIVER_MEMBER_(name) decltype(&::name) name = nullptr;
  CAIRN_CUDA_DRIVER_ENTRY_POINTS(CAIRN_CUDA_DRIVER_MEMBER_)
#undef CAIRN_CUDA_DRIVER_MEMBER_

  // OK for CUDA_SUCCESS; otherwise a Status whose message names the call and
  // the error: "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)". The
  // code follows CodeForCuResult.
  Status Check(CUresult result, std::string_view call) const;
  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", from cuGetErrorName and
  // cuGetErrorString; "CUresult 12345" for a code the driver does not know.
  std::string ErrorText(CUresult result) const;
#endif

 private:
  Driver() = default;

  void* handle_ = nullptr;  // dlopen handle (RTLD_NODELETE: never unmapped)
  std::string path_;
  std::string path_source_;
  int version_ = 0;
  int device_count_ = 0;
};

#if CAIRN_GPU_HAVE_CUDA
// The Status code for a failed driver call: kNoMemory (out of memory),
// kUnsupported (no device, driver not initialized or too old, not supported or
// permitted), kInvalidArgument (invalid value, device or handle), kExists
// (host memory already registered), kNotFound (host memory not registered,
// symbol not found), kState (not ready, invalid or destroyed context), kIo for
// every other failure (a device-side error: illegal address, ECC, launch
// failure, ...). CUDA_SUCCESS maps to kOk.
Code CodeForCuResult(CUresult result);

// Calls driver.fn(args...) and turns its CUresult into a Status naming fn by
// its cuda.h API name: CAIRN_CU(d, cuMemFree, p).
#define CAIRN_CU(driver, fn, ...) ((driver).Check((driver).fn(__VA_ARGS__), #fn))
#endif

}  // namespace cairn::gpu
