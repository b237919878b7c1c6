#include "gpu/cuda_driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace cairn::gpu {

Driver::~Driver() {
  // RTLD_NODELETE keeps the library mapped: a driver is never unloaded while
  // the process may still hold its handles or run its threads.
  if (handle_ != nullptr) dlclose(handle_);
}

Result<const Driver*> Driver::Get() {
  // Loaded once; the result (a driver or the reason there is none) is kept.
  static const Result<const Driver*> driver = []() -> Result<const Driver*> {
    auto loaded = Load();
    if (!loaded.ok()) return loaded.status();
    return static_cast<const Driver*>(std::move(loaded).value().release());
  }();
  return driver;
}

#if !CAIRN_GPU_HAVE_CUDA

Result<std::unique_ptr<Driver>> Driver::Load(std::string_view /*path*/) {
  return Status::Unsupported(
      "built without CUDA support (cuda.h was not found at build time, or "
      "CAIRN_WITH_CUDA=OFF): device and managed memory are unavailable");
}

#else

namespace {

#define CAIRN_GPU_STR_(x) #x
// The exported name cuda.h binds an API name to: CAIRN_GPU_ABI_NAME(cuMemAlloc)
// is "cuMemAlloc_v2".
#define CAIRN_GPU_ABI_NAME(x) CAIRN_GPU_STR_(x)

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

}  // namespace

Code CodeForCuResult(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return Code::kOk;
    case CUDA_ERROR_OUT_OF_MEMORY: return Code::kNoMemory;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return Code::kUnsupported;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_HANDLE: return Code::kInvalidArgument;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return Code::kExists;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
    case CUDA_ERROR_NOT_FOUND: return Code::kNotFound;
    case CUDA_ERROR_NOT_READY:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ILLEGAL_STATE: return Code::kState;
    default: return Code::kIo;
  }
}

std::string Driver::ErrorText(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    return "CUresult " + std::to_string(static_cast<int>(result));
  }
  std::string s = name;
  if (cuGetErrorString != nullptr && cuGetErrorString(result, &text) == CUDA_SUCCESS &&
      text != nullptr) {
    s += " (";
    s += text;
    s += ")";
  }
  return s;
}

Status Driver::Check(CUresult result, std::string_view call) const {
  if (result == CUDA_SUCCESS) return Status::Ok();
  std::string m(call);
  m += ": ";
  m += ErrorText(result);
  return Status(CodeForCuResult(result), std::move(m));
}

Result<std::unique_ptr<Driver>> Driver::Load(std::string_view path) {
  std::unique_ptr<Driver> d(new Driver());
  if (!path.empty()) {
    d->path_ = std::string(path);
    d->path_source_ = "argument";
  } else if (const char* env = std::getenv(kDriverEnvVar); env != nullptr && *env != '\0') {
    d->path_ = env;
    d->path_source_ = kDriverEnvVar;
  } else {
    d->path_ = kDefaultDriverLibrary;
    d->path_source_ = "default";
  }
  std::string where = "CUDA driver '" + d->path_ + "' (";
  if (d->path_source_ == "default") {
    where += std::string("the default; set ") + kDriverEnvVar + "=/path/to/libcuda.so.1 to use another)";
  } else {
    where += "from " + d->path_source_ + ")";
  }

  dlerror();  // clear
  d->handle_ = dlopen(d->path_.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (d->handle_ == nullptr) {
    return Status::Unsupported("cannot load " + where + ": " + DlError() +
                               "; device and managed memory are unavailable (is the "
                               "NVIDIA driver installed?)");
  }

  // Resolve every entry point under its ABI name; report the first missing.
#define CAIRN_GPU_RESOLVE_(name)                                                  \
  {                                                                                \
    dlerror();                                                                     \
    void* sym = dlsym(d->handle_, CAIRN_GPU_ABI_NAME(name));                      \
    if (sym == nullptr) {                                                          \
      return Status::Unsupported(where + " lacks " + CAIRN_GPU_ABI_NAME(name) +    \
                                 " (the entry point of " #name                     \
                                 "): driver too old for this build (CUDA " +       \
                                 std::to_string(CUDA_VERSION) + " headers)?");    \
    }                                                                              \
    d->name = reinterpret_cast<decltype(d->name)>(sym);                           \
  }
  CAIRN_CUDA_DRIVER_ENTRY_POINTS(CAIRN_GPU_RESOLVE_)
#undef CAIRN_GPU_RESOLVE_

  if (CUresult r = d->cuInit(0); r != CUDA_SUCCESS) {
    return Status::Unsupported("cuInit failed on " + where + ": " + d->ErrorText(r) +
                               "; device and managed memory are unavailable");
  }
  if (CUresult r = d->cuDriverGetVersion(&d->version_); r != CUDA_SUCCESS) {
    return Status::Unsupported(d->Check(r, "cuDriverGetVersion").message() + " on " + where);
  }
  if (CUresult r = d->cuDeviceGetCount(&d->device_count_); r != CUDA_SUCCESS) {
    return Status::Unsupported(d->Check(r, "cuDeviceGetCount").message() + " on " + where);
  }
  if (d->device_count_ <= 0) {
    return Status::Unsupported("no CUDA device: " + where + " reports 0 devices; device and "
                               "managed memory are unavailable");
  }
  return d;
}

#endif  // CAIRN_GPU_HAVE_CUDA

}  // namespace cairn::gpu
